"""UserPromptSubmit: inject the agent's new messages (whisper), plus memory blocks and their changes
(full). At most two requests: the conversation's messages, and in full mode the agent's blocks."""

from __future__ import annotations

from ..hookrun import HookEvent
from ..pipeline import open_session
from .messages import fetch_injection


def handle(event: HookEvent) -> str | None:
    ctx = open_session(event)
    return fetch_injection(ctx, limit=300, budget=7.0, pre_tool=False)
