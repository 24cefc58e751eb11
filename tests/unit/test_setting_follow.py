"""Red team of issue 24's follow limit: a setting (the pinned agent, the key policy) is last-writer-wins like
an entry, and since the clock no longer follows a stamp beyond now + FOLLOW_MS, a correct host's put_setting
after a host two hours ahead wrote the same setting lost to it, on every host (it was not even kept in the
writer's own shard). A setting's replaced versions are recorded as ahead like entries' are. Real files in tmp
dirs, through the Store API."""

from __future__ import annotations

import sys
from pathlib import Path
from tests.harness.sizes import examples

sys.path.insert(0, str(Path(__file__).parent))
from test_clock_follow import Clock, make  # noqa: E402

HOUR = 3600_000


def test_a_setting_put_after_a_host_hours_ahead_wrote_it_is_what_every_host_reads(tmp_path):
    clock = Clock()
    ahead = make(tmp_path, "zahead", clock.of(2 * HOUR))
    ahead2 = make(tmp_path, "zahead2", clock.of(HOUR))
    right = make(tmp_path, "right", clock.of(0))
    behind = make(tmp_path, "behind", clock.of(-60_000))
    ahead.put_setting("agentPin", "agent-ahead")
    clock.real += 1_000
    ahead2.put_setting("agentPin", "agent-ahead2")  # later in real time, stamped before ahead's
    clock.real += 1_000
    right.put_setting("agentPin", "agent-right")  # acknowledged, after reading both
    for store in (right, ahead, ahead2, behind):
        assert store.setting("agentPin") == "agent-right", store.host
    assert any(p.kind == "future-stamp" for p in right.read().problems)  # the demoted versions are reported
    clock.real += 1_000
    behind.put_conversation("s1", "c1", "a")  # another write keeps it
    for store in (right, ahead, ahead2, behind):
        assert store.setting("agentPin") == "agent-right", store.host
    clock.real += 1_000
    ahead.put_setting("agentPin", "agent-ahead-again")  # the host ahead's later write wins again
    for store in (right, ahead, ahead2, behind):
        assert store.setting("agentPin") == "agent-ahead-again", store.host


from hypothesis import assume, given, settings, strategies as st  # noqa: E402

from subconscious.state.clock import ALLOWED_SKEW_MS, FOLLOW_MS  # noqa: E402

from test_clock_follow import SKEWS  # noqa: E402


@settings(max_examples=examples(30), deadline=None)
@given(st.lists(SKEWS, min_size=2, max_size=4),
       st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["agentPin", "keyPolicy"]), st.integers(1, 120_000)),
                min_size=1, max_size=8))
def test_the_last_setting_written_in_real_time_is_what_every_host_reads(tmp_path_factory, skews, ops):
    assume(max(skews) - min(skews) < ALLOWED_SKEW_MS - FOLLOW_MS)
    tmp = tmp_path_factory.mktemp("hosts")
    clock = Clock()
    stores = [make(tmp, f"h{i}", clock.of(skew)) for i, skew in enumerate(skews)]
    last: dict[str, str] = {}
    for n, (who, key, step) in enumerate(ops):
        clock.real += step
        stores[who % len(stores)].put_setting(key, f"v{n}")
        last[key] = f"v{n}"
    for store in stores:
        assert {k: store.setting(k) for k in last} == last, (store.host, skews)
