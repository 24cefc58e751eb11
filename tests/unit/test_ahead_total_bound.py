"""Red team, issue 37: "five planted shards of 60 MiB with forged ahead records make a SessionStart take
8.4 s and 1.3 GB (nothing bounds the total)". Every shard's parsed ``ahead`` record was kept for the whole
read (memory grew with the sum of every planted file), the record in this host's own shard was parsed entry
by entry on every read and written back whole by every write, and a git merge parsed, sorted and kept a
forged record whole. Now what the ahead records of one read keep is bounded in total
(``bounds.AHEAD_TOTAL_MAX``: the largest records are left out first, each reported), and a record larger
than ``bounds.AHEAD_WHOLE_MAX`` is carried on by a writer or a merge only for keys the home holds.

Asserted by the work done and what is kept (entries parsed, records kept, files written), never by time;
the bound is lowered for the planted-total case so the files stay small. Real files in tmp dirs, through
the Store API (and the merge driver's shard merge)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from test_clock_follow import Clock, live, make  # noqa: E402

from subconscious.state import bounds  # noqa: E402
from subconscious.state.recordmerge import merge_shards  # noqa: E402

TWO_HOURS = 2 * 3600_000  # inside the 24 h bound, beyond the follow limit: replaced versions are recorded


def _scene(tmp_path):
    """zahead (two hours ahead) writes two keys and a setting; right, after reading them, deletes one,
    updates the other and sets the setting: right's shard holds an honest ahead record naming zahead's
    versions, and every reader shows right's writes."""
    clock = Clock()
    ahead = make(tmp_path, "zahead", clock.of(TWO_HOURS))
    right = make(tmp_path, "right", clock.of(0))
    other = make(tmp_path, "other", clock.of(0))
    ahead.put_conversation("s-del", "conv-ahead-1", "agent-a")
    ahead.put_conversation("s-upd", "conv-ahead-2", "agent-a")
    ahead.put_setting("pin", "agent-ahead")
    clock.real += 1_000
    right.delete_conversation("s-del")
    right.put_conversation("s-upd", "conv-right", "agent-a")
    right.put_setting("pin", "agent-right")
    other.put_conversation("s-other", "conv-other", "agent-a")
    record = json.loads(right.shard_path().read_text())["ahead"]
    assert set(record) == {"s-del", "s-upd", bounds.SETTING_AHEAD + "pin"}, record
    for store in (right, other, ahead):
        assert live(store) == {"s-upd": "conv-right", "s-other": "conv-other"}, store.host
        assert store.setting("pin") == "agent-right", store.host
    return clock, ahead, right, other


def _forged(prefix: str, keys: int) -> dict[str, list[str]]:
    """A record naming ``keys`` keys nobody holds, 16 versions each (what the red team planted)."""
    return {f"{prefix}{i:05d}": [f"1800000000000:{j}@nobody" for j in range(16)] for i in range(keys)}


def _plant(store, host: str, ahead: dict) -> Path:
    path = store.shard_path().with_name(f"{host}.json")
    path.write_text(json.dumps({"format": 1, "host": host, "name": host, "clock": "1:0", "written": 0,
                                "conversations": {}, "settings": {}, "ahead": ahead}))
    return path


def _not_used(snap) -> set[str]:
    return {Path(p.path).name for p in snap.problems if p.kind == "future-stamp" and "not used" in p.message}


def test_planted_records_beyond_the_total_are_left_out_largest_first_and_reported(tmp_path, monkeypatch):
    # before: no bound existed (this raises AttributeError), every planted record was kept whole
    monkeypatch.setattr(bounds, "AHEAD_TOTAL_MAX", 5_000)
    _, ahead, right, other = _scene(tmp_path)
    # five planted shards of ~2,000 each (9,900 in all); right's honest record costs a few
    planted = [_plant(other, f"evil{n}", _forged(f"k{n}-", 100)) for n in range(5)]
    got = other._read()
    assert got.ahead.total <= 5_000, got.ahead.total
    kept = {Path(r[2]).name for r in got.ahead.kept.values()}
    assert "right.json" in kept  # the honest record is used: smaller than every planted one
    assert {"evil0.json", "evil1.json"} <= kept
    refused = {Path(where).name for where, _, _ in got.ahead.refused}
    assert refused == {"evil2.json", "evil3.json", "evil4.json"}, refused  # the last of equal size first
    assert _not_used(got.snap) == refused  # each one reported (doctor shows it: a future-stamp warning)
    # nothing acknowledged is lost or undone: right's delete, update and setting stand on every host
    for store in (right, other, ahead):
        assert live(store) == {"s-upd": "conv-right", "s-other": "conv-other"}, store.host
        assert store.setting("pin") == "agent-right", store.host
    # a planted record larger than the whole bound alone is not even copied
    planted.append(_plant(other, "evil9", _forged("big-", 400)))
    got = other._read()
    assert ("evil9.json" in {Path(w).name for w, _, _ in got.ahead.refused}
            and "evil9.json" not in {Path(r[2]).name for r in got.ahead.kept.values()})
    assert got.ahead.total <= 5_000


