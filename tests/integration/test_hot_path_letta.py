"""The fetching hooks against the real Letta server load no HTTP library beyond ``socket``: the agent's
note reaches Claude Code through a PreToolUse that fetched (TTL 0) and a UserPromptSubmit, and neither
process imported httpx, urllib.request or http.client (the ~20-75 ms of imports every fetch used to pay)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

from tests.harness.hooks import run_hook as hook
from tests.unit.test_hot_path_imports import DUMP, HOOK

pytestmark = pytest.mark.letta
ROOT = Path(__file__).resolve().parents[2]
HEAVY = {"httpx", "httpcore", "urllib.request", "http.client", "subconscious.letta.client"}


def modules_of_hook(tmp: Path, event: str, data: dict, env: dict) -> tuple[set[str], str]:
    out = tmp / f"modules-{uuid.uuid4().hex[:6]}.txt"
    proc = subprocess.run([sys.executable, "-c", DUMP.format(body=HOOK), str(out), "hook", event],
                          input=json.dumps(data), capture_output=True, text=True, env=env, cwd=data["cwd"], timeout=60)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return set(out.read_text().split()), proc.stdout


def test_fetching_hooks_show_the_agents_note_without_an_http_library(tmp_path, letta_server, letta_agent, letta_env,
                                                                      fake_llm):
    sid = str(uuid.uuid4())
    project = tmp_path / "p"
    project.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "CLAUDE"))}
    env.update(letta_env, PYTHONPATH=str(ROOT), HOME=str(tmp_path / "user"), SUBCONSCIOUS_STATE_DIR=str(tmp_path / "local"),
               SUBCONSCIOUS_HOST="laptop", LETTA_HOME=str(tmp_path / "shared"), LETTA_AGENT_ID=letta_agent["id"],
               SUBCONSCIOUS_FETCH_TTL="0")
    base = {"session_id": sid, "transcript_path": str(tmp_path / "t.jsonl"), "cwd": str(project)}
    pre = {**base, "hook_event_name": "PreToolUse", "tool_name": "Read", "tool_input": {"file_path": "/x"}}
    hook("session-start", {**base, "hook_event_name": "SessionStart", "source": "startup"}, env)

    deadline = time.monotonic() + 90
    shown = ""
    while not shown and time.monotonic() < deadline:  # until the agent answered the start message
        mods, shown = modules_of_hook(tmp_path, "pre-tool-use", pre, env)
        assert not mods & HEAVY, sorted(mods & HEAVY)
        if not shown:
            time.sleep(0.5)
    payload = json.loads(shown)["hookSpecificOutput"]
    assert "ECHO" in payload["additionalContext"]  # what the scripted model answered, shown once
    assert "subconscious.letta.wire" in mods and "subconscious.hooks.events.pre_tool" in mods

    mods, shown = modules_of_hook(tmp_path, "user-prompt-submit",
                                  {**base, "hook_event_name": "UserPromptSubmit", "prompt": "go on"}, env)
    assert not mods & HEAVY, sorted(mods & HEAVY)
    assert "subconscious.letta.wire" in mods and "ECHO" not in shown  # fetched; the note was shown already


def test_a_second_session_start_makes_one_request_and_a_gone_agent_is_checked_again(tmp_path, letta_server, letta_env,
                                                                                     fake_llm):
    """The agent check is remembered on the machine: a second session with the same settings only creates its
    conversation. When that agent is deleted on the server, the next session is not stuck with it: the full
    check runs and says why (LETTA_AGENT_ID names an agent that no longer exists)."""
    from tests.harness.fault_proxy import FaultProxy
    from tests.harness.letta_fixtures import delete_agent, import_agent

    agent = import_agent(letta_server.base_url)
    proxy = FaultProxy(letta_server.base_url).start()
    try:
        project = tmp_path / "p"
        project.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "CLAUDE"))}
        env.update(letta_env, LETTA_BASE_URL=proxy.url, HOME=str(tmp_path / "user"), LETTA_AGENT_ID=agent["id"],
                   SUBCONSCIOUS_STATE_DIR=str(tmp_path / "local"), SUBCONSCIOUS_HOST="laptop",
                   LETTA_HOME=str(tmp_path / "shared"))

        def start() -> list[str]:
            sid = str(uuid.uuid4())
            before = len(proxy.requests)
            hook("session-start", {"session_id": sid, "cwd": str(project), "hook_event_name": "SessionStart",
                                   "source": "startup", "transcript_path": str(tmp_path / f"{sid}.jsonl")}, env)
            return [f"{r.method} {r.path.split('?')[0].rstrip('/')}" for r in proxy.requests[before:]
                    if "/messages" not in r.path]  # the worker's start message may begin meanwhile

        first = start()
        assert "GET /v1/models" in first and "POST /v1/conversations" in first
        assert start() == ["POST /v1/conversations"]

        delete_agent(letta_server.base_url, agent["id"])
        gone = time.monotonic() + 20
        while httpx.get(f"{letta_server.base_url}/v1/agents/{agent['id']}", timeout=10).status_code != 404:
            assert time.monotonic() < gone, "the server still has the deleted agent"
            time.sleep(0.2)
        third = start()
        assert third[0] == "POST /v1/conversations" and "GET /v1/models" in third  # refused, then checked in full
        log = (tmp_path / "local" / "logs" / "subconscious.log").read_text()
        assert f"LETTA_AGENT_ID {agent['id']} does not exist" in log
    finally:
        proxy.stop()
