"""Red team, issue 24: a tombstone floor inside the 24 h bound (23 h ahead, its setting stamped to match, in one
conflict copy of a shard) hid every entry of the home, was adopted into this host's shard, and deleting the copy
did not bring the entries back. A prune only sets a floor from tombstones older than the retention window, so a
floor newer than now - retention + allowed skew is no floor: ignored, reported, never adopted."""

import json

from subconscious.state.clock import wall_ms
from subconscious.state.store.core import open_store

COPY = "hostb.sync-conflict-20261202-010101-EVILAAA.json"


def _plant_floor(home, floor_ms):
    shard = json.loads((home / "hosts" / "hostb.json").read_text())
    floor = f"{floor_ms}:0"
    shard["settings"]["tombstone-floor"] = {"value": floor, "hlc": floor, "host": "hostb"}
    shard["clock"] = floor
    (home / "hosts" / COPY).write_text(json.dumps(shard))


def test_a_floor_inside_the_bound_hides_nothing_and_is_not_adopted(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    a = open_store(home, "hosta", tmp_path / "a")
    b = open_store(home, "hostb", tmp_path / "b")
    for i in range(3):
        a.put_conversation(f"a{i}", f"conv-a{i}", "agent-1")
        b.put_conversation(f"b{i}", f"conv-b{i}", "agent-1")
    _plant_floor(home, wall_ms() + 23 * 3600 * 1000)

    snap = a.read()
    assert sorted(snap.raw) == ["a0", "a1", "a2", "b0", "b1", "b2"]
    assert any(p.kind == "future-stamp" and "floor" in p.message for p in snap.problems)
    a.put_conversation("new", "conv-new", "agent-1")
    (home / "hosts" / COPY).unlink(missing_ok=True)
    view = json.loads((home / "conversations.json").read_text())
    assert sorted(view) == ["a0", "a1", "a2", "b0", "b1", "b2", "new"]
    assert "tombstone-floor" not in json.loads((home / "hosts" / "hosta.json").read_text())["settings"]
