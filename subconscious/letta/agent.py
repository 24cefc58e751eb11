"""Which Letta agent to talk to, and making sure its model is one the server offers.

Pure decisions (``agent_candidates``, ``choose_model``, ``model_patch``) under a thin shell
(``resolve_agent``) that makes the calls. Order: LETTA_AGENT_ID → the agent pinned in the shared home
(passed in by the caller) → the per-user upstream config ``~/.letta/claude-subconscious/config.json``
(``{agentId}``) → import the bundled ``Subconscious.af``. Run it once per session (SessionStart or the
worker), never per tool call: it costs 2-4 HTTP calls.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from .config import AGENT_ID_RE, LettaSettings, validate_agent_id
from .errors import LettaConfigError, LettaNotFoundError

if TYPE_CHECKING:  # the shell only needs an object with the LettaClient methods
    from .client import LettaClient

PREFERRED_MODELS: tuple[str, ...] = (
    "letta/auto", "anthropic/claude-sonnet-4-5", "openai/gpt-4.1-mini", "anthropic/claude-haiku-4-5",
    "openai/gpt-5.2", "google_ai/gemini-3-flash", "google_ai/gemini-2.5-flash", "minimax/MiniMax-M2.7",
)
LAST_RESORT_MODELS = frozenset({"letta/letta-free"})
BUNDLED_AGENT_FILE = Path(__file__).resolve().parent.parent / "data" / "Subconscious.af"


def user_config_path(home: str | os.PathLike | None = None) -> Path:
    """Upstream's per-machine record of the imported agent (outside any shared state directory)."""
    return Path(home if home is not None else Path.home()) / ".letta" / "claude-subconscious" / "config.json"


# ---------------------------------------------------------------- pure decisions

@dataclass(frozen=True)
class AgentCandidate:
    source: str  # "env" | "pinned" | "user_config"
    agent_id: str
    strict: bool = False  # True: if it does not exist, stop with an error instead of falling back


def agent_candidates(env_agent_id: str | None, pinned_agent_id: str | None,
                     user_config_agent_id: str | None) -> tuple[list[AgentCandidate], list[str]]:
    """Agents to try in order (before importing), and notes about values that were ignored.

    An explicit LETTA_AGENT_ID is the only candidate and must be valid (LettaConfigError otherwise, with a
    hint when it looks like a name). Pinned and user-config ids that are malformed are skipped with a note.
    """
    if env_agent_id is not None and env_agent_id.strip():
        return [AgentCandidate("env", validate_agent_id(env_agent_id), strict=True)], []
    out: list[AgentCandidate] = []
    notes: list[str] = []
    for source, value in (("pinned", pinned_agent_id), ("user_config", user_config_agent_id)):
        if value is None or value == "":
            continue
        if not isinstance(value, str) or not AGENT_ID_RE.match(value):
            notes.append(f"ignored {source} agent id {str(value)[:60]!r}: not an agent-<uuid>")
            continue
        if all(c.agent_id != value for c in out):
            out.append(AgentCandidate(source, value))
    return out, notes


@dataclass(frozen=True)
class ModelChoice:
    model: str | None  # None: nothing offered, leave the agent alone
    reason: str  # "requested" | "kept" | "preferred" | "server-first" | "none-available"
    notes: tuple[str, ...] = ()


def choose_model(available: Sequence[str], current: str | None, requested: str | None,
                 preferences: Sequence[str] = PREFERRED_MODELS) -> ModelChoice:
    """LETTA_MODEL if offered, else the agent's current model if offered, else the first offered preference,
    else the server's first model (letta/letta-free only if nothing else is offered)."""
    offered = [m for m in available if isinstance(m, str) and m]
    notes: list[str] = []
    if requested:
        if requested in offered:
            return ModelChoice(requested, "requested")
        notes.append(f"LETTA_MODEL {requested!r} is not offered by this server; "
                     f"offered: {', '.join(offered[:8]) or 'none'}")
    if current and current in offered:
        return ModelChoice(current, "kept", tuple(notes))
    for pref in preferences:
        if pref in offered:
            return ModelChoice(pref, "preferred", tuple(notes))
    if offered:
        # letta/letta-free is listed first by every self-hosted server but calls Letta's hosted inference over
        # the internet; a provider the user configured (e.g. openai-proxy/<model>) is the better default there.
        usable = [m for m in offered if m not in LAST_RESORT_MODELS] or offered
        return ModelChoice(usable[0], "server-first", tuple(notes))
    notes.append("the server lists no models; the agent's model was left as it is")
    return ModelChoice(None, "none-available", tuple(notes))


def model_patch(agent_model: str | None, agent_context_window: int | None, choice: ModelChoice,
                requested_context_window: int | None, listed_context_window: int | None) -> dict | None:
    """The PATCH body {model, context_window_limit} needed to apply ``choice``, or None if nothing changes."""
    if choice.model is None:
        return None
    changing_model = choice.model != agent_model
    changing_window = requested_context_window is not None and requested_context_window != agent_context_window
    if not (changing_model or changing_window):
        return None
    body: dict = {"model": choice.model}
    window = requested_context_window if requested_context_window is not None else listed_context_window
    if window is not None:
        body["context_window_limit"] = int(window)
    return body


def agent_model_of(agent: Mapping) -> tuple[str | None, int | None]:
    """(model handle, context window) of an AgentState dict."""
    llm = agent.get("llm_config") if isinstance(agent.get("llm_config"), Mapping) else {}
    model = agent.get("model") or llm.get("handle")
    cw = llm.get("context_window")
    return (model if isinstance(model, str) else None), (cw if isinstance(cw, int) else None)


