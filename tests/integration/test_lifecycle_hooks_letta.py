"""Whisper mode across a compaction and a /clear, with real hook processes against the real Letta server:
the note the agent gave is shown to Claude again once after its context was replaced (for /clear, in the
session /clear starts), a subagent gets the latest note, and SessionEnd records the end."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.harness.hooks import run_hook as hook
from tests.harness.transcripts import Transcript
from tests.integration.test_pipeline_letta import clean_env, store_for, wait_cursor, wait_started

pytestmark = pytest.mark.letta


def context_of(stdout: str, event: str) -> str:
    out = json.loads(stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == event
    return out["additionalContext"]


def test_whisper_notes_come_back_once_after_compact_and_clear(tmp_path, letta_server, letta_agent, letta_env, fake_llm):
    sid, sid2 = str(uuid.uuid4()), str(uuid.uuid4())
    note = f"note-{uuid.uuid4().hex[:8]}: the build uses make, not npm"
    project = tmp_path / "project"
    project.mkdir()
    env = clean_env(tmp_path, letta_env, LETTA_AGENT_ID=letta_agent["id"], LETTA_MODE="whisper",
                    SUBCONSCIOUS_FETCH_TTL="0")
    tr = Transcript(tmp_path / "t" / f"{sid}.jsonl", sid, str(project))
    base = {"session_id": sid, "transcript_path": str(tr.path), "cwd": str(project)}

    hook("session-start", {**base, "hook_event_name": "SessionStart", "source": "startup"}, env)
    wait_started(tmp_path, sid)
    tr.user(f"How do I build this? SAY {note}").assistant("Let me look.")
    hook("stop", {**base, "hook_event_name": "Stop", "stop_hook_active": False,
                  "last_assistant_message": "Let me look."}, env)
    wait_cursor(tmp_path, sid, tr.line_count() - 1)
    shown = hook("user-prompt-submit", {**base, "hook_event_name": "UserPromptSubmit", "prompt": "go"}, env).stdout
    assert note in shown  # the agent's note, shown once as usual

    # a subagent starts with the latest guidance; its own tool calls take no note away from the main thread
    note2 = note.replace("make, not npm", "tests need docker")
    tr.user(f"And the tests? SAY {note2}").assistant("Checking.")
    hook("stop", {**base, "hook_event_name": "Stop", "stop_hook_active": False}, env)
    wait_cursor(tmp_path, sid, tr.line_count() - 1)
    sub = hook("subagent-start", {**base, "hook_event_name": "SubagentStart", "agent_id": "a1",
                                  "agent_type": "Explore"}, env).stdout
    assert note2 in context_of(sub, "SubagentStart")
    assert hook("pre-tool-use", {**base, "hook_event_name": "PreToolUse", "agent_id": "a1", "agent_type": "Explore",
                                 "tool_name": "Bash", "tool_input": {"command": "ls"}}, env).stdout == ""
    assert note2 in hook("user-prompt-submit", {**base, "hook_event_name": "UserPromptSubmit", "prompt": "more"},
                         env).stdout

    # /compact: the note is no longer in Claude's context; SessionStart shows it again, once
    hook("pre-compact", {**base, "hook_event_name": "PreCompact", "trigger": "manual", "custom_instructions": None}, env)
    out = hook("session-start", {**base, "hook_event_name": "SessionStart", "source": "compact"}, env).stdout
    again = context_of(out, "SessionStart")
    assert note in again and note2 in again and "compacted" in again
    assert hook("session-start", {**base, "hook_event_name": "SessionStart", "source": "resume"}, env).stdout == ""
    assert note not in hook("user-prompt-submit", {**base, "hook_event_name": "UserPromptSubmit",
                                                   "prompt": "next"}, env).stdout  # not as a new note either

    # a turn that ends on an API error keeps what is pending for the next delivery
    tr.user("A prompt whose turn failed").bookkeeping()
    hook("stop-failure", {**base, "hook_event_name": "StopFailure", "error": "rate_limit"}, env)
    marker = tmp_path / "local" / "sessions" / "pending" / sid
    assert marker.exists() and "StopFailure" in marker.read_text()

    # /clear: the session ends (recorded), the new one is shown what the old one had been told
    hook("session-end", {**base, "hook_event_name": "SessionEnd", "reason": "clear"}, env)
    state = store_for(tmp_path).session(sid)
    assert state.end_reason == "clear" and state.ended_at
    tr2 = Transcript(tmp_path / "t" / f"{sid2}.jsonl", sid2, str(project))
    base2 = {"session_id": sid2, "transcript_path": str(tr2.path), "cwd": str(project)}
    out = hook("session-start", {**base2, "hook_event_name": "SessionStart", "source": "clear"}, env).stdout
    cleared = context_of(out, "SessionStart")
    assert note in cleared and "/clear" in cleared
    assert hook("session-start", {**base2, "hook_event_name": "SessionStart", "source": "resume"}, env).stdout == ""
    # a resumed session runs again: its end is cleared
    hook("session-start", {**base, "hook_event_name": "SessionStart", "source": "resume"}, env)
    assert store_for(tmp_path).session(sid).ended_at is None
