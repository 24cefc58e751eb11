"""Two real Syncthing devices share a LETTA_HOME; each runs a real `subconscious watch`. Concurrent
sessions on both sides while the link is cut make real .sync-conflict copies when it comes back; the
watchers fold them: zero entries lost, both replicas identical, doctor clean on both sides."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from subconscious.state.copynames import is_temporary
from subconscious.state.store.core import Store
from tests.harness.syncthing import SyncthingPair
from tests.multihost.watchproc import WatchProc

pytestmark = pytest.mark.syncthing

STATE = Path(".letta") / "claude"


class Host:
    def __init__(self, pair: SyncthingPair, side: str, tmp: Path):
        self.side, self.host = side, f"host{side}"
        self.letta_home = pair.dir(side)
        self.state = self.letta_home / STATE
        self.local = tmp / f"local-{side}"
        self.tmp = tmp

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "GIT_"))}
        env.update(LETTA_HOME=str(self.letta_home), SUBCONSCIOUS_HOST=self.host, SUBCONSCIOUS_STATE_DIR=str(self.local),
                   COLUMNS="160")
        return env

    def machine(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "subconscious.demo.machine", *args], env=self.env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def store(self) -> Store:
        return Store(self.state, self.host, self.local / "locks", self.local / "clocks", read_only=True)

    def doctor(self) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "subconscious", "doctor"], env=self.env(), capture_output=True,
                              text=True, timeout=120, cwd=self.tmp)


def copies_in(state: Path) -> list[str]:
    out = []
    for d in (state, state / "hosts"):
        try:
            out += [n for n in os.listdir(d) if ".sync-conflict-" in n and is_temporary(n) is None]
        except FileNotFoundError:
            pass
    return out


def finish(procs: list[subprocess.Popen]) -> list[str]:
    import json

    written = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        written += json.loads(out.strip().splitlines()[-1])["written"]
    return written


def replica(state: Path) -> dict[str, bytes]:
    """Every file of ours, as bytes (what must be identical on both devices)."""
    out = {}
    for p in state.rglob("*"):
        if p.is_file() and not p.name.startswith((".syncthing.", ".subconscious-tmp-")):
            out[p.relative_to(state).as_posix()] = p.read_bytes()
    return out


def test_cut_concurrent_sessions_restore_watchers_fold_everything(syncthing_pair: SyncthingPair, tmp_path):
    pair = syncthing_pair
    a, b = Host(pair, "A", tmp_path), Host(pair, "B", tmp_path)
    written = finish([a.machine("--prefix", "first", "--sessions", "1")])
    pair.scan("A")
    pair.wait_for(lambda: (b.state / "session-first-00.json").exists(), "first session on B")
    pair.wait_in_sync()

    watchers = [WatchProc(a), WatchProc(b)]
    try:
        pair.cut()
        procs = []
        for h, base in ((a, 10), (b, 20)):
            for w in range(2):  # two Claude Code windows per machine
                extra = ["--resume", "first-00", "--cursor-base", str(base)] if w == 0 else []
                procs.append(h.machine("--prefix", f"{h.host}-w{w}", "--sessions", "6", *extra))
        written += finish(procs)
        for side in ("A", "B"):
            pair.scan(side)
        assert copies_in(a.state) == [] and copies_in(b.state) == []

        t0 = time.monotonic()
        pair.restore()
        seen: dict[str, float] = {}

        def progress() -> bool:
            now = time.monotonic() - t0
            for h in (a, b):
                for name in copies_in(h.state):
                    seen.setdefault(name, now)
            return bool(seen) and not copies_in(a.state) and not copies_in(b.state)

        pair.wait_for(progress, "conflict copies to appear and be folded on both sides", timeout=90, interval=0.01)
        t_folded = time.monotonic() - t0

        def converged() -> bool:
            pair.scan("A")
            pair.scan("B")
            return (not copies_in(a.state) and not copies_in(b.state) and replica(a.state) == replica(b.state)
                    and set(written) <= set(a.store().read().live) and set(written) <= set(b.store().read().live))

        pair.wait_for(converged, "both replicas identical with every entry", timeout=90, interval=0.2)
        t_converged = time.monotonic() - t0
        pair.wait_in_sync()
        assert replica(a.state) == replica(b.state)
    finally:
        codes = [w.stop() for w in watchers]
    assert codes == [0, 0]

    assert any(".sync-conflict-" in n for n in seen), "the test meant to make real Syncthing conflict copies"
    for h in (a, b):
        live = h.store().read().live
        assert set(written) <= set(live), f"lost on {h.side}: {sorted(set(written) - set(live))}"
        assert h.store().session("first-00").last_processed_index == 37  # the furthest cursor: B's 20 + 2*7 + 3
        r = h.doctor()
        assert r.returncode == 0, r.stdout
        kept = [p.name for p in (h.state / "backups").rglob("*") if p.is_file()]
        assert set(seen) <= set(kept)  # every copy kept in backups/, on both devices
    folded = sum(int(line.split()[3]) for w in watchers for line in w.lines if " folded " in line)
    print(f"\n[syncthing+watch] {len(written)} sessions, {len(seen)} real conflict copies "
          f"({', '.join(sorted(seen))}); all folded {t_folded:.2f} s after restore; replicas identical "
          f"{t_converged:.2f} s after restore; folds by the watchers: {folded}")