def af_model_of(af_bytes: bytes) -> str | None:
    """The model handle an agent file asks for (its first agent's llm_config.handle)."""
    try:
        doc = json.loads(af_bytes)
        llm = doc["agents"][0].get("llm_config") or {}
        handle = llm.get("handle") or doc["agents"][0].get("model")
        return handle if isinstance(handle, str) else None
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return None


# ---------------------------------------------------------------- per-user config file

def read_user_config(path: Path) -> tuple[str | None, bool]:
    """(agentId or None, readable). A file that exists but cannot be parsed is reported as unreadable."""
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, True
    except OSError:
        return None, False
    try:
        doc = json.loads(raw)
    except ValueError:
        return None, False
    if not isinstance(doc, dict):
        return None, False
    agent = doc.get("agentId")
    return (agent if isinstance(agent, str) else None), True


def write_user_config(path: Path, agent_id: str, model: str | None) -> None:
    """Atomically write {agentId, importedAt, model} (file 0600, directory 0700), keeping unknown keys."""
    from ..base.atomic import atomic_write, ensure_dir

    ensure_dir(path.parent)
    doc: dict = {}
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(old, dict):
            doc.update(old)
    except (OSError, ValueError):
        pass
    doc.update(agentId=agent_id, importedAt=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), model=model)
    atomic_write(path, json.dumps(doc, indent=2) + "\n")


# ---------------------------------------------------------------- shell

@dataclass
class ResolvedAgent:
    agent_id: str
    source: str  # "env" | "pinned" | "user_config" | "imported"
    agent: dict  # AgentState with blocks (after any model PATCH)
    model: str | None
    model_changed: bool
    notes: list[str] = field(default_factory=list)  # things worth a log line (fallbacks, unavailable model)


def resolve_agent(client: "LettaClient", settings: LettaSettings, *,
                  pinned_agent_id: str | Callable[[], str | None] | None = None,
                  config_path: Path | None = None, agent_file: bytes | Path | None = None,
                  save_user_config: bool = True) -> ResolvedAgent:
    """Find (or import) the agent and make sure its model is offered; see the module docstring.

    ``pinned_agent_id`` is the agent recorded in the shared home (a value or a callable, so the caller's
    state store stays out of this package). An imported agent is recorded in ``config_path`` (default
    ``~/.letta/claude-subconscious/config.json``) unless that file exists but cannot be parsed (it is never
    overwritten then). Raises LettaError subclasses; LettaNotFoundError only for a missing LETTA_AGENT_ID.
    """
    pinned = pinned_agent_id() if callable(pinned_agent_id) else pinned_agent_id
    cfg_path = config_path if config_path is not None else user_config_path()
    cfg_agent, cfg_readable = read_user_config(cfg_path)
    candidates, notes = agent_candidates(settings.agent_id, pinned, cfg_agent)
    if not cfg_readable:
        notes.append(f"{cfg_path} exists but could not be read as JSON; left untouched")

    models = client.list_models()
    handles = [m.get("handle") for m in models if isinstance(m.get("handle"), str)]
    windows = {m["handle"]: m.get("context_window") for m in models if isinstance(m.get("handle"), str)}

    agent: dict | None = None
    source = ""
    for cand in candidates:
        try:
            agent = client.get_agent(cand.agent_id, include_blocks=True)
            source = cand.source
            break
        except LettaNotFoundError as e:
            if cand.strict:
                raise LettaNotFoundError(f"LETTA_AGENT_ID {cand.agent_id} does not exist on {client.base_url}",
                                         "check the id, or unset LETTA_AGENT_ID to use the subconscious agent",
                                         status=e.status) from None
            notes.append(f"{cand.source} agent {cand.agent_id} not found on this server; trying the next choice")

    if agent is None:
        content = agent_file.read_bytes() if isinstance(agent_file, Path) else agent_file
        if content is None:
            try:
                content = BUNDLED_AGENT_FILE.read_bytes()
            except OSError as e:
                raise LettaConfigError("the bundled agent file Subconscious.af is missing",
                                       "reinstall subconscious", detail=type(e).__name__) from None
        choice = choose_model(handles, af_model_of(content), settings.model)
        notes.extend(choice.notes)
        new_ids = client.import_agent_file(content, model=choice.model)
        agent = client.get_agent(new_ids[0], include_blocks=True)
        source = "imported"
        if save_user_config and cfg_readable:
            write_user_config(cfg_path, agent["id"], choice.model)
        cur_model, cur_window = agent_model_of(agent)
        patch = model_patch(cur_model, cur_window, choice, settings.context_window, windows.get(choice.model))
    else:
        cur_model, cur_window = agent_model_of(agent)
        choice = choose_model(handles, cur_model, settings.model)
        notes.extend(choice.notes)
        patch = model_patch(cur_model, cur_window, choice, settings.context_window, windows.get(choice.model))

    changed = False
    if patch is not None:
        patched = client.update_agent(agent["id"], patch)
        agent = patched if isinstance(patched, dict) and isinstance(patched.get("blocks"), list) \
            else client.get_agent(agent["id"], include_blocks=True)
        changed = True
    model, _ = agent_model_of(agent)
    return ResolvedAgent(agent_id=agent["id"], source=source, agent=agent, model=model, model_changed=changed,
                         notes=notes)
