"""The fetch TTL's compare-and-set holds when parallel hooks get its lock in another order than they read
the clock: each reads the time, then waits for the lock. Under load (a full-suite run) two of five parallel
PreToolUse hooks fetched: the one that read the clock first got the lock after the one that fetched, saw a
fetch time 'in the future' and took the TTL again."""

from __future__ import annotations

from subconscious.local import claims

TTL = 30_000


def test_a_hook_that_read_the_clock_before_the_fetch_does_not_fetch_again(tmp_path):
    assert claims.take_fetch(tmp_path, "s1", TTL, 1_000_000)
    assert not claims.take_fetch(tmp_path, "s1", TTL, 999_990)  # read the clock 10 ms earlier, locked later
    assert not claims.take_fetch(tmp_path, "s1", TTL, 1_000_000 + TTL - 1)


def test_the_ttl_still_runs_out_and_a_clock_that_went_back_takes_it_again(tmp_path):
    assert claims.take_fetch(tmp_path, "s1", TTL, 1_000_000)
    assert claims.take_fetch(tmp_path, "s1", TTL, 1_000_000 + TTL)  # the TTL ran out
    assert claims.take_fetch(tmp_path, "s1", TTL, 1_000_000 - TTL)  # the clock went back a whole TTL
    assert claims.take_fetch(tmp_path, "s1", 0, 1_000_000 - TTL)  # no TTL: every hook fetches
