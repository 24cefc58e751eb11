"""deploy/letta-server.sh, the user-facing self-hosted server script, run for real.

Its install (letta 0.16.8 venv, ~1.2 GB, 2-3 minutes) is kept in the test cache and reused by later runs
(tests/harness/letta_deploy.py; CI makes it before the suite).
The model provider it is pointed at is the harness's fake LLM, standing in for the user's OpenAI-compatible
endpoint (OPENAI_BASE_URL).
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

import httpx
import pytest

from subconscious.letta.agent import resolve_agent
from subconscious.letta.client import LettaClient
from subconscious.letta.config import LettaSettings
from tests.harness.letta_deploy import base, ensure_installed, install_home, run
from tests.harness.letta_server import free_port

pytestmark = [pytest.mark.letta, pytest.mark.slow]


@contextlib.contextmanager
def _run_home():
    """A home of this run's own (its database, pid files, logs, the server's HOME) with the shared install
    linked in: two suites or xdist workers running this test at once no longer share one postgres data dir
    and one run/letta.pid (the old fixed home under /var/cache)."""
    root = base()
    root.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="letta-deploy-run-", dir=root))
    try:
        if os.geteuid() == 0:
            os.chmod(root, 0o755)
            os.chmod(home, 0o755)  # the postgres account must reach the venv's binaries through it
        for name in ("venv", "letta-src"):
            (home / name).symlink_to(install_home() / name, target_is_directory=True)
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_install_start_status_stop_with_the_users_provider(letta_server, fake_llm, tmp_path):
    r = ensure_installed()  # made up front by CI (.ci/run); here the first time on a clone without it
    assert r is None or r.returncode == 0, r.stderr[-3000:]
    with _run_home() as home:
        _start_status_stop(home, letta_server, fake_llm, tmp_path)


def _start_status_stop(home: Path, letta_server, fake_llm, tmp_path) -> None:
    # a fresh database each run (a home of its own): Letta 0.16.8 keeps the endpoint of a model it already
    # knows, so a database from an earlier run would still point at that run's (gone) fake provider
    port, pg_port = free_port(), free_port()
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "SUBCONSCIOUS_LETTA_HOME": str(home),
           "LETTA_PORT": str(port), "PG_PORT": str(pg_port),
           "OPENAI_API_KEY": "sk-user-provider-key", "OPENAI_BASE_URL": f"{letta_server.fake_llm_url}/v1"}
    r = run("start", env)
    try:
        assert r.returncode == 0, r.stderr[-3000:]
        assert f"http://127.0.0.1:{port}" in r.stderr
        st = run("status", env)
        assert st.returncode == 0 and "letta: up" in st.stdout and "postgres: up" in st.stdout
        assert run("env", env).stdout.strip() == f"export LETTA_BASE_URL=http://127.0.0.1:{port}"
        again = run("start", env)
        assert again.returncode == 0 and "already running" in again.stderr
        pid = int((home / "run" / "letta.pid").read_text())

        settings = LettaSettings.from_env({"LETTA_BASE_URL": f"http://127.0.0.1:{port}"})
        with LettaClient.from_settings(settings) as c:
            resolved = resolve_agent(c, settings, config_path=tmp_path / "config.json")
            # no preference offered: the user's own provider, not letta/letta-free (internet)
            assert resolved.model == "openai-proxy/fake-model"
            conv = c.create_conversation(resolved.agent_id)["id"]
            assert c.send_message(conv, "hello from deploy").text == "ECHO: hello from deploy"
            httpx.delete(f"{c.base_url}/agents/{resolved.agent_id}")
        assert any(r["path"] == "/chat/completions" for r in fake_llm.requests())
    finally:
        stop = run("stop", env)
    assert stop.returncode == 0, stop.stderr
    assert not Path(f"/proc/{pid}").exists()
    st = run("status", env)
    assert st.returncode == 1 and "letta: down" in st.stdout and "postgres: down" in st.stdout
