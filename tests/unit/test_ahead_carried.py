"""Red team of issue 24's ahead records: a record lives in one host's shard, but the version it names may
live on in another's (the host far ahead that wrote it and never wrote that key again). When the recording
shard goes (a host retired with ``doctor --fix``, a conflict copy filed into backups/), the record must go
on in the files of the host that adopts the shard's content; else the named version, stamped hours ahead,
wins again: the acknowledged delete is undone and the acknowledged update lost. Real files in tmp dirs,
through the Store API."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from tests.harness.sizes import examples

sys.path.insert(0, str(Path(__file__).parent))
from test_clock_follow import Clock, live, make  # noqa: E402

TWO_HOURS = 2 * 3600_000  # inside the 24 h bound, beyond the follow limit


def _scene(tmp_path):
    clock = Clock()
    ahead = make(tmp_path, "zahead", clock.of(TWO_HOURS))
    right = make(tmp_path, "right", clock.of(0))
    other = make(tmp_path, "other", clock.of(0))
    ahead.put_conversation("s-del", "conv-ahead-1", "agent-a")
    ahead.put_conversation("s-upd", "conv-ahead-2", "agent-a")
    clock.real += 1_000
    before = right.shard_path().read_bytes() if right.shard_path().exists() else None
    right.delete_conversation("s-del")  # acknowledged, after reading ahead's put
    right.put_conversation("s-upd", "conv-right", "agent-a")
    assert "ahead" in json.loads(right.shard_path().read_text())
    for store in (right, other, ahead):
        assert live(store) == {"s-upd": "conv-right"}, store.host
    clock.real += 1_000
    return clock, ahead, right, other, before


def test_retiring_the_host_that_recorded_a_version_as_ahead_keeps_its_delete_and_update(tmp_path):
    _, ahead, right, other, _ = _scene(tmp_path)
    other.retire_host("right")  # the machine is gone: its shard goes to backups/
    assert not right.shard_path().exists()
    for store in (other, ahead):
        assert live(store) == {"s-upd": "conv-right"}, store.host


def test_a_conflict_copy_holding_the_record_is_filed_away_and_the_delete_stays(tmp_path):
    _, ahead, right, other, _ = _scene(tmp_path)
    shard = right.shard_path()
    # a sync engine kept right's newest shard as a conflict copy, and the shard itself as a version
    # without those writes (no ahead record)
    copy = shard.with_name("right.sync-conflict-20261130-063049-ABCDEFG.json")
    copy.write_bytes(shard.read_bytes())
    value = json.loads(shard.read_text())
    value.pop("ahead")
    value["conversations"] = {}
    shard.write_text(json.dumps(value))
    other.put_conversation("s-other", "conv-other", "agent-a")  # merges the copy, files it into backups/
    assert not copy.exists()
    for store in (other, ahead, right):
        assert live(store) == {"s-upd": "conv-right", "s-other": "conv-other"}, store.host


def test_a_crafted_copys_ahead_record_for_keys_nobody_holds_is_not_carried(tmp_path):
    clock, ahead, right, other, _ = _scene(tmp_path)
    copy = other.shard_path().with_name("evil.sync-conflict-20261130-063049-ABCDEFG.json")
    value = json.loads(right.shard_path().read_text())
    value["host"] = "evil"
    value["ahead"] = {f"k{i}": ["1800000000000:0@nobody"] for i in range(5_000)}
    copy.write_text(json.dumps(value))
    other.put_conversation("s-other", "conv-other", "agent-a")
    assert not copy.exists()  # merged and filed away
    assert not set(json.loads(other.shard_path().read_text()).get("ahead", {})) & {f"k{i}" for i in range(5_000)}
    assert live(other) == {"s-upd": "conv-right", "s-other": "conv-other"}


from hypothesis import assume, given, settings, strategies as st  # noqa: E402

from subconscious.state.clock import ALLOWED_SKEW_MS, FOLLOW_MS  # noqa: E402

from test_clock_follow import SKEWS, skewed_writes  # noqa: E402


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(SKEWS, min_size=3, max_size=4),
       st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["k1", "k2"]), st.sampled_from(["put", "del"]),
                          st.integers(1, 120_000)), min_size=1, max_size=8),
       st.integers(0, 3), st.integers(0, 3))
def test_retiring_any_host_keeps_the_last_write_of_each_key(tmp_path_factory, skews, ops, gone, by):
    """Hosts with skewed clocks write, then one host retires another (its machine is gone): every host
    left reads the last acknowledged write of each key (in real time)."""
    assume(max(skews) - min(skews) < ALLOWED_SKEW_MS - FOLLOW_MS)
    gone, by = gone % len(skews), by % len(skews)
    assume(gone != by)
    clock, stores, last = skewed_writes(tmp_path_factory.mktemp("hosts"), skews,
                                        [(who, key, op == "del", step) for who, key, op, step in ops])
    clock.real += 1_000
    stores[by].retire_host(f"h{gone}")
    want = {k: v for k, v in last.items() if v is not None}
    for i, store in enumerate(stores):
        if i != gone:
            assert live(store) == want, (store.host, skews, gone)


def test_a_record_goes_once_this_hosts_clock_passes_what_it_names(tmp_path):
    """The record only grew (every key ever written over a clock that ran ahead, for good). An entry
    whose named version is stamped before the version this host's shard holds for the key decides
    nothing: once real time passes it, the next write of the key drops it, and the order stays."""
    clock = Clock()
    ahead = make(tmp_path, "zahead", clock.of(TWO_HOURS))
    right = make(tmp_path, "right", clock.of(0))
    ahead.put_conversation("k", "conv-ahead", "agent-a")
    ahead.put_conversation("kept", "conv-ahead-kept", "agent-a")
    clock.real += 1_000
    right.put_conversation("k", "conv-right-1", "agent-a")
    right.put_conversation("kept", "conv-right-kept", "agent-a")
    assert set(json.loads(right.shard_path().read_text())["ahead"]) == {"k", "kept"}
    clock.real += 3 * 3600_000  # past the named stamps
    right.put_conversation("k", "conv-right-2", "agent-a")
    assert set(json.loads(right.shard_path().read_text()).get("ahead", {})) == {"kept"}
    for store in (right, ahead):
        assert live(store) == {"k": "conv-right-2", "kept": "conv-right-kept"}, store.host
