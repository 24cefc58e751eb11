"""After Claude Code replaced Claude's context (``/compact``, auto-compaction, ``/clear``), what the
subconscious had put in it is gone: SessionStart (``compact``, ``clear``, or a ``resume`` while a replacement
is still unanswered) shows it again, once, as SessionStart's additionalContext (it stays in the new
context: Claude Code keeps it after the compaction boundary):

- full mode: the memory blocks, as on a first prompt; recorded as shown (``lastBlockValues``), so the
  next prompt shows only what changed since;
- whisper mode: the agent's most recent notes that were shown before (up to the session's watermark; for
  ``/clear``, those of the session it ended, found through the note SessionEnd left on this machine).

Notes that are new (past the watermark) are left to the next prompt or tool call, as always. The mark
(``reinject`` in the machine-local session file, set by SessionStart before anything else) is cleared only once the text
was printed, so a hook that failed (server down) leaves it for the next SessionStart."""

from __future__ import annotations

import json
import logging
import time

from .. import localsession
from ..pipeline import SessionContext
from .messages import Output

log = logging.getLogger("subconscious")
REPLACED = ("compact", "clear")
RECENT_NOTES = 5
NOTE_CUT = 1500
PAGE = 50
CLEARED_WITHIN_S = 120.0

HEADER = {
    "compact": "Claude Code compacted this session, so what your subconscious had shared earlier is no longer "
               "in your context. Here it is again, for reference.",
    "clear": "The context was cleared (/clear). What your subconscious had shared in the session before is "
             "shown again, for reference.",
}


def _cleared_session(ctx: SessionContext) -> str | None:
    """The session a /clear just ended on this machine (SessionEnd's note), if it is recent."""
    from .session_end import CLEARED

    try:
        note = json.loads((ctx.sessions_dir / CLEARED).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(note, dict) or time.time() - float(note.get("at") or 0) > CLEARED_WITHIN_S:
        return None
    sid = note.get("session_id")
    return sid if isinstance(sid, str) and sid != ctx.session_id else None


def _shown_notes(ctx: SessionContext, conv: str, watermark: str | None, budget: float) -> list:
    """The newest notes at or before ``watermark`` (the ones shown), newest first."""
    from ..context import as_message
    from ..letta import lite
    from ..letta.config import check_id

    if not watermark:
        return []
    s = ctx.settings
    body = lite.get_json(s.base_url, f"conversations/{check_id(conv, 'conversation id')}/messages",
                         api_key=s.api_key, params={"limit": PAGE, "order": "desc"},
                         timeout=ctx.remaining(budget), what=f"listing messages of {conv}")
    out, reached = [], False
    for m in body if isinstance(body, list) else []:
        if not isinstance(m, dict):
            continue
        reached = reached or m.get("id") == watermark
        if reached and m.get("message_type") == "assistant_message":
            note = as_message(m)
            if note.content.strip() and all(n.id != note.id for n in out):
                out.append(note)
        if len(out) >= RECENT_NOTES:
            break
    return out


def fit_notes(header: str, agent_name: str, notes: list) -> str | None:
    """``header`` and the ``<letta_message>`` notes (oldest first), the oldest left out until it fits under
    Claude Code's 10,000-character cut of additionalContext. None without notes."""
    from ..context import format_messages

    cap = 10_000 - 200  # room for the JSON around it
    notes = list(notes)
    while notes:
        text = "%s\n%s" % (header, format_messages(agent_name, notes, instruction=False))
        if len(text) <= cap:
            return text
        notes.pop(0)
    return None


def injection(ctx: SessionContext, source: str | None, conv: str, *, budget: float = 12.0) -> Output | None:
    """What SessionStart prints after a context replacement (None: nothing to show, or none happened)."""
    local = localsession.load(ctx.sessions_dir, ctx.session_id)
    why = source if source in REPLACED else local.reinject if local.reinject in REPLACED else None
    if why is None:
        return None
    if local.reinject != why:
        local.reinject = why
        localsession.save(ctx.sessions_dir, local)
    from ..context import AgentMessage, prompt_injection

    ctx.require_key()
    s = ctx.settings
    session = ctx.store.session(ctx.session_id)
    values = None
    if s.mode == "full":
        from ..letta import lite

        agent_id = session.agent_id if session is not None else None
        blocks = lite.get_agent(s.base_url, agent_id, api_key=s.api_key,
                                timeout=ctx.remaining(budget)).get("blocks") or [] if agent_id else []
        shown = prompt_injection("full", local.agent_name, [], None, blocks, None, sdk_tools=s.sdk_tools)
        text, values = shown.text, shown.block_values
    else:
        source_sid = _cleared_session(ctx) if why == "clear" else ctx.session_id
        source_state = ctx.store.session(source_sid) if source_sid else None
        notes = []
        if source_state is not None and source_state.conversation_id:
            notes = _shown_notes(ctx, source_state.conversation_id, source_state.last_seen_message_id, budget)
        notes = [AgentMessage(n.id, n.date, n.content if len(n.content) <= NOTE_CUT else n.content[:NOTE_CUT] + "…")
                 for n in reversed(notes)]
        text = fit_notes(HEADER[why], local.agent_name, notes)

    def written() -> None:
        if values is not None:
            from ..blockcache import with_blocks
            from ..keys import KeyRing, read_policy

            keyring, policy = KeyRing.load(ctx.rt.local.keys), read_policy(ctx.store)

            def record(cur):
                if cur is None or cur.conversation_id != conv:
                    return None
                return with_blocks(cur, values, keyring, policy)[0]

            ctx.store.update_session(ctx.session_id, record)
        after = localsession.load(ctx.sessions_dir, ctx.session_id)
        after.reinject = None
        localsession.save(ctx.sessions_dir, after)

    if not text:
        written()
        return None
    out = Output(json.dumps({"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}}))
    out.written = written
    log.info("session-start: showed Claude again what it knew before the %s (%d chars)", why, len(text))
    return out
