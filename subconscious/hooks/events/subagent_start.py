"""SubagentStart: a subagent starts with none of the session's context. Claude Code passes a SubagentStart
hook's additionalContext to the subagent, so it gets the subconscious's latest guidance: the agent's newest
notes in this session's conversation (shown to the main thread before or not; nothing is recorded as shown,
the main thread's notes are untouched). One request; silent when there are none."""

from __future__ import annotations

import json

from ..event import HookEvent
from ..pipeline import Skip, open_session

LATEST = 3
NOTE_CUT = 1500
PAGE = 30


def handle(event: HookEvent) -> str | None:
    ctx = open_session(event)
    session = ctx.store.session(ctx.session_id)
    if session is None or not session.conversation_id:
        raise Skip("no conversation for this session yet")
    from ...injection.context import AgentMessage, as_message
    from ...letta import lite
    from ...letta.config import check_id

    ctx.require_key()
    s = ctx.settings
    conv = session.conversation_id
    body = lite.get_json(s.base_url, f"conversations/{check_id(conv, 'conversation id')}/messages",
                         api_key=s.api_key, params={"limit": PAGE, "order": "desc"}, timeout=ctx.remaining(3.5),
                         what=f"listing messages of {conv}")
    notes = []
    for m in body if isinstance(body, list) else []:
        if isinstance(m, dict) and m.get("message_type") == "assistant_message":
            n = as_message(m)
            if n.content.strip() and all(x.id != n.id for x in notes):
                notes.append(AgentMessage(n.id, n.date, n.content[:NOTE_CUT]))
        if len(notes) >= LATEST:
            break
    if not notes:
        return None
    from .reinject import fit_notes

    text = fit_notes("The session that started this subagent has a subconscious: a background agent that reads "
                     "the session and remembers earlier ones. Its latest notes, for reference:",
                     ctx.local.agent_name, list(reversed(notes)))
    if text is None:
        return None
    return json.dumps({"hookSpecificOutput": {"hookEventName": "SubagentStart", "additionalContext": text}})
