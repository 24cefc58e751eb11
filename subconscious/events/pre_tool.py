"""PreToolUse: mid-workflow updates as ``additionalContext``; silent when nothing is new.

Skips the fetch entirely when the last one (by any hook of this session on this machine) is younger
than ``SUBCONSCIOUS_FETCH_TTL`` seconds (default 5): a burst of tool calls costs one request, not one
per tool."""

from __future__ import annotations

import os

from .. import localsession
from ..hookrun import HookEvent
from ..pipeline import Skip, open_session
from .messages import fetch_injection, fresh_enough


def handle(event: HookEvent) -> str | None:
    ctx = open_session(event)
    try:
        ttl = float(os.environ.get("SUBCONSCIOUS_FETCH_TTL", "5"))
    except ValueError:
        ttl = 5.0
    local = localsession.load(ctx.sessions_dir, ctx.session_id)
    if fresh_enough(local, int(ttl * 1000)):
        raise Skip("fetched less than the TTL ago")
    return fetch_injection(ctx, limit=20, budget=3.5, pre_tool=True, local=local)
