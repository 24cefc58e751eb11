"""deploy/letta-server.sh's own install (letta 0.16.8 in a venv of its own, ~1.2 GB, 2-3 minutes), made once
under a lock and shared by every run of tests/integration/test_letta_deploy.py. CI makes it up front, beside
the harness's server venv (``python -m tests.harness.letta_deploy install``), so the suite's time is the
tests'; a clone without it gets it from the test, which checks the install's exit status the same way.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.harness.letta_server import cache_root

SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "letta-server.sh"
VERSION = "0.16.8"


def base() -> Path:
    # as root, postgres runs as an unprivileged user that cannot enter /root: keep the install elsewhere
    return Path("/var/cache/subconscious-tests") if os.geteuid() == 0 and not os.environ.get(
        "SUBCONSCIOUS_TEST_CACHE") else cache_root()


def install_home() -> Path:
    """The script's install (venv/, letta-src/), shared by every run."""
    return base() / f"letta-deploy-{VERSION}"


def run(cmd: str, env: dict, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), cmd], env=env, capture_output=True, text=True, timeout=timeout)


@contextlib.contextmanager
def _install_lock():
    lock = base() / f"letta-deploy-{VERSION}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def ensure_installed() -> subprocess.CompletedProcess | None:
    """Run the script's ``install`` into the shared home unless it is there; the run (None: it was there)."""
    shared = install_home()
    with _install_lock():
        if (shared / "venv" / f".installed-{VERSION}").exists():
            return None
        with tempfile.TemporaryDirectory() as home:
            env = {"PATH": os.environ["PATH"], "HOME": home, "SUBCONSCIOUS_LETTA_HOME": str(shared)}
            return run("install", env, timeout=1200)


def main(argv: list[str]) -> int:
    if argv != ["install"]:
        print("usage: python -m tests.harness.letta_deploy install", file=sys.stderr)
        return 2
    r = ensure_installed()
    if r is not None and r.returncode != 0:
        print(r.stderr[-3000:], file=sys.stderr)
        return r.returncode
    print(f"deploy/letta-server.sh install: {install_home()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
