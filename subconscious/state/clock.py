"""Hybrid logical clock: pure stamps and the tick rule.

A stamp is (wall milliseconds, counter). Every write takes a new stamp that is greater than the
host's previous stamp and than every stamp it has read, so a host whose wall clock is behind still
orders its later edits after what it saw. Writes are ordered by (stamp, host): total and the same on
every machine. Persistence lives in :mod:`subconscious.state.store` (under the host's lock).
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(frozen=True, order=True, slots=True)
class Stamp:
    wall: int  # milliseconds since the epoch (as seen by the writer, possibly pushed forward)
    count: int  # logical counter within one wall millisecond

    def encode(self) -> str:
        return f"{self.wall}:{self.count}"

    @classmethod
    def decode(cls, text: object) -> "Stamp":
        if not isinstance(text, str):
            raise ValueError(f"clock stamp must be a string like '1764489541123:0', got {type(text).__name__}")
        wall, sep, count = text.partition(":")
        if not sep or not wall.isdigit() or not count.isdigit() or len(wall) > 16 or len(count) > 9:
            raise ValueError(f"malformed clock stamp {text[:40]!r}")
        return cls(int(wall), int(count))

    def __str__(self) -> str:
        return self.encode()


ZERO = Stamp(0, 0)  # the stamp of legacy (upstream-written) data: any real write is newer


def tick(previous: Stamp, now_ms: int, seen: Stamp = ZERO) -> Stamp:
    """The next stamp after ``previous`` given the wall clock and the newest stamp read.

    Properties (tested): the result is strictly greater than ``previous`` and ``seen``; it never
    goes backwards when the wall clock does; its wall part is ``now_ms`` whenever the wall clock is
    ahead of everything seen.
    """
    base = max(previous, seen)
    if now_ms > base.wall:
        return Stamp(now_ms, 0)
    return Stamp(base.wall, base.count + 1)


def wall_ms() -> int:
    return time.time_ns() // 1_000_000
