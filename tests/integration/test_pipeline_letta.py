"""The hook pipeline against the real Letta server: real hook processes (`subconscious hook …` with
JSON on stdin, as Claude Code runs them), the real detached worker, the scripted model editing memory."""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import httpx
import pytest

from subconscious.state.store.core import Store
from tests.harness.hooks import conversation_messages, run_hook as hook
from tests.harness.transcripts import Transcript

pytestmark = pytest.mark.letta


def clean_env(tmp: Path, letta_env: dict, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "CLAUDE"))}
    env.update(letta_env, HOME=str(tmp / "user"), SUBCONSCIOUS_STATE_DIR=str(tmp / "local"),
               SUBCONSCIOUS_HOST="laptop", LETTA_HOME=str(tmp / "shared"), **extra)
    return env


def store_for(tmp: Path, host: str = "laptop") -> Store:
    return Store(tmp / "shared" / ".letta" / "claude", "reader", tmp / "r" / "locks", tmp / "r" / "clocks", read_only=True)


def wait_cursor(tmp: Path, sid: str, at_least: int, timeout: float = 90) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s = store_for(tmp).session(sid)
        if s is not None and s.last_processed_index >= at_least:
            return s.last_processed_index
        time.sleep(0.3)
    log = (tmp / "local" / "logs" / "subconscious.log")
    raise AssertionError(f"cursor never reached {at_least}; log:\n{log.read_text()[-3000:] if log.exists() else ''}")


def wait_started(tmp: Path, sid: str, timeout: float = 90) -> None:
    """Until the worker has delivered the session-start message (and the agent answered it)."""
    path = tmp / "local" / "sessions" / f"{sid}.json"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and json.loads(path.read_text()).get("pending_start") is None:
            return
        time.sleep(0.3)
    raise AssertionError("the start message was never delivered")


def texts_of(messages: list[dict], kind: str) -> list[str]:
    out = []
    for m in messages:
        if m.get("message_type") == kind:
            c = m.get("content")
            out.append(c if isinstance(c, str) else json.dumps(c))
    return out


def test_a_session_end_to_end_in_whisper_and_full_mode(tmp_path, letta_server, letta_agent, letta_env, fake_llm):
    sid = str(uuid.uuid4())
    project = tmp_path / "project"
    project.mkdir()
    (project / "CLAUDE.md").write_text("# Project\n\n<letta>\nold injected memory\n</letta>\n\nKeep this.\n")
    env = clean_env(tmp_path, letta_env, LETTA_AGENT_ID=letta_agent["id"], LETTA_MODE="full")
    tr = Transcript(tmp_path / "t" / f"{sid}.jsonl", sid, str(project))
    base = {"session_id": sid, "transcript_path": str(tr.path), "cwd": str(project)}

    # SessionStart: a conversation for this session, recorded in the shared home
    hook("session-start", {**base, "hook_event_name": "SessionStart", "source": "startup"}, env)
    entry = store_for(tmp_path).conversation(sid)
    assert entry is not None and entry.agent_id == letta_agent["id"] and entry.conversation_id.startswith("conv-")
    assert (project / "CLAUDE.md").read_text() == "# Project\n\nKeep this.\n"
    conv = entry.conversation_id
    wait_started(tmp_path, sid)

    # the first prompt in full mode shows every memory block
    out = hook("user-prompt-submit", {**base, "hook_event_name": "UserPromptSubmit", "prompt": "hi"}, env).stdout
    assert "<letta_memory_blocks>" in out and "guidance" in out

    # a turn happens; Stop hands the transcript to the worker, which delivers it and the model edits memory
    tr.user("Please REMEMBER guidance: always run pytest -x before committing").assistant("Will do.").bookkeeping()
    t0 = time.monotonic()
    hook("stop", {**base, "hook_event_name": "Stop", "stop_hook_active": False}, env)
    stop_returned = time.monotonic() - t0
    wait_cursor(tmp_path, sid, tr.line_count() - 1)
    assert stop_returned < 5
    msgs = conversation_messages(letta_server.base_url, conv)
    users = texts_of(msgs, "user_message")
    assert any("<claude_code_session_start>" in u for u in users)
    assert sum("always run pytest -x before committing" in u for u in users) == 1
    agent = httpx.get(f"{letta_server.base_url}/v1/agents/{letta_agent['id']}", params={"include": "agent.blocks"}).json()
    guidance = next(b["value"] for b in agent["blocks"] if b["label"] == "guidance")
    assert "always run pytest -x before committing" in guidance

    # the next prompt shows what the agent said and the block it changed, as a diff
    out = hook("user-prompt-submit", {**base, "hook_event_name": "UserPromptSubmit", "prompt": "next"}, env).stdout
    assert "<letta_message" in out and "<letta_memory_update>" in out
    assert "+ " in out and "always run pytest -x before committing" in out
    # …and only once: nothing new, nothing printed
    again = hook("user-prompt-submit", {**base, "hook_event_name": "UserPromptSubmit", "prompt": "x"}, env).stdout
    assert again.strip() == ""

    # a second delivery continues from the cursor: the first turn is not sent again
    tr.user("Second turn text").assistant("ok")
    hook("stop", {**base, "hook_event_name": "Stop", "stop_hook_active": False}, env)
    wait_cursor(tmp_path, sid, tr.line_count() - 1)
    users = texts_of(conversation_messages(letta_server.base_url, conv), "user_message")
    assert sum("always run pytest -x before committing" in u for u in users) == 1
    assert sum("Second turn text" in u for u in users) == 1


