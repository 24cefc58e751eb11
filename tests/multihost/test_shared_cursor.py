"""Six hosts on one shared directory whose renames are slow (NFS/SMB under load) advance one session's
cursor at the same time — the issue's "cursor moves back across hosts", with real processes. Every
reader of ours sees the cursor only grow, and it ends at the largest value any host wrote; so does a
reader of the view file itself, ``session-<id>.json``, which is what upstream's plugin reads (it went
1690 -> 1685 there: a publish whose check passed before another host's whole write swapped its older
version in)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from subconscious.state.store.core import Store

ROOT = Path(__file__).resolve().parents[2]
HOSTS = ["h1", "h2", "h3", "h4", "h5", "h6"]
COUNT = 25  # 6 × 25 = 150 Stops, as in the issue


def test_six_hosts_on_one_directory_never_move_a_cursor_back(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    sid = "shared-session"
    procs = []
    for slot, host in enumerate(HOSTS):
        env = dict(os.environ, SUBCONSCIOUS_HOST=host, PYTHONPATH=str(ROOT))
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "tests.harness.cursor_writer", "--home", str(home),
             "--local", str(tmp_path / f"local-{host}"), "--session", sid, "--count", str(COUNT),
             "--slot", str(slot), "--writers", str(len(HOSTS)), "--slow-ms", "30"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    reader = Store(home, "reader", tmp_path / "local-reader" / "locks", tmp_path / "local-reader" / "clocks",
                   read_only=True)
    seen: list[int] = []
    in_view: list[int] = []
    torn: list[bytes] = []
    done = threading.Event()
    view = home / f"session-{sid}.json"

    def watch():
        while not done.is_set():
            state = reader.session(sid)
            if state is not None:
                seen.append(state.last_processed_index)
            try:
                raw = view.read_bytes()
            except FileNotFoundError:
                raw = None
            if raw is not None:
                try:
                    in_view.append(json.loads(raw)["lastProcessedIndex"])
                except (ValueError, KeyError):
                    torn.append(raw)
            time.sleep(0.002)

    t = threading.Thread(target=watch)
    t.start()
    acked = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=600)
            assert p.returncode == 0, err[-2000:]
            acked += [int(line.split()[1]) for line in out.splitlines() if line.startswith("ok ")]
    finally:
        done.set()
        t.join()
    assert len(acked) == len(HOSTS) * COUNT
    backwards = [(a, b) for a, b in zip(seen, seen[1:]) if b < a]
    view_back = [(a, b) for a, b in zip(in_view, in_view[1:]) if b < a]
    print(f"shared cursor: {len(acked)} writes by {len(HOSTS)} hosts, {len(seen)} reads, {len(backwards)} moved back; "
          f"{len(in_view)} reads of session-{sid}.json, {len(view_back)} moved back, {len(torn)} torn")
    assert backwards == [], f"cursor moved back {len(backwards)} times, e.g. {backwards[:5]}"
    assert view_back == [], f"the view's lastProcessedIndex moved back {len(view_back)} times, e.g. {view_back[:5]}"
    assert torn == [], f"a torn view was read: {torn[:1]!r}"
    final = max(acked)
    for host in HOSTS + ["reader"]:
        store = Store(home, host, tmp_path / f"local-{host}" / "locks", tmp_path / f"local-{host}" / "clocks")
        assert store.session(sid).last_processed_index == final
    # the upstream-readable view catches up with the next write of any host
    Store(home, "h1", tmp_path / "local-h1" / "locks", tmp_path / "local-h1" / "clocks").fold_session(sid)
    Store(home, "h1", tmp_path / "local-h1" / "locks", tmp_path / "local-h1" / "clocks").update_session(
        sid, lambda cur: cur.evolve(last_seen_message_id="m-final"))
    assert json.loads((home / f"session-{sid}.json").read_text())["lastProcessedIndex"] == final
