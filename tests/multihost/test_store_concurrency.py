"""Many processes and simulated hosts writing one home at once: zero lost entries.

These run the real store in real processes (``tests/harness/store_writer.py``); hosts are simulated
with ``SUBCONSCIOUS_HOST`` on this machine, each with its own machine-local state dir.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from subconscious.state.store.core import Store
from tests.harness.sizes import size

ROOT = Path(__file__).resolve().parents[2]


def spawn(home: Path, local: Path, host: str, prefix: str, count: int, sessions: bool = False) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "tests.harness.store_writer", "--home", str(home), "--local", str(local),
           "--prefix", prefix, "--count", str(count)]
    if sessions:
        cmd.append("--sessions")
    env = dict(os.environ, SUBCONSCIOUS_HOST=host, PYTHONPATH=str(ROOT))
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(procs: list[subprocess.Popen]) -> list[str]:
    written = []
    for p in procs:
        out, err = p.communicate(timeout=1800)
        assert p.returncode == 0, err[-2000:]
        written += [line.split(" ", 1)[1] for line in out.splitlines()]
    return written


def reader(home: Path, local: Path, host: str = "reader") -> Store:
    return Store(home, host, local / "locks", local / "clocks")


# Writes per process: 200 in CI (eight writers still contend for every one of their 1,600 writes; the cost
# grows with the square of the count, as each write rewrites the host's whole shard), 1,000 with --full.
WRITES = size(200, 1000)
# Three hosts' twelve processes: 75 writes each in CI (900 writes, every one contended across hosts, each
# advancing its process's session cursor), 150 with --full.
HOST_WRITES = size(75, 150)


@pytest.mark.slow
def test_eight_processes_thousand_writes_each_lose_nothing(tmp_path):
    home, local = tmp_path / "home", tmp_path / "local"
    procs = [spawn(home, local, "laptop", f"p{i}", WRITES) for i in range(8)]
    written = finish(procs)
    assert len(written) == 8 * WRITES
    snap = reader(home, local).read()
    assert not snap.problems
    missing = [sid for sid in written if sid not in snap.live]
    assert missing == [], f"{len(missing)} entries lost, e.g. {missing[:5]}"
    # the upstream-readable view alone holds every entry, each still mapped to its own conversation
    view = json.loads((home / "conversations.json").read_text())
    assert {sid: view[sid]["conversationId"] for sid in written} == {sid: f"conv-{sid}" for sid in written}


@pytest.mark.slow
def test_three_hosts_four_processes_each_on_one_shared_directory(tmp_path):
    """No sync engine in between (think NFS): the host lock cannot serialise hosts, shards do."""
    home = tmp_path / "home"
    procs = []
    for h in ("alpha", "beta", "gamma"):
        local = tmp_path / f"local-{h}"  # each simulated machine has its own local state
        procs += [spawn(home, local, h, f"{h}-{i}", HOST_WRITES, sessions=True) for i in range(4)]
    written = finish(procs)
    assert len(written) == 3 * 4 * HOST_WRITES
    for h in ("alpha", "beta", "gamma"):
        snap = reader(home, tmp_path / f"local-{h}", h).read()
        assert not snap.problems
        assert sorted(sid for sid in written if sid not in snap.live) == []
        assert set(snap.shards) == {"alpha", "beta", "gamma"}
    # the view may have been overwritten by a racing host; any host's next write regenerates it whole
    reader(home, tmp_path / "local-alpha", "alpha").refresh()
    view = json.loads((home / "conversations.json").read_text())
    assert set(written) <= set(view)
    # every process advanced its own session cursor to its last write
    store = reader(home, tmp_path / "local-alpha", "alpha")
    for h in ("alpha", "beta", "gamma"):
        for i in range(4):
            assert store.session(f"{h}-{i}-cursor").last_processed_index == HOST_WRITES - 1
