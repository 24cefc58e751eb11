"""PostCompact: the agent is told that Claude Code compacted the session, with the summary that replaced
Claude's context (redacted as the transcript is, before it is even written to the machine-local notice),
placed in the session's stream where the compaction happened, and a worker delivers it."""

from __future__ import annotations

from ...delivery import notices
from ..event import HookEvent
from ..pipeline import open_session
from ...delivery.transcript import cut, redact
from .lifecycle import hand_over, position, require_conversation, transcript_of


def handle(event: HookEvent) -> str | None:
    ctx = open_session(event)
    require_conversation(ctx)
    summary = event.data.get("compact_summary")
    summary = redact(cut(summary, notices.SUMMARY_CUT)) if isinstance(summary, str) else ""
    trigger = event.data.get("trigger")
    notices.add(ctx.sessions_dir, ctx.session_id, "compacted", position(ctx, transcript_of(ctx)),
                trigger=trigger if trigger in ("manual", "auto") else "compaction", summary=summary)
    hand_over(ctx)
    return None
