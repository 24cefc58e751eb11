"""SubagentStop: a subagent finished. Its own transcript (``agent_transcript_path``: its task, tool calls,
results and report; the main transcript has only the call and the report) reaches the agent as part of the
session, labelled with its ``agent_type``, placed where the subagent ran. The compaction's subagent (it has
no type; a subagent of the Agent/Task tool always has one) is not sent: it only re-reads the session the
agent already has."""

from __future__ import annotations

import re
import time

from ...delivery import notices
from ..event import HookEvent
from ..pipeline import Skip, open_session
from .lifecycle import hand_over, position, require_conversation, transcript_of


def handle(event: HookEvent) -> str | None:
    ctx = open_session(event)
    require_conversation(ctx)
    data = event.data
    agent_type = data.get("agent_type") if isinstance(data.get("agent_type"), str) else ""
    agent_id = data.get("agent_id") if isinstance(data.get("agent_id"), str) else ""
    path = data.get("agent_transcript_path")
    if not agent_type:
        raise Skip(f"subagent {agent_id or '?'} is the compaction's (type {agent_type!r}): not sent")
    if not isinstance(path, str) or not path:
        raise Skip(f"subagent {agent_id or '?'} has no agent_transcript_path")
    key = "subagent-" + (re.sub(r"[^A-Za-z0-9_-]", "", agent_id)[:64] or str(time.time_ns()))
    notices.add(ctx.sessions_dir, ctx.session_id, "subagent", position(ctx, transcript_of(ctx)), key=key,
                path=path, agent_type=agent_type[:200], agent_id=agent_id[:200])
    hand_over(ctx)
    return None
