"""Issue 24, red team round 2, item 1: the clock follows other hosts' stamps only up to this machine's
clock + FOLLOW_MS (a few minutes), far less than a reader accepts (+ 24 h). A host whose clock is a day
ahead no longer drags correct hosts' clocks with it (their writes would then be beyond the bound of a host
a minute behind, and ordered as the oldest there): a write made after reading a version stamped beyond the
follow limit records that version as *ahead* in the writer's shard, and every reader orders a recorded
version as the oldest of its key. Real files in tmp dirs, through the Store API."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import assume, given, settings, strategies as st

from subconscious.state.clock import ALLOWED_SKEW_MS, FOLLOW_MS, Stamp
from subconscious.state.store.core import Store
from tests.harness.sizes import examples

T0 = 1_800_000_000_000  # a fixed "real" time; each host's clock is T0 + its skew + the steps taken


class Clock:
    def __init__(self) -> None:
        self.real = T0

    def of(self, skew_ms: int):
        return lambda: self.real + skew_ms


def make(tmp: Path, host: str, now) -> Store:
    return Store(tmp / "lh" / ".letta" / "claude", host, tmp / f"local-{host}" / "locks",
                 tmp / f"local-{host}" / "clocks", now=now)


def live(store: Store) -> dict[str, str]:
    return {k: c.conversation_id for k, c in store.read().live.items()}


def test_a_host_a_day_ahead_does_not_make_a_correct_hosts_delete_and_update_lose_on_a_host_behind(tmp_path):
    clock = Clock()
    ahead = make(tmp_path, "zahead", clock.of(ALLOWED_SKEW_MS - 1_000))  # 23:59:59 ahead: inside the bound
    right = make(tmp_path, "right", clock.of(0))
    behind = make(tmp_path, "behind", clock.of(-60_000))  # a minute behind
    ahead.put_conversation("s-del", "conv-ahead-1", "agent-a")
    ahead.put_conversation("s-upd", "conv-ahead-2", "agent-a")
    clock.real += 1_000
    right.delete_conversation("s-del")  # acknowledged, after reading ahead's put ...
    right.put_conversation("s-upd", "conv-right", "agent-a")
    for store in (right, behind, ahead):  # ... so it is the newest version everywhere
        assert live(store) == {"s-upd": "conv-right"}, store.host
    behind.put_conversation("s-new", "conv-behind", "agent-a")  # a write on the host behind keeps them
    for store in (right, behind, ahead):
        assert live(store) == {"s-upd": "conv-right", "s-new": "conv-behind"}, store.host
    stamp = right.conversation("s-upd").stamp
    assert stamp.wall <= clock.real + FOLLOW_MS  # the correct host's clock stayed near its wall clock


def test_within_the_follow_limit_the_clock_follows_as_before(tmp_path):
    clock = Clock()
    ahead = make(tmp_path, "zahead", clock.of(FOLLOW_MS // 2))
    right = make(tmp_path, "right", clock.of(0))
    ahead.put_conversation("k", "conv-ahead", "agent-a")
    right.put_conversation("k", "conv-right", "agent-a")
    assert live(ahead) == live(right) == {"k": "conv-right"}
    assert "ahead" not in json.loads(right.shard_path().read_text())  # nothing recorded


# clocks up to a day apart, less the follow limit: hosts further apart than the bound order each other's
# writes as the oldest (a broken clock: see the test above for the host a day ahead)
SKEWS = st.sampled_from([0, -60_000, 30_000, FOLLOW_MS + 1, 3_600_000, ALLOWED_SKEW_MS - FOLLOW_MS - 61_000,
                         -ALLOWED_SKEW_MS // 2])


def skewed_writes(tmp: Path, skews: list[int], ops) -> tuple[Clock, list[Store], dict[str, str | None]]:
    """Hosts with clocks ``skews`` apart on one shared directory run ``ops`` (who, key, delete?, ms after
    the last): the stores, the shared clock, and the last write of each key in real time (None: deleted)."""
    clock = Clock()
    stores = [make(tmp, f"h{i}", clock.of(skew)) for i, skew in enumerate(skews)]
    last: dict[str, str | None] = {}
    for n, (who, key, delete, step) in enumerate(ops):
        clock.real += step
        store = stores[who % len(stores)]
        if delete:
            store.delete_conversation(key)
            last[key] = None
        else:
            store.put_conversation(key, f"conv-{n}", "agent-a")
            last[key] = f"conv-{n}"
    return clock, stores, last


@settings(max_examples=examples(40), deadline=None)
@given(st.lists(SKEWS, min_size=2, max_size=4),
       st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["k1", "k2"]), st.booleans(),
                          st.integers(1, 120_000)), min_size=1, max_size=10))
def test_a_write_made_after_another_is_never_ordered_before_it(tmp_path_factory, skews, ops):
    """Hosts with skewed clocks share one directory, so each write has read every earlier one: the last
    acknowledged write of each key (in real time) is what every host reads, whatever the clocks say."""
    assume(max(skews) - min(skews) < ALLOWED_SKEW_MS - FOLLOW_MS)
    _, stores, last = skewed_writes(tmp_path_factory.mktemp("hosts"), skews, ops)
    want = {k: v for k, v in last.items() if v is not None}
    for store in stores:
        assert live(store) == want, (store.host, skews)
