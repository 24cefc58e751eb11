"""The real `subconscious watch` process: folds copies named exactly as every engine names them as they
appear, survives its directory disappearing and coming back, logs each fold, stops cleanly."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from subconscious.state.copynames import Engine, make_copy_name
from subconscious.state.records import SessionState
from tests.multihost.watchproc import Side, WatchProc


def wait_gone(path: Path, timeout: float = 15) -> float:
    t0 = time.monotonic()
    while path.exists():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"{path.name} still there after {timeout} s")
        time.sleep(0.005)
    return time.monotonic() - t0


@pytest.fixture
def sides(tmp_path):
    a, b = Side(tmp_path, "alpha"), Side(tmp_path, "beta")
    a.store().put_conversation("s-a", "conv-a", "agent-1")
    b.store().put_conversation("s-b0", "conv-b0", "agent-1")
    return a, b


def test_watch_folds_copies_of_every_engine_as_they_appear(sides):
    a, b = sides
    w = WatchProc(a)
    latencies = {}
    try:
        for i, engine in enumerate(Engine):
            b.store().put_conversation(f"s-b{i + 1}", f"conv-b{i + 1}", "agent-1")
            copy = a.state / make_copy_name(engine, "conversations.json", host="BETA-PC", user="bob")
            tmp = a.state / f".syncthing.{copy.name}.tmp"  # engines write a temp file and rename it
            shutil.copyfile(b.store().view_path, tmp)
            os.replace(tmp, copy)
            latencies[engine.value] = wait_gone(copy)
            assert a.store().conversation(f"s-b{i + 1}").conversation_id == f"conv-b{i + 1}"
            # a session copy too, further along than the original
            a.store().update_session("cur", lambda cur, i=i: (cur or SessionState("cur")).evolve(last_processed_index=i))
            further = json.loads(a.store().session_path("cur").read_text()) | {"lastProcessedIndex": 100 + i, "hlc": "1:0"}
            scopy = a.state / make_copy_name(engine, "session-cur.json", host="BETA-PC", user="bob")
            scopy.write_text(json.dumps(further))
            wait_gone(scopy)
            assert a.store().session("cur").last_processed_index == 100 + i
        assert w.proc.poll() is None
    finally:
        code = w.stop()
    assert code == 0 and w.lines[-1].startswith("subconscious watch: stopped")
    kept = sorted(p.name for p in (a.state / "backups").rglob("*") if p.is_file())
    assert len(kept) == 2 * len(Engine)
    log = (a.local / "logs" / "subconscious.log").read_text()
    assert log.count("watch: folded") >= len(Engine) and "watch: stopped" in log
    print("\n[watch] fold latency after a copy appears (ms): "
          + ", ".join(f"{k} {v * 1000:.0f}" for k, v in latencies.items()))


def test_watch_survives_its_directory_disappearing_and_coming_back(sides):
    a, b = sides
    w = WatchProc(a, "--debounce", "0.1")
    try:
        away = a.tmp / "away"
        os.replace(a.letta_home, away)  # an unmounted drive, a sync engine re-creating the folder
        w.wait_line("disappeared")
        time.sleep(1.5)
        os.replace(away, a.letta_home)
        copy = a.state / make_copy_name(Engine.SYNCTHING, "conversations.json")
        shutil.copyfile(b.store().view_path, copy)
        wait_gone(copy, 20)
        # deleted outright and made anew
        shutil.rmtree(a.letta_home)
        time.sleep(1.5)
        assert w.proc.poll() is None
        a.store().put_conversation("s-new", "conv-new", "agent-1")
        copy = a.state / make_copy_name(Engine.DROPBOX, "conversations.json")
        shutil.copyfile(b.store().view_path, copy)
        wait_gone(copy, 20)
        assert a.store().conversation("s-b0").conversation_id == "conv-b0"
    finally:
        code = w.stop(signal.SIGINT)
    assert code == 0


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime, in clock ticks


def test_watch_does_not_loop_on_a_lookalike_and_stays_idle(sides):
    a, _ = sides
    lookalike = a.state / "conversations 2.json"  # iCloud-like name, but a user's file
    lookalike.write_text('{"not": ["ours"]}')
    shard = a.store().shard_path()
    w = WatchProc(a, "--debounce", "0.05")
    try:
        time.sleep(1.0)
        before = shard.stat().st_mtime_ns
        (a.state / "notes.txt").write_text("an unrelated file: an event, nothing to fold")
        os.utime(a.state / "conversations.json")
        time.sleep(1.0)
        assert shard.stat().st_mtime_ns == before  # nothing new: no rewrite
        os.utime(lookalike)  # the lookalike changed: looked at once more...
        time.sleep(1.0)
        once = shard.stat().st_mtime_ns
        cpu = _cpu_ticks(w.proc.pid)
        time.sleep(2.0)
        assert shard.stat().st_mtime_ns == once  # ...and then left alone: no write loop
        assert _cpu_ticks(w.proc.pid) - cpu < 20  # well under 0.2 s of CPU in 2 s: no busy loop
        assert lookalike.read_text() == '{"not": ["ours"]}'
    finally:
        assert w.stop() == 0


def test_watch_once_folds_and_exits(sides):
    a, b = sides
    copy = a.state / make_copy_name(Engine.NEXTCLOUD, "conversations.json")
    shutil.copyfile(b.store().view_path, copy)
    r = subprocess.run([sys.executable, "-m", "subconscious", "watch", "--once"], env=a.env(), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and "folded 1 conflict copy" in r.stdout and not copy.exists()
