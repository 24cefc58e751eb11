"""Red team of the ahead record's pruning (bounds.outgrown): an entry goes once the version this host's
shard holds for its key is stamped after the one named. At the edge, a held version stamped *equal* to
the named one does not beat it by plain order: equal stamps are ordered by host, and a named version from
a host that sorts after the held one's wins the tie. Two machines with the same skew (a wrong time zone
setting on both) writing one key in the same millisecond, one of them synced late, give such stamps.
Real files in tmp dirs, through the Store API."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from test_clock_follow import Clock, live, make  # noqa: E402

from subconscious.state.store.core import Store

TWO_HOURS = 2 * 3600_000  # inside the 24 h bound, beyond the follow limit


def test_a_write_of_another_key_does_not_bring_back_a_version_a_write_replaced(tmp_path):
    clock = Clock()
    zb = make(tmp_path, "zb", clock.of(TWO_HOURS))
    right = make(tmp_path, "right", clock.of(0))
    away = tmp_path / "away"  # another machine, two hours ahead as well, whose files arrive late
    za = Store(away / ".letta" / "claude", "za", away / "locks", away / "clocks", now=clock.of(TWO_HOURS))
    zb.put_conversation("k", "conv-replaced", "agent-a")
    za.put_conversation("k", "conv-concurrent", "agent-a")  # the same millisecond: the same stamp
    assert zb.conversation("k").stamp == za.conversation("k").stamp
    clock.real += 1_000
    right.put_conversation("k", "conv-right", "agent-a")  # acknowledged, after reading zb's version
    shutil.copy(za.shard_path(), right.shard_path().with_name("za.json"))  # za's shard arrives
    before = live(right)
    assert before["k"] == "conv-concurrent"  # a write right never saw: it may win over right's
    clock.real += 1_000
    right.put_conversation("j", "conv-j", "agent-a")  # a write of another key
    for store in (right, zb):
        assert live(store) == {**before, "j": "conv-j"}, (store.host, json.loads(right.shard_path().read_text()).get("ahead"))
