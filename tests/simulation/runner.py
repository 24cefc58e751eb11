"""What a run explores: the CI part (fixed seed, bounded, a few minutes) and the full run (>= 100,000
interleavings), per scenario. Used by ``tests/simulation/test_simulation.py`` and ``python -m tests.simulation``."""

from __future__ import annotations

from dataclasses import dataclass

from .explore import Case, Tally, exhaustive, randomized
from .scenarios import all_cases

SEED = 20261201


@dataclass(frozen=True)
class Budget:
    bound: int  # preemptions for the exhaustive part of two-actor cases
    random_two: int  # random schedules per two-actor case, on top of the exhaustive ones
    random_many: int  # random schedules per case of three or more actors


CI = Budget(bound=2, random_two=0, random_many=150)
FULL = Budget(bound=2, random_two=1000, random_many=12_000)


def explore_case(case: Case, budget: Budget, seed: int = SEED, stop_after: int | None = None) -> Tally:
    tally = Tally()
    two = len(case.actors(case.world().clone())) == 2
    if two:
        tally.add(exhaustive(case, budget.bound, stop_after))
        if budget.random_two:
            tally.add(randomized(case, seed, budget.random_two, stop_after))
    else:
        tally.add(randomized(case, seed, max(1, int(budget.random_many * case.share)), stop_after))
    return tally


def explore_scenario(scenario: str, budget: Budget, seed: int = SEED, verbose: bool = False,
                     stop_after: int | None = None) -> Tally:
    total = Tally()
    for case in all_cases()[scenario]:
        t = explore_case(case, budget, seed, stop_after)
        if verbose or t.bad:
            print(f"  {case.name}: {t.interleavings} interleavings, {t.bad} bad ({t.seconds:.1f} s)", flush=True)
        total.add(t)
    return total
