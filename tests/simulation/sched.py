"""A deterministic scheduler: actors are greenlets that give control back before every file operation.

An actor calls :meth:`Scheduler.point` (the simulated file system does, before each primitive); the
scheduler then decides which actor performs its next operation. Nothing runs concurrently: a run is a
sequence of *steps* (one actor resumed, performs the operation it stopped before, runs on to its next
point), so a schedule is fully described by which actor takes each step, and replaying it replays the
run exactly.

Policies decide who runs:

- :class:`Plan` — a list of ``(actor, steps)`` segments; the last segments run to completion. This is
  how the exhaustive exploration places one or two preemptions (CHESS-style preemption bounding).
- :class:`RandomWalk` — seeded: at every point switch to a random runnable actor with probability p.

Blocking on the (simulated) per-host lock is not a preemption: a blocked actor is skipped until the
holder releases.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable

import greenlet

INF = 1 << 60


class Deadlock(RuntimeError):
    pass


class StepLimit(RuntimeError):
    pass


@dataclass
class Actor:
    index: int
    name: str
    fn: Callable[[], Any]
    g: greenlet.greenlet | None = None
    done: bool = False
    result: Any = None
    error: BaseException | None = None
    blocked_on: Any = None  # a lock key
    steps: int = 0
    label: str = ""  # the operation it stopped before


class Scheduler:
    def __init__(self, max_steps: int = 200_000):
        self.actors: list[Actor] = []
        self.main: greenlet.greenlet | None = None
        self.step = 0  # global step counter: the simulation's notion of "when"
        self.running: Actor | None = None
        self.trace: list[int] = []  # the actor index of every step (the schedule, replayable)
        self.labels: list[tuple[str, str]] = []  # (actor, the operation it performed) of every step
        self.max_steps = max_steps
        self.locks: dict[Any, tuple[Actor, int]] = {}  # key -> (holder, depth)
        self.observers: list[Callable[[], None]] = []  # called after every step (the view oracles look)

    # ------------------------------------------------------------------ inside actors

    def active(self) -> bool:
        return self.running is not None and greenlet.getcurrent() is self.running.g

    def _me(self) -> Actor | None:
        """The actor calling, or None outside a scheduled run (setup, the final checks: no preemption)."""
        actor = self.running
        return actor if actor is not None and greenlet.getcurrent() is actor.g else None

    def point(self, label: str = "") -> None:
        """Called before every primitive: give the scheduler the choice of who goes next."""
        actor = self._me()
        if actor is not None:
            actor.label = label
            self.main.switch()

    def acquire(self, key: Any) -> None:
        actor = self._me()
        if actor is None:
            return
        while True:
            held = self.locks.get(key)
            if held is None:
                self.locks[key] = (actor, 1)
                return
            if held[0] is actor:
                self.locks[key] = (actor, held[1] + 1)
                return
            actor.blocked_on = key
            self.main.switch()

    def wait_on(self, key: Any) -> None:
        """Block the calling actor until :meth:`wake` with ``key`` (or until nobody else can run: a wait
        with a timeout that elapsed). Not a preemption, like blocking on a lock."""
        actor = self._me()
        if actor is None:
            return
        actor.blocked_on = ("wait", key)
        self.main.switch()

    def wake(self, key: Any) -> None:
        for other in self.actors:
            if other.blocked_on == ("wait", key):
                other.blocked_on = None

    def release(self, key: Any) -> None:
        actor = self._me()
        if actor is None:
            return
        holder, depth = self.locks[key]
        assert holder is actor
        if depth > 1:
            self.locks[key] = (actor, depth - 1)
            return
        self._free(key)

    def _free(self, key: Any) -> None:
        del self.locks[key]
        for other in self.actors:
            if other.blocked_on == key:
                other.blocked_on = None

    # ------------------------------------------------------------------ driving

    def spawn(self, name: str, fn: Callable[[], Any]) -> Actor:
        actor = Actor(len(self.actors), name, fn)
        self.actors.append(actor)
        return actor

    def runnable(self) -> list[Actor]:
        return [a for a in self.actors if not a.done and a.blocked_on is None]

    def _resume(self, actor: Actor) -> None:
        if actor.g is None:
            def body(actor=actor):
                try:
                    actor.result = actor.fn()
                except BaseException as exc:  # reported by the run, never swallowed
                    actor.error = exc
                actor.done = True
                # release whatever it still holds (an exception inside a with-block already did)
                for key, (holder, _) in list(self.locks.items()):
                    if holder is actor:
                        self._free(key)

            actor.g = greenlet.greenlet(body, parent=self.main)
        self.running = actor
        self.step += 1
        actor.steps += 1
        self.trace.append(actor.index)
        self.labels.append((actor.name, actor.label or "start"))
        try:
            actor.g.switch()
        finally:
            self.running = None

    def run(self, policy: "Policy") -> None:
        self.main = greenlet.getcurrent()
        policy.start(self)
        while True:
            live = [a for a in self.actors if not a.done]
            if not live:
                return
            ready = self.runnable()
            if not ready:  # waits with a timeout end when nobody else can run
                for a in live:
                    if isinstance(a.blocked_on, tuple) and a.blocked_on[:1] == ("wait",):
                        a.blocked_on = None
                ready = self.runnable()
            if not ready:
                raise Deadlock(f"every actor is blocked: {[(a.name, a.blocked_on) for a in live]}")
            if self.step >= self.max_steps:
                raise StepLimit(f"{self.step} steps without finishing (a livelock?)")
            actor = policy.choose(self, ready)
            self._resume(actor)
            for look in self.observers:
                look()


class Policy:
    def start(self, sched: Scheduler) -> None:
        pass

    def choose(self, sched: Scheduler, ready: list[Actor]) -> Actor:
        raise NotImplementedError


@dataclass
class Plan(Policy):
    """Segments ``(actor index, steps)``; when the plan is used up, the lowest-index runnable actor runs.
    ``taken[i]`` is how many steps segment i really got (an actor may finish or block earlier)."""

    segments: list[tuple[int, int]]
    taken: list[int] = field(default_factory=list)

    def start(self, sched: Scheduler) -> None:
        self.taken = [0] * len(self.segments)
        self._i = 0

    def choose(self, sched: Scheduler, ready: list[Actor]) -> Actor:
        while self._i < len(self.segments):
            who, steps = self.segments[self._i]
            actor = sched.actors[who]
            if self.taken[self._i] < steps and actor in ready:
                self.taken[self._i] += 1
                return actor
            if actor.done or self.taken[self._i] >= steps:
                self._i += 1
                continue
            # blocked: someone else runs (not a preemption); the segment resumes when it can
            break
        return ready[0]


@dataclass
class RandomWalk(Policy):
    seed: int
    switch_p: float = 0.3

    def start(self, sched: Scheduler) -> None:
        self.rng = random.Random(self.seed)
        self.current: Actor | None = None

    def choose(self, sched: Scheduler, ready: list[Actor]) -> Actor:
        if self.current not in ready or self.rng.random() < self.switch_p:
            self.current = self.rng.choice(ready)
        return self.current


@dataclass
class Replay(Policy):
    """Replay a recorded trace (then lowest-index runnable)."""

    trace: list[int]

    def start(self, sched: Scheduler) -> None:
        self._i = 0

    def choose(self, sched: Scheduler, ready: list[Actor]) -> Actor:
        while self._i < len(self.trace):
            actor = sched.actors[self.trace[self._i]]
            self._i += 1
            if actor in ready:
                return actor
        return ready[0]
