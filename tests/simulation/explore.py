"""Exploring schedules of a case: exhaustive with bounded preemptions for two actors, seeded random walks
for three or more. Every run starts from the same set-up world (cloned), so runs are independent and
replayable from their plan or trace."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Callable

from .sched import INF, Plan, RandomWalk, Replay
from .world import World


@dataclass
class Case:
    scenario: str  # the group a case counts towards (hosts, upstream, sync, deletes, mixed)
    name: str
    build: Callable[[], World]  # the world after set-up (serial operations)
    actors: Callable[[World], list[tuple[str, Callable[[], None]]]]
    share: float = 1.0  # of a budget's random schedules (cases of many long operations take fewer)

    def world(self) -> World:
        from . import world as world_module

        w = self.build()
        return world_module.to_legacy(w) if world_module.LEGACY_START["on"] else w


@dataclass
class Failure:
    case: str
    policy: str
    verdict: str
    schedule: list[tuple[str, str]]
    trace: list[int]

    def describe(self, context: int = 60) -> str:
        steps = "\n".join(f"    {i:4d} {who:10s} {op}" for i, (who, op) in enumerate(self.schedule[:context]))
        more = f"\n    ... {len(self.schedule) - context} more steps" if len(self.schedule) > context else ""
        return f"{self.case} [{self.policy}]: {self.verdict}\n{steps}{more}"


@dataclass
class Tally:
    interleavings: int = 0
    lost: int = 0
    resurrected: int = 0
    regressions: int = 0
    diverged: int = 0
    errors: int = 0
    failures: list[Failure] = field(default_factory=list)
    seconds: float = 0.0
    keep: int = 3  # failures kept for the report

    def add(self, other: "Tally") -> None:
        for f in ("interleavings", "lost", "resurrected", "regressions", "diverged", "errors", "seconds"):
            setattr(self, f, getattr(self, f) + getattr(other, f))
        self.failures += other.failures[: max(0, self.keep - len(self.failures))]

    @property
    def bad(self) -> int:
        return self.lost + self.resurrected + self.regressions + self.diverged + self.errors

    def line(self, scenario: str) -> str:
        return (f"simulation {scenario}: {self.interleavings} interleavings, {self.lost} lost, {self.resurrected} resurrected, "
                f"cursor regressions {self.regressions}, diverged {self.diverged}, errors {self.errors} ({self.seconds:.1f} s)")


def _run(case: Case, base: World, policy, tally: Tally, label: str) -> Plan | None:
    w = base.clone()
    for name, fn in case.actors(w):
        w.spawn(name, fn)
    v = w.run(policy)
    tally.interleavings += 1
    if not v.ok:
        tally.lost += bool(v.lost)
        tally.resurrected += bool(v.resurrected)
        tally.regressions += bool(v.regressions)
        tally.diverged += bool(v.diverged)
        tally.errors += bool(v.errors)
        if len(tally.failures) < tally.keep:
            tally.failures.append(Failure(case.name, label, v.summary(), list(w.sched.labels), list(w.sched.trace)))
    return policy


def exhaustive(case: Case, bound: int = 2, stop_after: int | None = None) -> Tally:
    """Every schedule of two actors with at most ``bound`` (1 or 2) preemptions: actor X runs i steps,
    Y runs (to completion, or j steps and X finishes, then Y), for every i and j, both ways round."""
    t0 = time.monotonic()
    tally = Tally()
    base = case.world()
    n = len(case.actors(base.clone()))
    assert n == 2, f"{case.name}: exhaustive exploration is for two actors, got {n}"
    for x in (0, 1):
        y = 1 - x
        _run(case, base, Plan([(x, INF), (y, INF)]), tally, f"serial {x}{y}")
        i = 1
        while True:
            p = _run(case, base, Plan([(x, i), (y, INF), (x, INF)]), tally, f"plan ({x},{i}) ({y},*) ({x},*)")
            if p.taken[0] < i:  # X had finished: this was the serial schedule again
                tally.interleavings -= 1
                break
            if bound >= 2:
                for j in range(1, p.taken[1]):
                    _run(case, base, Plan([(x, i), (y, j), (x, INF), (y, INF)]), tally,
                         f"plan ({x},{i}) ({y},{j}) ({x},*) ({y},*)")
            if stop_after and tally.bad >= stop_after:
                break
            i += 1
    tally.seconds = time.monotonic() - t0
    return tally


def randomized(case: Case, seed: int, runs: int, stop_after: int | None = None) -> Tally:
    """``runs`` random walks (switch probability drawn per run), seeded: run k uses seed ``seed*1_000_003+k``."""
    t0 = time.monotonic()
    tally = Tally()
    base = case.world()
    rng = random.Random(seed)
    for k in range(runs):
        s = seed * 1_000_003 + k
        p = rng.choice((0.05, 0.15, 0.3, 0.6))
        _run(case, base, RandomWalk(s, p), tally, f"random seed {s} p={p}")
        if stop_after and tally.bad >= stop_after:
            break
    tally.seconds = time.monotonic() - t0
    return tally


def replay(case: Case, trace: list[int]):
    base = case.world()
    w = base.clone()
    for name, fn in case.actors(w):
        w.spawn(name, fn)
    return w, w.run(Replay(trace))
