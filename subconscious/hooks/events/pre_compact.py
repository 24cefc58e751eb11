"""PreCompact: Claude Code is about to replace the session's context with a summary. What the agent has not
had yet is handed to a detached worker now (the hook returns at once: compaction is never held up). (The
SessionStart ``compact`` that follows a compaction that happened shows Claude again what it knew:
reinject.py; a PreCompact alone — "not enough messages to compact" — changes nothing.)"""

from __future__ import annotations

from ..event import HookEvent
from ..pipeline import open_session
from .lifecycle import hand_over, require_conversation


def handle(event: HookEvent) -> str | None:
    ctx = open_session(event)
    require_conversation(ctx)
    hand_over(ctx)
    return None
