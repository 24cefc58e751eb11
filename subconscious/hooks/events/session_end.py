"""SessionEnd: the last flush of what is pending, by a detached worker (Claude Code gives all SessionEnd hooks
1.5 s together and may exit right after), and the end recorded in the session's state (``endedAt`` and
``endReason``: clear, logout, prompt_input_exit, other…) for retention. A ``clear`` also leaves a note on this
machine so the session that /clear starts can show Claude what the subconscious had told it (reinject.py)."""

from __future__ import annotations

import json
import time

from ..event import HookEvent
from ..pipeline import now_iso, open_session
from ...state.files import atomic_write, ensure_dir
from .lifecycle import hand_over, require_conversation

CLEARED = "cleared.note"  # in <state dir>/sessions/ (not *.json: that is a session file): the session a /clear ended, for the one it starts


def handle(event: HookEvent) -> str | None:
    ctx = open_session(event)
    require_conversation(ctx)
    hand_over(ctx)  # first: the flush matters more than the record if the budget runs out
    reason = event.data.get("reason")
    reason = reason[:100] if isinstance(reason, str) and reason else "other"
    at = now_iso()
    ctx.store.update_session(ctx.session_id, lambda cur: cur.with_end(at, reason) if cur is not None else None)
    if reason == "clear":
        ensure_dir(ctx.sessions_dir)
        atomic_write(ctx.sessions_dir / CLEARED, json.dumps({"session_id": ctx.session_id, "at": time.time(),
                                                            "cwd": event.cwd}) + "\n", durable=False)
    return None
