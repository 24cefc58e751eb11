"""One repository, two machines, two paths: one project to the agent (real hooks, real worker, real Letta)."""

from __future__ import annotations

import subprocess
import uuid

import pytest

from tests.harness.hooks import conversation_messages, run_hook as hook
from tests.harness.transcripts import Transcript
from tests.integration.test_pipeline_letta import clean_env, store_for, texts_of, wait_cursor

pytestmark = pytest.mark.letta


def checkout(path, remote):
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=path, check=True)
    subprocess.run(["git", "remote", "add", "origin", remote], cwd=path, check=True)
    return path


def test_one_repository_at_two_paths_on_two_machines_is_one_project(tmp_path, letta_server, letta_agent, letta_env,
                                                                     fake_llm):
    machines = {
        "laptop": checkout(tmp_path / "laptop/src/app", "git@github.com:Acme/App.git"),
        "desktop": checkout(tmp_path / "desktop/work/acme-app", "https://bot:ghp_notreal0123456789@github.com/Acme/App"),
    }
    seen = {}
    for host, repo in machines.items():
        env = {**clean_env(tmp_path, letta_env, LETTA_AGENT_ID=letta_agent["id"]), "SUBCONSCIOUS_HOST": host,
               "SUBCONSCIOUS_STATE_DIR": str(tmp_path / f"local-{host}")}
        sid = str(uuid.uuid4())
        tr = Transcript(tmp_path / "t" / f"{sid}.jsonl", sid, str(repo))
        base = {"session_id": sid, "transcript_path": str(tr.path), "cwd": str(repo)}
        hook("session-start", {**base, "hook_event_name": "SessionStart", "source": "startup"}, env, timeout=60)
        tr.user(f"a question asked on the {host}").assistant("an answer")
        hook("stop", {**base, "hook_event_name": "Stop", "stop_hook_active": False}, env)
        seen[host] = (sid, env)
    for host, (sid, _env) in seen.items():
        wait_cursor(tmp_path, sid, 1)
        session = store_for(tmp_path).session(sid)
        assert session.project == "github.com/Acme/App"
        users = texts_of(conversation_messages(letta_server.base_url, session.conversation_id), "user_message")
        start = next(u for u in users if "<claude_code_session_start>" in u)
        assert "<project_id>github.com/Acme/App</project_id>" in start and "<branch>main</branch>" in start
        update = next(u for u in users if f"a question asked on the {host}" in u)
        assert '<project id="github.com/Acme/App" name="App" branch="main"' in update
        assert "ghp_notreal0123456789" not in start + update
