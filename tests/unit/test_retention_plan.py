"""The gc plan (state/retention.py) as properties: whatever the sessions, entries and this machine's files."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from subconscious.state.clock import Stamp
from subconscious.state.store.retention import DAY_MS, LocalFacts, SessionFacts, in_use, parse_age, plan_gc

NOW = 1_800_000_000_000
stamps = st.builds(Stamp, st.integers(NOW - 90 * DAY_MS, NOW), st.integers(0, 3))
sids = st.sampled_from([f"s{i}" for i in range(8)])
session_facts = st.builds(SessionFacts, st.none() | stamps, st.none(),
                          st.none() | st.integers(NOW - 90 * DAY_MS, NOW), st.none() | st.just("ended, clear"))
local_facts = st.builds(LocalFacts, st.booleans(), st.booleans(), st.booleans(), st.booleans(),
                        st.integers(NOW - 90 * DAY_MS, NOW))


@given(sessions=st.dictionaries(sids, session_facts), entries=st.dictionaries(sids, stamps),
       local=st.dictionaries(sids, local_facts), old_floor=st.none() | stamps,
       age=st.integers(0, 60 * DAY_MS), aside=st.dictionaries(st.text("abc/", min_size=1, max_size=6),
                                                              st.integers(NOW - 90 * DAY_MS, NOW)))
def test_the_plan_retires_exactly_what_is_idle_and_not_in_use(sessions, entries, local, old_floor, age, aside):
    old = old_floor or Stamp(0, 0)
    plan = plan_gc(now_ms=NOW, age_ms=age, old_floor=old, sessions=sessions, entries=entries, local=local,
                   set_aside=aside)
    assert plan.floor >= old and plan.floor >= Stamp(NOW - age, 0)  # the floor only rises, to now - AGE
    assert not set(plan.retire) & set(plan.keep)
    for sid, facts in sessions.items():
        newest = max([s for s in (facts.stamp, entries.get(sid)) if s is not None]
                     + ([Stamp(facts.unstamped_mtime_ms, 0)] if facts.unstamped_mtime_ms is not None else []),
                     default=Stamp(0, 0))
        live = facts.stamp is not None or facts.unstamped_mtime_ms is not None
        if sid in plan.retire:  # idle: nothing newer than the floor, and no process here on it
            assert newest < plan.floor and (in_use(local.get(sid), NOW, facts.ended is not None) is None or not live)
        if live and (in_use(local.get(sid), NOW, facts.ended is not None) is not None or newest >= plan.floor):
            assert sid not in plan.retire  # in use or active since the floor: never retired...
            if (facts.stamp or Stamp(0, 0)) < plan.floor:
                assert sid in plan.touch  # ...and re-stamped so that the new floor does not cut its files
        if live and newest < plan.floor and in_use(local.get(sid), NOW, facts.ended is not None) is None:
            assert sid in plan.retire  # every idle session goes
    assert set(plan.touch) <= set(plan.keep)
    assert set(plan.entries) == {s for s in plan.retire if s in entries}
    assert not set(plan.local) & set(plan.keep) and all(in_use(local[s], NOW, s in sessions and sessions[s].ended is not None) is None for s in plan.local)
    assert set(plan.prune) == {p for p, w in aside.items() if w < NOW - age}


@given(st.integers(0, 999_999), st.sampled_from("smhdw"))
def test_ages_parse_and_nonsense_is_refused(n, unit):
    assert parse_age(f"{n}{unit}") == n * {"s": 1000, "m": 60_000, "h": 3_600_000, "d": DAY_MS, "w": 7 * DAY_MS}[unit]
    for bad in ("", "30", "d", "-1d", "1.5d", "30 days", "1y"):
        try:
            parse_age(bad)
        except ValueError as exc:
            assert "30d" in str(exc)
        else:
            raise AssertionError(bad)


other_facts = st.builds(SessionFacts, st.none() | stamps, st.none(), st.none(), st.none() | st.just("ended, clear"),
                        st.sampled_from(["me", "laptop", "desktop"]))


@given(sessions=st.dictionaries(sids, other_facts), age=st.integers(0, 60 * DAY_MS),
       ahead=st.integers(0, 60 * DAY_MS), others=st.none() | st.integers(NOW - 90 * DAY_MS, NOW))
def test_a_clock_ahead_never_retires_what_other_machines_wrote_within_the_age_or_in_use(sessions, age, ahead, others):
    """This machine's clock runs ``ahead`` of the others': ages count from the others' newest write (when
    that is earlier), so nothing they wrote within AGE before it, and nothing any other host wrote within
    the last 10 minutes before it, is retired."""
    from subconscious.state.store.retention import IN_USE_MS

    plan = plan_gc(now_ms=NOW + ahead, age_ms=age, old_floor=Stamp(0, 0), sessions=sessions, entries={}, local={},
                   set_aside={}, others_ms=others, host="me")
    ref = NOW + ahead if others is None else min(NOW + ahead, others)
    assert plan.reference_ms == ref and plan.floor == Stamp(max(ref - age, 0), 0)
    for sid, facts in sessions.items():
        if facts.stamp is None:
            continue
        if facts.stamp.wall >= ref - age:
            assert sid not in plan.retire
        if facts.host != "me" and ref - facts.stamp.wall < IN_USE_MS:
            assert sid not in plan.retire and (facts.stamp >= plan.floor or sid in plan.touch)