def test_pre_tool_use_is_silent_until_the_agent_says_something_new(tmp_path, letta_server, letta_agent, letta_env, fake_llm):
    sid = str(uuid.uuid4())
    project = tmp_path / "p"
    project.mkdir()
    env = clean_env(tmp_path, letta_env, LETTA_AGENT_ID=letta_agent["id"], SUBCONSCIOUS_FETCH_TTL="0")
    tr = Transcript(tmp_path / f"{sid}.jsonl", sid, str(project))
    base = {"session_id": sid, "transcript_path": str(tr.path), "cwd": str(project)}
    pre = {**base, "hook_event_name": "PreToolUse", "tool_name": "Read", "tool_input": {"file_path": "/x"}, "tool_use_id": "t1"}
    hook("session-start", {**base, "source": "startup"}, env)
    wait_started(tmp_path, sid)
    hook("user-prompt-submit", {**base, "prompt": "hi"}, env)  # shows the agent's answer to the start message
    assert hook("pre-tool-use", pre, env).stdout.strip() == ""
    tr.user("Tell me something").assistant("sure")
    hook("stop", {**base, "stop_hook_active": False}, env)
    wait_cursor(tmp_path, sid, tr.line_count() - 1)
    out = hook("pre-tool-use", pre, env).stdout
    payload = json.loads(out)["hookSpecificOutput"]
    assert payload["hookEventName"] == "PreToolUse" and "<letta_update>" in payload["additionalContext"]
    assert "ECHO" in payload["additionalContext"]  # what the scripted model answered
    assert hook("pre-tool-use", pre, env).stdout.strip() == ""


def test_resume_keeps_the_conversation_and_another_host_feeds_the_same_agent(tmp_path, letta_server, letta_env, fake_llm):
    """No LETTA_AGENT_ID: the first machine imports the bundled agent and pins it in the shared home;
    a second machine (another SUBCONSCIOUS_HOST, its own local state) uses that same agent."""
    project = tmp_path / "p"
    project.mkdir()
    env_a = clean_env(tmp_path, letta_env)
    sid = str(uuid.uuid4())
    base = {"session_id": sid, "transcript_path": str(tmp_path / "none.jsonl"), "cwd": str(project)}
    hook("session-start", {**base, "source": "startup"}, env_a, timeout=60)
    first = store_for(tmp_path).conversation(sid)
    hook("session-start", {**base, "source": "resume"}, env_a)
    assert store_for(tmp_path).conversation(sid).conversation_id == first.conversation_id
    pinned = store_for(tmp_path).setting("agentId")
    assert pinned == first.agent_id

    env_b = {**env_a, "SUBCONSCIOUS_HOST": "desktop", "SUBCONSCIOUS_STATE_DIR": str(tmp_path / "local-b"),
             "HOME": str(tmp_path / "user-b")}  # no upstream config file on this machine
    other = str(uuid.uuid4())
    hook("session-start", {**base, "session_id": other, "source": "startup"}, env_b, timeout=60)
    entry = store_for(tmp_path).conversation(other)
    assert entry.agent_id == pinned and entry.conversation_id != first.conversation_id
    assert store_for(tmp_path).read().live[other].host == "desktop"