def test_a_record_planted_in_this_hosts_shard_is_parsed_and_carried_on_only_for_keys_the_home_holds(
        tmp_path, monkeypatch):
    _, ahead, right, other = _scene(tmp_path)
    path = right.shard_path()
    shard = json.loads(path.read_text())
    honest = dict(shard["ahead"])
    shard["ahead"].update(_forged("k", 5_000))  # ~95,000: over AHEAD_WHOLE_MAX, within the total
    path.write_text(json.dumps(shard))
    parsed = []
    real = bounds._entries

    def counting(entries):
        parsed.append(1)
        return real(entries)

    monkeypatch.setattr(bounds, "_entries", counting)
    right.put_conversation("s-new", "conv-new", "agent-a")
    # before: 5,003 keys parsed entry by entry on each read of the write (the record whole), and kept
    assert len(parsed) < 100, len(parsed)
    assert json.loads(path.read_text())["ahead"] == honest  # the keys the home holds, and only those
    monkeypatch.undo()
    for store in (right, other, ahead):
        assert live(store) == {"s-upd": "conv-right", "s-other": "conv-other", "s-new": "conv-new"}, store.host
        assert store.setting("pin") == "agent-right", store.host


def test_a_git_merge_joins_a_planted_record_only_for_keys_the_shard_holds(tmp_path):
    _, _, right, _ = _scene(tmp_path)
    ours = json.loads(right.shard_path().read_text())
    theirs = json.loads(json.dumps(ours))
    theirs["ahead"].update(_forged("k", 5_000))  # over AHEAD_WHOLE_MAX
    theirs["ahead"]["s-upd"].append("1800000000000:7@zahead")  # one more version of a key the shard holds
    merged = merge_shards(ours, ours, theirs, "right")
    # before: the 5,000 forged keys were parsed, sorted and kept in the merged shard
    assert set(merged["ahead"]) == set(ours["ahead"]), len(merged["ahead"])
    assert "1800000000000:7@zahead" in merged["ahead"]["s-upd"]  # both sides' entries of a held key stay


def _views(stores) -> list:
    out = []
    for store in stores:
        snap = store.read()
        out.append((snap.raw, {k: s.to_json() for k, s in snap.settings.items()},
                    sorted((p.kind, p.path, p.message) for p in snap.problems)))
    return out


def test_a_home_with_honest_ahead_records_under_the_bound_reads_and_writes_as_before(tmp_path, monkeypatch):
    _, ahead, right, other = _scene(tmp_path)
    # right's record also names a key no file holds any more (deleted and pruned long ago): a record within
    # AHEAD_WHOLE_MAX is carried on whole, as before
    path = right.shard_path()
    shard = json.loads(path.read_text())
    shard["ahead"]["s-gone"] = ["1800000000000:3@zahead"]
    path.write_text(json.dumps(shard))
    # and ten small records of other hosts (more than the few looked up one by one), one naming other's
    # version of s-other: ordered as the oldest (its only version: still shown) and reported, as before
    held = other.conversation("s-other")
    for n in range(10):
        record = {f"x{n}-{i}": [f"1800000000000:{i}@nobody"] for i in range(3)}
        if n == 6:
            record["s-other"] = [f"{held.stamp.encode()}@other"]
        _plant(other, f"small{n}", record)
    stores = (right, other, ahead)
    bounded = _views(stores)
    monkeypatch.setattr(bounds, "AHEAD_TOTAL_MAX", 10**15, raising=False)  # as if there were no bound
    monkeypatch.setattr(bounds, "AHEAD_WHOLE_MAX", 10**15, raising=False)
    assert _views(stores) == bounded
    monkeypatch.undo()
    for store, (raw, settings, problems) in zip(stores, bounded):
        assert {k: v["conversationId"] for k, v in raw.items() if not v.get("deleted")} == {
            "s-upd": "conv-right", "s-other": "conv-other"}, store.host
        assert settings["pin"]["value"] == "agent-right"
        assert not [p for p in problems if "not used" in p[2]], problems
        assert any(kind == "future-stamp" and "'s-other'" in message for kind, _, message in problems), problems
    right.put_conversation("s-more", "conv-more", "agent-a")
    record = json.loads(path.read_text())["ahead"]
    assert record == shard["ahead"], record  # carried on whole, the key no file holds too
    ours = json.loads(path.read_text())
    theirs = json.loads(json.dumps(ours))
    theirs["ahead"]["s-gone2"] = ["1800000000000:4@zahead"]
    merged = merge_shards(ours, ours, theirs, "right")
    assert merged["ahead"] == {**record, "s-gone2": ["1800000000000:4@zahead"]}  # a merge joins them whole


def test_what_a_record_keeps_is_what_a_reader_looks_at():
    """A kept record (the last 16 strings of each key) reads exactly as the record: malformed parts aside."""
    stamp = "1800000000000:1"
    raw = {
        "long": [f"{stamp}@h{i}" for i in range(40)],  # only the last 16 count
        "mixed": [f"{stamp}@a", 7, None, {"x": [1] * 100}, f"{stamp}@b", [f"{stamp}@c"]],
        "junk-tail": [f"{stamp}@a"] + [0] * 16,  # the last 16 are no entries: nothing counts
        "no-at": ["1800000000000:1", "x@y"],
        "empty": [],
        "not-a-list": {"a": f"{stamp}@a"},
        "text": f"{stamp}@a",
        "ok": [f"{stamp}@a", f"{stamp}@b"],
    }
    kept, cost = bounds.kept_record(raw, 10**6)
    assert bounds.ahead_map(kept) == bounds.ahead_map(raw)
    assert set(kept) <= set(raw) and all(type(e) is str for v in kept.values() for e in v)
    assert bounds.kept_record(raw, cost - 1)[0] is None and bounds.kept_record(raw, cost)[0] == kept
    # a long string costs by its length: a few entries of 1 MB cannot pass for a few entries
    assert bounds.kept_record({"k": ["1:0@" + "h" * 1_000_000]}, 10**6)[1] > 7_000
