"""PreToolUse: mid-workflow updates as ``additionalContext``; silent when nothing is new.

Skips the fetch entirely when the last one (by any hook of this session on this machine) began less than
``SUBCONSCIOUS_FETCH_TTL`` seconds ago (default 5): a burst of tool calls costs one request, not one per
tool. The check and the new fetch time are one compare-and-set (:func:`subconscious.local.claims.take_fetch`):
of parallel hooks, one fetches. A subagent's tool calls (``agent_id`` in the input) fetch nothing: a note
shown there would be recorded as shown but never reach the main thread's Claude."""

from __future__ import annotations

from ..event import HookEvent
from ..pipeline import Skip, open_session
from .messages import fetch_injection, take_fetch

PAGE = 50


def handle(event: HookEvent) -> str | None:
    if event.data.get("agent_id"):  # a subagent's tool call: a note shown here would never reach the main
        raise Skip("a subagent's tool call: notes are kept for the main thread (SubagentStart gave it the latest)")
    ctx = open_session(event)
    try:
        ttl = float(event.env.get("SUBCONSCIOUS_FETCH_TTL", "5"))
    except ValueError:
        ttl = 5.0
    if not take_fetch(ctx, int(ttl * 1000)):
        raise Skip("fetched less than the TTL ago")
    return fetch_injection(ctx, page=PAGE, budget=3.5, pre_tool=True)
