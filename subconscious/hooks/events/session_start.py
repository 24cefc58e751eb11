"""SessionStart: fix the session's home (recorded once in the machine-local session file: every later hook
and the worker use it, whatever the cwd does), resolve the agent (once per session), create or reuse this
session's conversation, record it, queue the start message for the worker (once per conversation: not
again on resume, compact or clear), clean legacy CLAUDE.md sections and sweep machine-local temp files."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from ...local import sessions as localsession
from ..event import HookEvent
from ..pipeline import SessionContext, now_iso, open_session
from ...state.records import SessionState

log = logging.getLogger("subconscious")
PIN = "agentId"
RESUMED = ("resume", "compact", "clear")  # sources of a SessionStart that continues a session


def resolve(ctx: SessionContext, client) -> tuple[str, str]:
    """(agent id, agent name); pins the agent in the shared home so every machine feeds one agent."""
    from ...letta.agent import resolve_agent
    from ...letta.config import LettaSettings

    letta_settings = LettaSettings.from_env(os.environ)  # validates LETTA_AGENT_ID with a helpful message
    pinned = ctx.store.setting(PIN)
    resolved = resolve_agent(client, letta_settings, pinned_agent_id=pinned if isinstance(pinned, str) else None)
    for note in resolved.notes:
        log.info("session-start: %s", note)
    if resolved.source != "env" and pinned != resolved.agent_id:
        ctx.store.put_setting(PIN, resolved.agent_id)
        log.info("session-start: pinned agent %s in %s (%s)", resolved.agent_id, ctx.store.home, resolved.source)
    return resolved.agent_id, str(resolved.agent.get("name") or "Subconscious")


def conversation_for(ctx: SessionContext, client, agent_id: str) -> str:
    entry = ctx.store.conversation(ctx.session_id)
    if entry is not None and entry.agent_id == agent_id:
        return entry.conversation_id  # resume, or a second hook run: same conversation
    if entry is not None and entry.agent_id is None:
        # upstream's legacy entry (a bare conversation id): keep the conversation, record its agent
        ctx.store.put_conversation(ctx.session_id, entry.conversation_id, agent_id)
        return entry.conversation_id
    retired = ctx.store.retired_conversation(ctx.session_id) if entry is None else None
    if retired is not None and retired.get("agentId") == agent_id and _safe_id(retired["conversationId"]):
        # gc retired it (on this or another machine) and it comes back: the same conversation, never a new
        # one that would get the whole transcript again (begin() restores the cursor from the record)
        ctx.store.put_conversation(ctx.session_id, retired["conversationId"], agent_id)
        log.info("session-start: session %s comes back after gc: conversation %s, cursor %s kept", ctx.session_id,
                 retired["conversationId"], retired.get("cursor", -1))
        return retired["conversationId"]
    conv = client.create_conversation(agent_id)["id"]
    if entry is not None:
        log.info("session-start: agent changed (%s → %s); new conversation %s", entry.agent_id, agent_id, conv)
    ctx.store.put_conversation(ctx.session_id, conv, agent_id)
    return conv


def _safe_id(conv: str) -> bool:
    """A conversation id from the shared home that is safe to use (it goes into URL paths)."""
    from ...letta.config import LettaConfigError, check_id

    try:
        check_id(conv, "conversation id")
        return True
    except LettaConfigError:
        log.warning("session-start: the retirement record's conversation id %r is not a Letta id; not reused",
                    conv[:80])
        return False


class _LiteConversations:
    """What conversation_for needs of a client, by lite (no httpx import)."""

    def __init__(self, ctx: SessionContext):
        self.ctx = ctx

    def create_conversation(self, agent_id: str) -> dict:
        from ...letta import lite

        s = self.ctx.settings
        return lite.create_conversation(s.base_url, agent_id, api_key=s.api_key, timeout=self.ctx.remaining(10.0))


def agent_and_conversation(ctx: SessionContext) -> tuple[str, str, str]:
    """(agent id, agent name, conversation id): the agent checked in full (resolve), or the one this machine
    checked for the same settings less than an hour ago (:mod:`subconscious.hooks.agentcheck`: two requests and
    the httpx import fewer); an agent that is gone since is checked in full at once."""
    from .. import agentcheck
    from ...letta.errors import LettaHTTPError

    root = ctx.rt.local.root
    checked = agentcheck.recent(root, agentcheck.asked(ctx.settings, ctx.store.setting(PIN)))
    if checked is not None:
        ctx.require_key()
        try:
            return (*checked, conversation_for(ctx, _LiteConversations(ctx), checked[0]))
        except LettaHTTPError as exc:  # the agent went (or the server refuses it): the full check says why
            log.info("session-start: the agent checked earlier failed (%s); checking again", exc)
            agentcheck.forget(root)
    with ctx.client(timeout=ctx.remaining(10.0)) as client:
        agent_id, agent_name = resolve(ctx, client)
        conv = conversation_for(ctx, client, agent_id)
    agentcheck.remember(root, agentcheck.asked(ctx.settings, ctx.store.setting(PIN)), agent_id, agent_name)
    return agent_id, agent_name, conv


def handle(event: HookEvent) -> str | None:
    ctx = open_session(event)
    try:
        from ...local.sessions import sweep_local_temps

        sweep_local_temps(ctx.rt.local.root)
    except Exception as exc:  # noqa: BLE001 - housekeeping never stops a session from starting
        log.debug("session-start: temp sweep failed: %s", exc)
    if event.data.get("source") in ("compact", "clear"):  # marked first: a failure below leaves it for later
        local = localsession.load(ctx.sessions_dir, ctx.session_id)
        local.reinject = event.data["source"]
        localsession.save(ctx.sessions_dir, local)
    conv = begin(ctx, event)
    from ...delivery.spawn import spawn_worker

    spawn_worker(ctx.session_id, event.cwd or os.getcwd())
    from .reinject import injection  # after /compact or /clear: what Claude knew, shown again once

    return with_notice(injection(ctx, event.data.get("source"), conv), encryption_notice(ctx))


def encryption_notice(ctx: SessionContext) -> str | None:
    """One line for the user when this machine does not follow the home's shared encryption setting (turned
    off, or pulled back to an older key, from the synced folder): the hooks go on under this machine's pin,
    and the user hears it at the start of every session, not only in the log (issue 29)."""
    if not os.path.isdir(os.path.join(os.path.dirname(ctx.rt.local.keys), "encryption")):
        return None  # no pin on this machine (never had encryption on here): the shared setting is followed
    try:
        from ...injection.blockcache import machine_policy
        from ...privacy.keys import KeyRing

        pinned = machine_policy(ctx.store, KeyRing.load(ctx.rt.local.keys)).pinned
    except Exception as exc:  # noqa: BLE001 - a notice never stops a session from starting
        log.debug("session-start: encryption setting not checked: %s", exc)
        return None
    return f"subconscious: the shared encryption setting is not followed on this machine: {pinned}" if pinned else None


def with_notice(out: str | None, notice: str | None) -> str | None:
    """``out`` (SessionStart's JSON, or nothing) with ``notice`` as its ``systemMessage`` (shown to the user)."""
    if not notice:
        return out
    import json

    from .messages import Output

    try:
        doc = json.loads(out) if out else {}
    except ValueError:
        return out
    if not isinstance(doc, dict):
        return out
    doc["systemMessage"] = (doc.get("systemMessage") + "\n" if doc.get("systemMessage") else "") + notice
    merged = Output(json.dumps(doc))
    merged.written = getattr(out, "written", None)
    return merged


def record_home(ctx: SessionContext) -> None:
    """Fix the session's home the first time a session is begun: the home this hook resolved (LETTA_HOME, or
    the cwd when it is unset). Later hooks and the worker read it back (pipeline.session_runtime)."""
    home = getattr(ctx.settings, "letta_home", None)
    local = localsession.load(ctx.sessions_dir, ctx.session_id)
    if local.home or home is None:
        return
    local.home = str(Path(home).absolute())
    localsession.save(ctx.sessions_dir, local)


def begin(ctx: SessionContext, event: HookEvent) -> str:
    """SessionStart's work (also done by the first Stop of a session whose SessionStart failed): the
    conversation, the session file, the start message queued for the worker. Returns the conversation id."""
    record_home(ctx)
    # read before the conversation is recorded again: gc's retirement record, if the session comes back
    revived = ctx.store.retired_conversation(ctx.session_id) if ctx.store.session(ctx.session_id) is None else None
    agent_id, agent_name, conv = agent_and_conversation(ctx)
    if revived is not None and revived["conversationId"] != conv:
        revived = None  # another agent's conversation: a new one was made, it starts afresh
    fresh = []
    cwd = event.cwd or os.getcwd()
    local = localsession.load(ctx.sessions_dir, ctx.session_id)
    local.agent_name = agent_name
    local.cwd = cwd
    refused = None
    if not local.project_root:  # one project directory per session: a later SessionStart (resume, compact) keeps it
        from ...agent_tools.confine import project_root

        start = os.environ.get("CLAUDE_PROJECT_DIR") or ""
        local.project_root = project_root(start if os.path.isdir(start) else cwd)
    from ...local.project import identify

    project = identify(local.project_root, machine=ctx.rt.host.name)

    cursor = revived.get("cursor", -1) if revived is not None else -1

    def record(cur: SessionState | None) -> SessionState:
        # a session gc retired that comes back goes on from its cursor (nothing it delivered is sent again)
        base = cur or SessionState(ctx.session_id, started_at=now_iso(), last_processed_index=cursor,
                                   conversation_id=conv if revived is not None else None)
        fresh[:] = [base.conversation_id != conv]
        if base.conversation_id != conv:  # a new conversation has seen no messages and no blocks
            base = base.evolve(last_seen_message_id=None, last_block_values=None)
        if base.ended_at is not None:  # resumed: it runs again
            base = base.with_end(None, None)
        if base.project != project.id:  # which project, for every machine's `subconscious sessions`
            base = base.with_project(project.id)
        return base.evolve(conversation_id=conv, agent_id=agent_id)

    ctx.store.update_session(ctx.session_id, record)

    from ...delivery.transcript import session_start_message

    if ctx.settings.sdk_tools != "off":
        from ...agent_tools.confine import root_refusal

        refused = root_refusal(local.project_root)
        if refused:
            log.warning("session-start: no tools for session %s: %s", ctx.session_id, refused)
    if isinstance(event.data.get("transcript_path"), str):
        local.transcript_path = event.data["transcript_path"]
    # the start message, once per conversation: a resumed or compacted session's conversation has it (an
    # upstream session resumed here has no start_for yet: its conversation had one too)
    source = event.data.get("source")
    if local.start_for != conv and revived is None and (any(fresh) or source not in RESUMED):
        local.start_attempted = False
        local.pending_start = session_start_message(
            project=project, path=local.project_root,
            session_id=ctx.session_id, timestamp=now_iso(), sdk_tools_mode=ctx.settings.sdk_tools,
            tools_refused=refused,
        )
    local.start_for = conv
    localsession.save(ctx.sessions_dir, local)

    from ..claudemd import clean

    if clean(Path(cwd)):
        log.info("session-start: removed legacy <letta> sections from %s/CLAUDE.md", cwd)
    log.info("session-start: session %s → conversation %s (agent %s, source %s)", ctx.session_id, conv,
             agent_id, event.data.get("source") or event.name)
    return conv
