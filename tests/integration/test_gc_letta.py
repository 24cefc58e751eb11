"""gc with the real Letta server and real hook processes: a session retired by another machine's gc starts a
fresh conversation at its next SessionStart, cleanly — the old conversation gets nothing more, the new one
gets the start message and the session's transcript once."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid

import pytest

from tests.harness.hooks import conversation_messages, run_hook as hook
from tests.harness.transcripts import Transcript
from tests.integration.test_pipeline_letta import clean_env, store_for, texts_of, wait_cursor, wait_started

pytestmark = pytest.mark.letta


def _worker_idle(tmp_path, sid: str, timeout: float = 60) -> None:
    """Until no delivery is due or running on the laptop for ``sid``."""
    from subconscious.state.locks import probe

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        busy = (tmp_path / "local" / "sessions" / "pending" / sid).exists() or \
            probe(tmp_path / "local" / "locks" / f"laptop.deliver.{sid}.lock") is not None
        if not busy:
            return
        time.sleep(0.2)
    raise AssertionError("the worker never went idle")


def test_a_session_retired_by_gc_starts_a_fresh_conversation_at_its_next_hook(tmp_path, letta_server, letta_agent,
                                                                              letta_env, fake_llm):
    sid = str(uuid.uuid4())
    project = tmp_path / "p"
    project.mkdir()
    laptop = clean_env(tmp_path, letta_env, LETTA_AGENT_ID=letta_agent["id"])
    desktop = {**laptop, "SUBCONSCIOUS_HOST": "desktop", "SUBCONSCIOUS_STATE_DIR": str(tmp_path / "local-b")}
    tr = Transcript(tmp_path / f"{sid}.jsonl", sid, str(project))
    base = {"session_id": sid, "transcript_path": str(tr.path), "cwd": str(project)}
    hook("session-start", {**base, "source": "startup"}, laptop)
    wait_started(tmp_path, sid)
    first = store_for(tmp_path).conversation(sid).conversation_id
    tr.user("First turn: the build uses make").assistant("noted")
    hook("stop", {**base, "stop_hook_active": False}, laptop)
    wait_cursor(tmp_path, sid, tr.line_count() - 1)
    _worker_idle(tmp_path, sid)
    before = len(conversation_messages(letta_server.base_url, first))

    # the desktop (which never ran this session) retires everything not in use there
    out = subprocess.run([sys.executable, "-m", "subconscious", "gc", "--older-than", "0d", "--json"],
                         capture_output=True, text=True, env=desktop, timeout=60)
    assert out.returncode == 0, out.stderr
    assert sid in [r["session"] for r in json.loads(out.stdout)["retire"]]
    assert store_for(tmp_path).session(sid) is None and store_for(tmp_path).conversation(sid) is None

    # on the laptop, a prompt before any SessionStart finds no conversation: silent, exit 0
    assert hook("user-prompt-submit", {**base, "prompt": "hi"}, laptop).stdout.strip() == ""
    # the session is resumed: a new conversation; its start message and the whole transcript (the retired
    # cursor is gone: the first turn too) go there, each once
    hook("session-start", {**base, "source": "resume"}, laptop)
    second = store_for(tmp_path).conversation(sid).conversation_id
    assert second != first
    wait_started(tmp_path, sid)
    tr.user("Second turn: deploy with fly").assistant("ok")
    hook("stop", {**base, "stop_hook_active": False}, laptop)
    wait_cursor(tmp_path, sid, tr.line_count() - 1)
    _worker_idle(tmp_path, sid)
    users = texts_of(conversation_messages(letta_server.base_url, second), "user_message")
    assert sum("<claude_code_session_start>" in u for u in users) == 1
    assert sum("Second turn: deploy with fly" in u for u in users) == 1
    assert sum("First turn: the build uses make" in u for u in users) == 1
    assert len(conversation_messages(letta_server.base_url, first)) == before  # the old one got nothing more
    assert store_for(tmp_path).session(sid).conversation_id == second
