"""The Letta harness stops only what it started and cleans up after itself."""
from __future__ import annotations

import subprocess
import sys
import time

from tests.harness.letta_server import LettaServer, requirements_key, venv_dir
from tests.harness.procs import pid_alive


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def test_stop_signals_recorded_pids_only_and_removes_the_run_dir(tmp_path):
    ours, bystander = _sleeper(), _sleeper()
    run = tmp_path / "run"
    (run / "pg" / "data").mkdir(parents=True)
    try:
        srv = LettaServer(base_url="", fake_llm_url="", run_dir=str(run), letta_port=0, fake_llm_port=0, pg_port=0,
                          pids={"letta": ours.pid, "postgres": bystander.pid})
        srv.stop()
        ours.wait(timeout=20)
        assert ours.returncode is not None
        # "postgres" is only signalled if its command line names our data directory: the bystander survives
        time.sleep(0.2)
        assert bystander.poll() is None and pid_alive(bystander.pid)
        assert not run.exists()
        srv.stop()  # idempotent
    finally:
        for p in (ours, bystander):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_venv_is_cached_outside_the_clone_keyed_on_the_pins(monkeypatch, tmp_path):
    monkeypatch.setenv("SUBCONSCIOUS_TEST_CACHE", str(tmp_path / "cache"))
    assert venv_dir() == tmp_path / "cache" / f"letta-venv-{requirements_key()}"
    assert len(requirements_key()) == 12


def test_the_tests_conversation_listing_reads_past_a_short_page(monkeypatch):
    """tests/harness/hooks.conversation_messages, which the end-to-end tests count deliveries with, pages like
    Letta 0.16.8: ``limit`` counts rows and a row may list as no message (a ``send_message`` return next to
    its call). It stopped at the first page shorter than 100 and missed everything after it."""
    from tests.harness import hooks

    rows = [[{"id": f"m{i}"}] if i % 50 else [] for i in range(250)]  # every 50th row lists as nothing

    class Answer:
        def __init__(self, page):
            self.page = page

        def raise_for_status(self):
            pass

        def json(self):
            return self.page

    def get(url, params, timeout):
        start = next(i for i, r in enumerate(rows) if r and r[0]["id"] == params["after"]) + 1 if "after" in params else 0
        return Answer([m for r in rows[start:start + params["limit"]] for m in r])

    monkeypatch.setattr(hooks.httpx, "get", get)
    got = hooks.conversation_messages("http://letta", "conv-1")
    assert [m["id"] for m in got] == [m["id"] for r in rows for m in r]
