"""Issue 24 item 3: no single file can hide the home. A floor or stamp beyond this machine's clock +
ALLOWED_SKEW_MS, from any file (a conflict copy of a shard, floor.json, a copy of the view, a session
version), is reported by doctor, never adopted, never followed by the clock; a version carrying it counts
as the oldest of its key (kept where nothing else was written). Real files in tmp dirs, the CLI for doctor."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings, strategies as st

from subconscious.state.bounds import over_bound, winners_beyond
from subconscious.state.clock import ALLOWED_SKEW_MS, FOLLOW_MS, MAX, Stamp, bound, wall_ms
from subconscious.state.copynames import Engine, make_copy_name
from subconscious.state.records import SessionState
from subconscious.state.store.core import Store
from tests.harness.sizes import examples

FAR = MAX.encode()  # 9999999999999999:999999999


def make(tmp: Path, host: str) -> Store:
    return Store(tmp / "lh" / ".letta" / "claude", host, tmp / f"local-{host}" / "locks", tmp / f"local-{host}" / "clocks")


def env(tmp: Path, host: str = "alpha") -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "GIT_"))}
    out.update(LETTA_HOME=str(tmp / "lh"), SUBCONSCIOUS_HOST=host, SUBCONSCIOUS_STATE_DIR=str(tmp / f"local-{host}"),
               COLUMNS="200")
    (tmp / "project").mkdir(exist_ok=True)
    return out


def doctor_json(tmp: Path) -> list[dict]:
    r = subprocess.run([sys.executable, "-m", "subconscious", "doctor", "--json"], cwd=tmp / "project",
                       env=env(tmp), capture_output=True, text=True, timeout=120)
    return [f for f in json.loads(r.stdout)["findings"] if f["kind"] == "future-stamp"]


def shard_copy(store: Store, host: str) -> Path:
    return store.home / "hosts" / make_copy_name(Engine.SYNCTHING, f"{host}.json")


def live(store: Store) -> dict[str, str]:
    return {k: c.conversation_id for k, c in store.read().live.items()}


def test_a_copy_of_a_shard_with_a_far_future_floor_hides_nothing_and_is_not_adopted(tmp_path):
    a, b = make(tmp_path, "alpha"), make(tmp_path, "beta")
    a.put_conversation("s1", "conv-1", "agent-a")
    b.put_conversation("s2", "conv-2", "agent-a")
    doc = json.loads(b.shard_path().read_text())
    doc["settings"]["tombstone-floor"] = {"value": FAR, "hlc": f"{wall_ms()}:0", "host": "beta"}
    shard_copy(b, "beta").write_text(json.dumps(doc))
    assert live(a) == {"s1": "conv-1", "s2": "conv-2"}
    found = doctor_json(tmp_path)  # reported while the copy is there (the next write folds it into backups/)
    assert any("beta.sync-conflict" in f["path"] and "tombstone floor" in f["message"] for f in found), found
    assert all(f["severity"] == "warning" for f in found)
    a.put_conversation("s3", "conv-3", "agent-a")  # acknowledged ...
    assert live(a) == live(b) == {"s1": "conv-1", "s2": "conv-2", "s3": "conv-3"}  # ... and visible
    for store in (a, b):
        assert "tombstone-floor" not in json.loads(store.shard_path().read_text())["settings"]  # never adopted


def test_a_floor_setting_stamped_at_the_maximum_does_not_win_the_floor_either(tmp_path):
    a, b = make(tmp_path, "alpha"), make(tmp_path, "beta")
    a.put_conversation("s1", "conv-1", "agent-a")
    doc = json.loads(b.shard_path().read_text()) if b.shard_path().exists() else {
        "format": 1, "host": "beta", "name": "beta", "clock": FAR, "written": 0, "conversations": {}, "settings": {}}
    doc["settings"]["tombstone-floor"] = {"value": FAR, "hlc": FAR, "host": "beta"}
    doc["clock"] = FAR
    b.shard_path().parent.mkdir(parents=True, exist_ok=True)
    b.shard_path().write_text(json.dumps(doc))  # beta's own shard this time, clock and all
    a.put_conversation("s2", "conv-2", "agent-a")
    assert live(a) == {"s1": "conv-1", "s2": "conv-2"}
    assert "tombstone-floor" not in json.loads(a.shard_path().read_text())["settings"]
    assert Stamp.decode(json.loads(a.shard_path().read_text())["clock"]) <= bound(wall_ms())
    messages = [f["message"] for f in doctor_json(tmp_path)]
    assert any(m.startswith("its clock") for m in messages) and any("tombstone floor" in m for m in messages)


def test_a_far_future_session_floor_retires_nothing_and_is_not_adopted(tmp_path):
    a, b = make(tmp_path, "alpha"), make(tmp_path, "beta")
    a.update_session("s1", lambda cur: SessionState("s1", conversation_id="conv-1", last_processed_index=3))
    floor = a.home / "hosts" / "beta" / "floor.json"
    floor.parent.mkdir(parents=True, exist_ok=True)
    floor.write_text(json.dumps({"format": 1, "host": "beta", "sessionFloor": FAR}, indent=2) + "\n")
    assert a.session("s1").last_processed_index == 3
    a.update_session("s1", lambda cur: cur.evolve(last_processed_index=7))
    assert a.session("s1").last_processed_index == 7 and b.session("s1").last_processed_index == 7
    assert [sid for sid, state, _ in a.sessions() if state is not None] == ["s1"]
    assert a.session_files.raise_floor(Stamp(1, 0)) == Stamp(1, 0)  # a gc: the far floor is not taken
    assert json.loads(a.session_files.floor_path().read_text())["sessionFloor"] == "1:0"
    assert any("session floor" in f["message"] and f["path"].endswith("beta/floor.json") for f in doctor_json(tmp_path))


def test_one_stamp_at_the_maximum_pins_no_clock(tmp_path):
    a, b = make(tmp_path, "alpha"), make(tmp_path, "beta")
    a.put_conversation("s0", "conv-0", "agent-a")
    view = json.loads(a.view_path.read_text())
    view["evil"] = {"agentId": "agent-x", "conversationId": "conv-evil", "hlc": FAR, "host": "mallory"}
    view["s0"] = {"agentId": "agent-x", "conversationId": "conv-hijack", "hlc": FAR, "host": "mallory"}
    (a.home / make_copy_name(Engine.DROPBOX, "conversations.json")).write_text(json.dumps(view))
    assert any("conversations" in f["path"] and "2 entries" in f["message"] for f in doctor_json(tmp_path))
    assert live(a)["s0"] == "conv-0"  # an in-bound write beats it
    assert live(a)["evil"] == "conv-evil"  # kept: nothing else was written for it
    b.put_conversation("k", "conv-first", "agent-a")
    a.put_conversation("k", "conv-later", "agent-a")  # alpha < beta: a pinned clock made this lose
    assert live(a)["k"] == live(b)["k"] == "conv-later"
    a.put_conversation("evil", "conv-mine", "agent-a")
    assert live(b)["evil"] == "conv-mine"
    for store in (a, b):
        clock = Stamp.decode(json.loads((store.clocks_dir / f"{store.host}.json").read_text())["hlc"])
        assert clock <= bound(wall_ms())


def test_a_clock_already_pinned_starts_again_from_the_wall_clock(tmp_path):
    a = make(tmp_path, "alpha")
    a.clocks_dir.mkdir(parents=True)
    (a.clocks_dir / "alpha.json").write_text(json.dumps({"hlc": FAR}))
    a.put_conversation("k", "conv-1", "agent-a")
    stamp = a.conversation("k").stamp
    assert stamp <= bound(wall_ms()) and stamp.wall >= wall_ms() - 60_000


def test_a_session_version_from_beyond_the_bound_keeps_its_cursor_not_its_fields(tmp_path):
    a = make(tmp_path, "alpha")
    a.update_session("s1", lambda cur: SessionState("s1", conversation_id="conv-1", last_processed_index=3))
    evil = SessionState("s1", conversation_id="conv-evil", last_processed_index=9, host="beta", stamp=MAX)
    (a.home / "hosts" / "beta").mkdir(parents=True)
    (a.home / "hosts" / "beta" / "session-s1.json").write_text(json.dumps(evil.to_json()))
    state = a.session("s1")
    assert (state.conversation_id, state.last_processed_index) == ("conv-1", 9)
    a.update_session("s1", lambda cur: cur.evolve(conversation_id="conv-2"))
    assert a.session("s1").conversation_id == "conv-2"
    assert a.session("s1").stamp <= bound(wall_ms())
    r = subprocess.run([sys.executable, "-m", "subconscious", "status", "--json"], cwd=tmp_path / "project",
                       env=env(tmp_path), capture_output=True, text=True, timeout=120)
    assert any(p["kind"] == "future-stamp" and p["path"].endswith("beta/session-s1.json")
               for p in json.loads(r.stdout)["problems"]), r.stdout


def test_within_the_bound_a_stamp_ahead_still_orders_as_before(tmp_path):
    """A machine a few hours ahead is a clock like any other: its write wins; a write made after it wins
    too, though the others' clocks follow it only up to their clock + FOLLOW_MS (the version replaced is
    recorded as ahead: see test_clock_follow)."""
    a, b = make(tmp_path, "alpha"), make(tmp_path, "beta")
    ahead = wall_ms() + ALLOWED_SKEW_MS - 3_600_000
    b.now = lambda: ahead
    b.put_conversation("k", "conv-ahead", "agent-a")
    assert live(a)["k"] == "conv-ahead"
    a.put_conversation("k", "conv-after", "agent-a")
    assert live(b)["k"] == "conv-after" and a.conversation("k").stamp.wall <= wall_ms() + FOLLOW_MS + 1
    found = doctor_json(tmp_path)  # beta's replaced version is named: a clock ahead, or a crafted record
    assert [f["path"] for f in found] == ["hosts/beta.json"] and "ahead record" in found[0]["message"], found


walls = st.one_of(st.integers(0, 10**16 - 1), st.integers(10**12, 3 * 10**12))


@settings(max_examples=examples(300), deadline=None)
@given(st.dictionaries(st.text("abc", min_size=1, max_size=3), st.tuples(walls, st.integers(0, 10**9 - 1),
                                                                          st.integers(0, 3)), max_size=8),
       st.integers(0, 3 * 10**12))
def test_the_quick_check_finds_every_stamp_beyond_the_bound(entries, now):
    values = {k: {"hlc": "0" * pad + f"{w}:{c}"} for k, (w, c, pad) in entries.items()
              if len(str(w)) + pad <= 16}
    limit = bound(now)
    assert winners_beyond(values, limit) == bool(over_bound(values, limit))


def test_a_floor_within_the_bound_but_above_its_own_stamp_hides_nothing(tmp_path):
    """Red team: a floor 12 h ahead (inside the bound) on a setting stamped now would make every shard
    'stale' and drop all it holds below the floor; a real floor is never above its setting's stamp."""
    a, b = make(tmp_path, "alpha"), make(tmp_path, "beta")
    a.put_conversation("s1", "conv-1", "agent-a")
    b.put_conversation("s2", "conv-2", "agent-a")
    doc = json.loads(b.shard_path().read_text())
    ahead = f"{wall_ms() + 12 * 3_600_000}:0"
    doc["settings"]["tombstone-floor"] = {"value": ahead, "hlc": f"{wall_ms()}:0", "host": "beta"}
    shard_copy(b, "beta").write_text(json.dumps(doc))
    assert live(a) == {"s1": "conv-1", "s2": "conv-2"}
    assert any("above its own stamp" in f["message"] for f in doctor_json(tmp_path))
    a.put_conversation("s3", "conv-3", "agent-a")
    assert live(b) == {"s1": "conv-1", "s2": "conv-2", "s3": "conv-3"}
    assert "tombstone-floor" not in json.loads(a.shard_path().read_text())["settings"]


def test_doctor_reports_a_host_session_version_from_beyond_the_bound(tmp_path):
    """Red team round 2, item 3: status listed it, doctor did not (it read host versions only of sessions
    with conflict copies)."""
    a = make(tmp_path, "alpha")
    a.update_session("s1", lambda cur: SessionState("s1", conversation_id="conv-1", last_processed_index=3))
    evil = SessionState("s1", conversation_id="conv-evil", last_processed_index=3, host="beta", stamp=MAX)
    (a.home / "hosts" / "beta").mkdir(parents=True)
    (a.home / "hosts" / "beta" / "session-s1.json").write_text(json.dumps(evil.to_json()))
    found = doctor_json(tmp_path)
    assert [f["path"] for f in found] == ["hosts/beta/session-s1.json"], found
    r = subprocess.run([sys.executable, "-m", "subconscious", "doctor"], cwd=tmp_path / "project",
                       env=env(tmp_path), capture_output=True, text=True, timeout=120)
    assert "future-stamp" in r.stdout and "beta/session-s1.json" in r.stdout, r.stdout
