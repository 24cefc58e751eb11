"""StopFailure: the turn ended on an API error. Nothing is delivered now (the user will likely retry); what is
pending stays pending: the transcript is recorded and a retry marker is left, so the next hook of any session
on this machine (or the next Stop) delivers it with what follows."""

from __future__ import annotations

import time

from ...local import sessions as localsession
from ..event import HookEvent
from ..pipeline import open_session
from .lifecycle import record_transcript, require_conversation

RETRY_AFTER_S = 15.0


def handle(event: HookEvent) -> str | None:
    ctx = open_session(event)
    require_conversation(ctx)
    record_transcript(ctx)
    error = event.data.get("error") or event.data.get("error_type") or "an API error"
    localsession.mark_pending(ctx.sessions_dir, ctx.session_id, time.time() + RETRY_AFTER_S,
                              f"the turn ended on {str(error)[:200]} (StopFailure); kept for the next delivery",
                              keep_earlier=True)
    return None
