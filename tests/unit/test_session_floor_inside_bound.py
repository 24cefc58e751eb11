"""Red team, issue 24, round 2 item 2: ``hosts/evil/floor.json`` with a session floor 23 h ahead (inside the
24 h bound) hid every session, and nothing was reported. gc sets a floor at most at its reference (this
machine's clock, or the newest write of the others: state/retention.py), so a floor beyond this machine's
clock + FOLLOW_MS (the most a correct clock follows another) is no floor: ignored, reported by doctor
(``future-stamp``, also in --json), never adopted by this host's gc."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from subconscious.state.clock import FOLLOW_MS, Stamp, wall_ms
from subconscious.state.records import SessionState
from subconscious.state.store.core import Store


def make(tmp: Path, host: str) -> Store:
    return Store(tmp / "lh" / ".letta" / "claude", host, tmp / f"local-{host}" / "locks", tmp / f"local-{host}" / "clocks")


def doctor_findings(tmp: Path) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "GIT_"))}
    env.update(LETTA_HOME=str(tmp / "lh"), SUBCONSCIOUS_HOST="alpha", SUBCONSCIOUS_STATE_DIR=str(tmp / "local-alpha"))
    (tmp / "project").mkdir(exist_ok=True)
    r = subprocess.run([sys.executable, "-m", "subconscious", "doctor", "--json"], cwd=tmp / "project", env=env,
                       capture_output=True, text=True, timeout=120)
    return json.loads(r.stdout)["findings"]


def plant(store: Store, host: str, floor_ms: int) -> Path:
    path = store.home / "hosts" / host / "floor.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"format": 1, "host": host, "sessionFloor": f"{floor_ms}:0"}, indent=2) + "\n")
    return path


def test_a_session_floor_23_hours_ahead_hides_no_session_and_is_reported(tmp_path):
    a = make(tmp_path, "alpha")
    for sid in ("s1", "s2"):
        a.update_session(sid, lambda cur, sid=sid: SessionState(sid, conversation_id=f"conv-{sid}",
                                                                 last_processed_index=3))
    plant(a, "evil", wall_ms() + 23 * 3600 * 1000)
    assert sorted(sid for sid, state, _ in a.sessions() if state is not None) == ["s1", "s2"]
    assert a.session("s1").conversation_id == "conv-s1"
    a.update_session("s1", lambda cur: cur.evolve(last_processed_index=7))
    assert a.session("s1").last_processed_index == 7
    assert a.session_files.raise_floor(Stamp(1, 0)) == Stamp(1, 0)  # a gc: the evil floor is not taken
    found = [f for f in doctor_findings(tmp_path) if f["kind"] == "future-stamp"]
    assert any(f["path"].endswith("evil/floor.json") and "session floor" in f["message"] for f in found), found


def test_a_floor_a_correct_gc_sets_still_counts(tmp_path):
    a = make(tmp_path, "alpha")
    a.update_session("old", lambda cur: SessionState("old", conversation_id="conv-old", last_processed_index=1))
    plant(a, "beta", wall_ms() + FOLLOW_MS // 2)  # beta's gc 0d, its clock a little ahead
    assert [sid for sid, state, _ in a.sessions() if state is not None] == []
