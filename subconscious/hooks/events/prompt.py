"""UserPromptSubmit: inject the agent's new messages (whisper), plus memory blocks and their changes
(full). Requests: the conversation's new messages (one page of 100 unless more are new), and in full
mode the agent's blocks."""

from __future__ import annotations

from ..event import HookEvent
from ..pipeline import open_session
from .messages import fetch_injection, take_fetch

PAGE = 100


def handle(event: HookEvent) -> str | None:
    ctx = open_session(event)
    take_fetch(ctx, 0)  # always fetches; a PreToolUse right after it need not
    return fetch_injection(ctx, page=PAGE, budget=7.0, pre_tool=False)
