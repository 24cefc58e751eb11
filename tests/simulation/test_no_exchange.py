"""The store on a file system that cannot swap two names (NFS, SMB, Windows: ``exchange`` answers False,
hard links work), CI's fixed-seed part of ``python -m tests.simulation --no-exchange``: every schedule of
two actors with up to two preemptions for the cases where hosts share one view, seeded random schedules
for six hosts' Stop hooks. Nothing may raise (publish's fallback raised FileNotFoundError out of
``put_conversation``/``update_session`` when another host had already merged and settled its temp), and
every oracle of the simulation holds — the view oracles included (``World.check``)."""

from __future__ import annotations

import pytest

from .explore import exhaustive, randomized
from .runner import SEED
from .scenarios import hosts_cases, mixed_cases, upstream_cases

NAMES = {"put/put same key", "delete/put same key", "cursor 25 / cursor 24 (Stop hooks of two hosts)",
         "upstream new key / our put", "upstream worker cursor / our Stop hook"}
CASES = [c for c in hosts_cases() + upstream_cases() if c.name in NAMES]
SIX = [c for c in mixed_cases() if c.name.startswith("six hosts")]


def _no_exchange(case):
    build = case.build

    def built():
        w = build()
        w.fs.exchange_ok = False
        return w

    return type(case)(case.scenario, case.name, built, case.actors, case.share)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_no_exchange_two_actors(case):
    tally = exhaustive(_no_exchange(case), bound=2, stop_after=3)
    print(f"\nno exchange, {case.name}: {tally.line(case.name)}")
    assert tally.bad == 0, "\n".join(f.describe() for f in tally.failures)
    assert tally.interleavings > 50


def test_no_exchange_six_hosts_stop_hooks():
    tally = randomized(_no_exchange(SIX[0]), SEED, 60, stop_after=3)
    print(f"\nno exchange, six hosts: {tally.line('six hosts')}")
    assert tally.bad == 0, "\n".join(f.describe() for f in tally.failures)
