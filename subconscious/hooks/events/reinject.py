"""After Claude Code replaced Claude's context (``/compact``, auto-compaction, ``/clear``), what the
subconscious had put in it is gone: SessionStart (``compact``, ``clear``, or a ``resume`` while a replacement
is still unanswered) shows it again, once, as SessionStart's additionalContext (it stays in the new
context: Claude Code keeps it after the compaction boundary):

- full mode: the memory blocks, as on a first prompt; recorded as shown (``lastBlockValues``), so the
  next prompt shows only what changed since;
- whisper mode: the agent's most recent notes that were shown before (up to the session's watermark; for
  ``/clear``, those of the session it ended, found through the note SessionEnd left on this machine),
  found by paging back by rows however far the watermark is (up to ``MAX_PAGES`` pages; past that, a
  logged reason; a server too slow to page back leaves the mark for the next SessionStart).

Notes that are new (past the watermark) are left to the next prompt or tool call, as always. The mark
(``reinject`` in the machine-local session file, set by SessionStart before anything else) is cleared only once the text
was printed, so a hook that failed (server down) leaves it for the next SessionStart."""

from __future__ import annotations

import json
import logging
import time

from ...local import sessions as localsession
from ..pipeline import SessionContext
from .messages import Output

log = logging.getLogger("subconscious")
REPLACED = ("compact", "clear")
RECENT_NOTES = 5
NOTE_CUT = 1500
PAGE = 50
MAX_PAGES = 40  # 2,000 messages back: past that the notes are given up on (logged)
CLEARED_WITHIN_S = 120.0
SLOW = "the server did not answer in time"

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


def _shown_notes(ctx: SessionContext, conv: str, watermark: str | None, budget: float) -> tuple[list, str | None]:
    """The newest notes at or before ``watermark`` (the ones shown), newest first, paged back by rows
    however far the watermark is (the hot-fetch shortcut leaves it up to a page behind; a long stretch
    of tool calls puts it pages back), at most ``MAX_PAGES`` pages. Returns (notes, why the look-up
    stopped short: None when it found what there is)."""
    from ...injection.context import as_message
    from ...letta.paging import END, OUT_OF_TIME, STUCK, Pages
    from .messages import page_reader

    if not watermark:
        return [], None
    page_of = page_reader(ctx, conv, PAGE, budget, strict=False)
    out, reached = [], False
    pages = Pages(page_of, max_pages=MAX_PAGES, time_left=lambda: ctx.remaining(budget))
    for batch in pages:
        for m in batch:
            reached = reached or m.get("id") == watermark
            if reached and m.get("message_type") == "assistant_message":
                note = as_message(m)
                if note.content.strip() and all(n.id != note.id for n in out):
                    out.append(note)
            if len(out) >= RECENT_NOTES:
                return out, None
    if pages.stopped in (END, STUCK):
        return out, None  # the whole conversation read: these are all there are
    if pages.stopped == OUT_OF_TIME:
        return out, SLOW
    return out, "the last note shown is more than %d messages back" % (MAX_PAGES * PAGE)


def fit_notes(header: str, agent_name: str, notes: list) -> str | None:
    """``header`` and the ``<letta_message>`` notes (oldest first), the oldest left out until it fits under
    Claude Code's 10,000-character cut of additionalContext. None without notes."""
    from ...injection.context import format_messages

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
    from ...injection.context import AgentMessage, prompt_injection

    ctx.require_key()
    s = ctx.settings
    session = ctx.store.session(ctx.session_id)
    values = None
    if s.mode == "full":
        from ...letta import lite

        agent_id = session.agent_id if session is not None else None
        blocks = lite.get_agent(s.base_url, agent_id, api_key=s.api_key,
                                timeout=ctx.remaining(budget)).get("blocks") or [] if agent_id else []
        shown = prompt_injection("full", local.agent_name, [], None, blocks, None, sdk_tools=s.sdk_tools)
        text, values = shown.text, shown.block_values
    else:
        source_sid = _cleared_session(ctx) if why == "clear" else ctx.session_id
        source_state = ctx.store.session(source_sid) if source_sid else None
        notes, short = [], None
        if source_state is not None and source_state.conversation_id:
            notes, short = _shown_notes(ctx, source_state.conversation_id, source_state.last_seen_message_id,
                                        budget)
        if short is not None and not notes:
            if short == SLOW:  # the mark stays: the next SessionStart tries again
                log.warning("session-start: the notes to show again after the %s were not found yet (%s)", why, short)
                return None
            log.warning("session-start: nothing shown again after the %s: %s", why, short)
        notes = [AgentMessage(n.id, n.date, n.content if len(n.content) <= NOTE_CUT else n.content[:NOTE_CUT] + "…")
                 for n in reversed(notes)]
        text = fit_notes(HEADER[why], local.agent_name, notes)

    def written() -> None:
        if values is not None:
            from ...injection.blockcache import machine_policy, with_blocks
            from ...privacy.keys import KeyRing

            keyring = KeyRing.load(ctx.rt.local.keys)
            policy = machine_policy(ctx.store, keyring)  # the shared setting as this machine's pin allows

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
