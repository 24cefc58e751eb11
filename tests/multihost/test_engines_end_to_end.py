"""Every sync engine, end to end: two machines behind a link that names conflict copies exactly as that
engine does (subconscious.demo.replicas), concurrent sessions through the real store while the link
is cut; after it is restored, one machine's `subconscious watch` and the other's `subconscious doctor
--fix` fold the copies: nothing lost, both replicas identical, doctor clean."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from subconscious.demo.replicas import Network
from subconscious.state.copynames import ConflictCopy, Engine, classify
from subconscious.state.store.core import Store
from tests.multihost.watchproc import Side, WatchProc


def machine(side: Side, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "subconscious.demo.machine", *args], env=side.env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(procs) -> list[str]:
    written = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        written += json.loads(out.strip().splitlines()[-1])["written"]
    return written


def doctor(side: Side, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "subconscious", "doctor", *args], env=side.env() | {"COLUMNS": "160"},
                          capture_output=True, text=True, timeout=120, cwd=side.tmp)


def copies_on(side: Side) -> list[str]:
    names = os.listdir(side.state)
    return [n for n in names if isinstance(classify(n, names, include_ambiguous=True), ConflictCopy)]


def read_only(side: Side) -> Store:
    return Store(side.state, side.host, side.local / "locks", side.local / "clocks", read_only=True)


@pytest.mark.parametrize("engine", list(Engine), ids=[e.value for e in Engine])
def test_engine_copies_are_folded_by_watch_and_doctor_fix(tmp_path, engine):
    laptop, desktop = Side(tmp_path, "laptop"), Side(tmp_path, "desktop")
    for s in (laptop, desktop):
        s.letta_home.mkdir(mode=0o700)
    net = Network({"laptop": laptop.letta_home, "desktop": desktop.letta_home})
    net.connect("laptop", "desktop", engine)
    written = finish([machine(laptop, "--prefix", "first", "--sessions", "1")])
    net.sync_all()
    watcher = WatchProc(desktop, "--debounce", "0.1")
    try:
        net.cut()
        procs = [machine(laptop, "--prefix", "lap-w0", "--sessions", "5", "--resume", "first-00", "--cursor-base", "10"),
                 machine(laptop, "--prefix", "lap-w1", "--sessions", "5"),
                 machine(desktop, "--prefix", "desk-w0", "--sessions", "5", "--resume", "first-00", "--cursor-base", "50"),
                 machine(desktop, "--prefix", "desk-w1", "--sessions", "5")]
        written += finish(procs)
        net.restore()
        made = net.sync_all()
        names = [m.rsplit("/", 1)[-1] for m in made]
        assert names, "the link made no conflict copies"
        for name in names:  # named exactly as the engine names them, and recognised as such
            listing = os.listdir(laptop.state) + [name]
            found = classify(name, listing, include_ambiguous=True)
            assert isinstance(found, ConflictCopy) and found.engine is engine, (name, found)

        report = json.loads(doctor(laptop, "--json").stdout)
        engines = {f.get("engine") for f in report["findings"] if f["kind"] == "conflict-copy"}
        # doctor names the engine of every copy it finds; under load the desktop's watcher and the link may
        # have folded them all before it looked (seen once in four loaded CI rehearsals): then none is left
        assert engines == {engine.value} or (not engines and not copies_on(laptop)), report["findings"]
        r = doctor(laptop, "--fix")
        assert r.returncode == 0, r.stdout

        deadline = time.monotonic() + 30
        while copies_on(desktop) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not copies_on(desktop), copies_on(desktop)

        for _ in range(5):  # carry the repairs across until nothing changes and no copy is left
            net.sync_all()
            time.sleep(0.5)  # let the watcher fold anything the last sync brought
            if not copies_on(laptop) and not copies_on(desktop) and net.identical():
                break
            doctor(laptop, "--fix")
        assert net.identical()
    finally:
        assert watcher.stop() == 0
    for side in (laptop, desktop):
        assert not copies_on(side)
        live = read_only(side).read().live
        assert set(written) <= set(live), f"lost on {side.host}: {sorted(set(written) - set(live))}"
        assert read_only(side).session("first-00").last_processed_index == 50 + 2 * 7 + 3
        r = doctor(side)
        assert r.returncode == 0, r.stdout
    assert any("folded" in line for line in watcher.lines)
