"""SessionStart's agent check, remembered on this machine for a while (``<state dir>/agent-check.json``).

Resolving the agent costs two requests (the server's models, the agent with its blocks) and the httpx
client's import: every SessionStart paid them although the answer rarely changes. A check that found the
agent usable is remembered with what it was asked (server, LETTA_AGENT_ID, the pinned agent, LETTA_MODEL,
LETTA_CONTEXT_WINDOW); a SessionStart asking the same within ``CHECK_SECONDS`` uses the agent directly and
makes one request (the new conversation; none on a resume). Anything else asked, or the agent gone (the
conversation cannot be created: the caller forgets the check), checks again in full. A session with neither
LETTA_AGENT_ID nor a pinned agent (the first one: the agent is imported) is never remembered.

Stdlib only; the file is machine-local (never synced), 0600, replaced by rename.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

CHECK_SECONDS = 3600.0
FILE = "agent-check.json"


def asked(settings, pinned) -> list | None:
    """What a check is remembered for; None when it must not be (no explicit or pinned agent)."""
    pinned = pinned if isinstance(pinned, str) and pinned else None
    if not settings.agent_id and pinned is None:
        return None
    return [settings.base_url, settings.agent_id, pinned, settings.model, settings.context_window]


def recent(root: Path, question: list | None, now: float | None = None) -> tuple[str, str] | None:
    """(agent id, agent name) of a check of ``question`` less than CHECK_SECONDS ago, else None."""
    if question is None:
        return None
    try:
        data = json.loads((Path(root) / FILE).read_bytes())
        at, agent_id, name = data["at"], data["agent_id"], data["name"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    now = time.time() if now is None else now
    if data.get("asked") != question or not isinstance(at, (int, float)) or not 0 <= now - at < CHECK_SECONDS:
        return None
    if not isinstance(agent_id, str) or not agent_id.startswith("agent-") or not isinstance(name, str):
        return None
    return agent_id, name


def remember(root: Path, question: list | None, agent_id: str, name: str, now: float | None = None) -> None:
    if question is None:
        return
    from ..base.atomic import atomic_write, ensure_dir

    ensure_dir(Path(root))
    atomic_write(Path(root) / FILE, json.dumps({"asked": question, "agent_id": agent_id, "name": name,
                                                "at": time.time() if now is None else now}), durable=False)


def forget(root: Path) -> None:
    try:
        os.unlink(Path(root) / FILE)
    except OSError:
        pass
