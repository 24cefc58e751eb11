"""gc racing writes, copies and another gc, in the deterministic simulation: every schedule of two actors with
one preemption, seeded random schedules for three. What must hold in each: a session idle since before the gc
reads as retired on every host afterwards (no stale version, copy or late sync brings it back), a cursor
written while the gc runs is never lost (World.check: the final cursor is the largest acknowledged), and the
hosts converge."""

from __future__ import annotations

import pytest

from .explore import Case, exhaustive, randomized
from .runner import SEED
from .scenarios import SYNC, TWO
from .world import World

DAY_MS = 86_400_000
OLD_COPY = "session-old.sync-conflict-20261130-090000-CCCCCCC.json"


def _aged(hosts=TWO, replicas=("r1",)) -> World:
    """Two sessions written by h2, then 40 days pass: both idle for longer than 30 days."""
    from subconscious.state.records import SessionState

    w = World(hosts, replicas)
    with w.ctx():
        for sid in ("old", "live"):
            w.stores["h2"].put_conversation(sid, f"conv-{sid}", "agent-h2")
            w.stores["h2"].update_session(sid, lambda cur, sid=sid: SessionState(sid, conversation_id=f"conv-{sid}",
                                                                                   last_processed_index=3))
    if w.engine is not None:
        with w.ctx():
            w.engine.sync_until_stable()
    w.save("old-view", replicas[0], "session-old.json")
    w.fs.start_time += 40 * 86_400
    w.retired = {"old"}
    return w


CASES = [
    Case("gc", "gc / a Stop hook writes another idle session's cursor", _aged,
         lambda w: [("gc", w.gc("h1", 30 * DAY_MS)), ("h2", w.cursor("h2", "live", 7))]),
    Case("gc", "gc / the writer's own host writes the cursor", _aged,
         lambda w: [("gc", w.gc("h2", 30 * DAY_MS)), ("h1", w.cursor("h1", "live", 7))]),
    Case("gc", "gc / an old conflict copy of the retired session appears", _aged,
         lambda w: [("gc", w.gc("h1", 30 * DAY_MS)), ("copy", w.stale_copy("r1", OLD_COPY, w.saved["old-view"]))]),
    Case("gc", "gc / gc on the other host", _aged,
         lambda w: [("gc1", w.gc("h1", 30 * DAY_MS)), ("gc2", w.gc("h2", 0))]),
]
REPLICA_CASE = Case(
    "gc", "replicas: gc on one, a cursor on the other, the engine syncing",
    lambda: _aged(SYNC, ("r1", "r2")),
    lambda w: [("gc", w.gc("h1", 30 * DAY_MS)), ("h2", w.cursor("h2", "live", 7)), ("sync", w.sync_pass(3))])


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_gc_racing_one_other_actor(case):
    tally = exhaustive(case, bound=1, stop_after=3)
    print(f"\n{case.name}: {tally.interleavings} interleavings ({tally.seconds:.1f} s)")
    assert tally.bad == 0, "\n".join(f.describe() for f in tally.failures)
    assert tally.interleavings > 50


def test_gc_on_one_replica_while_the_other_writes_and_syncs():
    tally = randomized(REPLICA_CASE, SEED, 60, stop_after=3)
    print(f"\n{REPLICA_CASE.name}: {tally.interleavings} interleavings ({tally.seconds:.1f} s)")
    assert tally.bad == 0, "\n".join(f.describe() for f in tally.failures)
