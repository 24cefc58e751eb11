"""PreCompact: Claude Code is about to replace the session's context with a summary. What the agent has not
had yet is handed to a detached worker now (the hook returns at once: compaction is never held up), and the
session is marked: its next SessionStart (``compact``) shows Claude again what it knew (reinject.py), and
the compaction's own subagent is not sent to the agent (it only re-reads the transcript)."""

from __future__ import annotations

import time

from ..hookrun import HookEvent
from ..pipeline import open_session
from .lifecycle import hand_over, require_conversation


def handle(event: HookEvent) -> str | None:
    ctx = open_session(event)
    require_conversation(ctx)
    hand_over(ctx, reinject="compact", compacting_since=time.time())
    return None
