"""How many pytest-xdist workers a run gets (tests/conftest.py): the README's command, which names nothing,
runs on workers (one more than the cores); a run of one file or one test stays in this process, and ``-n 0``,
``-p no:xdist``, ``-s`` and ``--co`` keep working as pytest's and xdist's own options."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import WORKERS_ENV, default_workers

REPO = Path(__file__).resolve().parents[2]


def test_a_run_naming_a_directory_or_nothing_gets_workers_and_one_of_files_or_tests_does_not(monkeypatch):
    monkeypatch.delenv(WORKERS_ENV, raising=False)
    root = str(REPO)
    assert default_workers(["tests"], root, 2) == 3  # the README's command: testpaths
    assert default_workers(["tests/unit", "tests/unit/test_docs.py"], root, 2) == 3
    assert default_workers(["tests/multihost/"], root, 1) == 2 and default_workers(["tests"], root, 64) == 8
    assert default_workers(["tests/unit/test_docs.py"], root, 2) == 0
    assert default_workers(["tests/unit/test_docs.py::test_ci_runs_the_readmes_test_command",
                            "tests/unit/test_store.py"], root, 2) == 0
    monkeypatch.setenv(WORKERS_ENV, "5")
    assert default_workers(["tests/unit/test_docs.py"], root, 2) == 5
    monkeypatch.setenv(WORKERS_ENV, "0")
    assert default_workers(["tests"], root, 2) == 0


def pytest_runs(*runs: list[str]) -> list[tuple[int, str]]:
    """Each argument list run as ``python -m pytest -p no:cacheprovider <args>`` (all at once); (exit code, output)."""
    env = {k: v for k, v in os.environ.items() if k != WORKERS_ENV and not k.startswith("PYTEST_XDIST")}
    procs = [subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=REPO, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for args in runs]
    return [(p.returncode, out) for p in procs for out, _ in [p.communicate(timeout=300)]]


def workers_started(out: str) -> int:
    m = re.search(r"created: (\d+)/\d+ workers", out)
    return int(m.group(1)) if m else 0


ONE_TEST = "tests/unit/test_suite_workers.py::test_a_run_naming_a_directory_or_nothing_gets_workers_and_one_of_files_or_tests_does_not"


def test_the_default_starts_workers_and_the_usual_options_still_turn_them_off():
    # tests/harness holds no tests: a run there is its start-up, its workers' and an empty collection
    (default, code_d), (plain, code_p), (serial, code_s), (one, code_o) = [
        (out, code) for code, out in pytest_runs(["tests/harness"], ["-p", "no:xdist", "tests/harness"],
                                                 ["-n", "0", "tests/harness"], [ONE_TEST])]
    assert code_d == 5 and workers_started(default) == default_workers(["tests/harness"], str(REPO), os.cpu_count()) > 1, default
    for code, out in ((code_p, plain), (code_s, serial)):
        assert code == 5 and workers_started(out) == 0 and "usage" not in out.lower(), out
    assert code_o == 0 and workers_started(one) == 0 and "1 passed" in one, one  # one test: no workers to start
