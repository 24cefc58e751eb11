"""Hybrid logical clock: pure stamps and the tick rule.

A stamp is (wall milliseconds, counter). Every write takes a new stamp that is greater than the
host's previous stamp and than every stamp it has read, so a host whose wall clock is behind still
orders its later edits after what it saw. Writes are ordered by (stamp, host): total and the same on
every machine. Persistence lives in :mod:`subconscious.state.store.core` (under the host's lock).

Text form ``<wall>:<count>``: 1 to 16 ASCII digits, a colon, 1 to 9 ASCII digits (:data:`STAMP_RE`,
the one definition the decoder and the records' fast path share). :func:`tick` only emits stamps of
that form, whatever it has read (see its docstring for the limits).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

WALL_DIGITS, COUNT_DIGITS = 16, 9
MAX_WALL = 10**WALL_DIGITS - 1  # ~ year 318,000: only a damaged or hostile stamp gets near it
MAX_COUNT = 10**COUNT_DIGITS - 1

# ASCII digits only: str.isdigit() and int() also take '²', '１２' or Arabic-Indic digits. fullmatch,
# so no trailing newline either (unlike '$').
STAMP_RE = re.compile(rf"([0-9]{{1,{WALL_DIGITS}}}):([0-9]{{1,{COUNT_DIGITS}}})")


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
        m = STAMP_RE.fullmatch(text)
        if m is None:
            raise ValueError(f"malformed clock stamp {text[:40]!r}")
        return cls(int(m[1]), int(m[2]))

    def __str__(self) -> str:
        return self.encode()


ZERO = Stamp(0, 0)  # the stamp of legacy (upstream-written) data: any real write is newer
MAX = Stamp(MAX_WALL, MAX_COUNT)  # the largest stamp the text form holds


def tick(previous: Stamp, now_ms: int, seen: Stamp = ZERO) -> Stamp:
    """The next stamp after ``previous`` given the wall clock and the newest stamp read.

    Properties (tested): the result always decodes (``Stamp.decode(s.encode()) == s``); it is strictly
    greater than ``previous`` and ``seen``; it never goes backwards when the wall clock does; its wall
    part is ``now_ms`` whenever the wall clock is ahead of everything seen (and within the limit).

    Limits: when the counter would pass :data:`MAX_COUNT` it carries into the wall (wall + 1, count 0),
    still greater than everything before. Only when ``previous`` or ``seen`` is already :data:`MAX`
    (a stamp at the very end of the text form, which no wall clock produces) is there nothing greater
    to give: the result saturates at :data:`MAX`, and such writes are ordered by host then content, as
    equal stamps always are. A wall clock beyond :data:`MAX_WALL` counts as :data:`MAX_WALL`.
    """
    base = max(previous, seen)
    now = min(now_ms, MAX_WALL)
    if now > base.wall:
        return Stamp(now, 0)
    if base >= MAX:  # also anything beyond the text form (a Stamp built by hand, never decoded)
        return MAX
    if base.count < MAX_COUNT:
        return Stamp(base.wall, base.count + 1)
    return Stamp(base.wall + 1, 0)


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


# How far ahead of this machine's clock a stamp from elsewhere may be and still count: clocks of machines that
# share a home drift by seconds, a machine without NTP by minutes; a day covers a wrong time zone setting too.
# Beyond it a stamp is a broken clock or a crafted file: `subconscious import` refuses such entries (they would
# win every later merge). doctor warns from DEFAULT_SKEW_S (two minutes) on.
ALLOWED_SKEW_MS = 24 * 3600 * 1000


def bound(now_ms: int) -> Stamp:
    """The largest stamp that counts on a machine whose clock reads ``now_ms``: a floor or stamp beyond
    ``now + ALLOWED_SKEW_MS`` is a broken clock or a crafted file. It is reported, never followed by the
    clock, never adopted as a floor; a version carrying it is ordered as the oldest version of its key
    (see docs/scale-and-bounds.md)."""
    return Stamp(min(max(now_ms, 0) + ALLOWED_SKEW_MS, MAX_WALL), MAX_COUNT)


# How far ahead of this machine's clock the clock follows other hosts' stamps (hybrid logical clock with a
# max-drift bound): far less than a reader accepts, so what a correct host writes after reading a host a day
# ahead is still inside the bound of a host a minute behind. A version stamped beyond it that a write
# replaces is recorded as *ahead* in the writer's shard and ordered as the oldest of its key by every
# reader (see docs/scale-and-bounds.md, .bounds).
FOLLOW_MS = 5 * 60 * 1000


def follow_limit(now_ms: int) -> Stamp:
    """The largest stamp this machine's clock follows at ``now_ms``."""
    return Stamp(min(max(now_ms, 0) + FOLLOW_MS, MAX_WALL), 0)


def within(stamp: Stamp, now_ms: int) -> Stamp:
    """``stamp`` if it counts at ``now_ms``, else :data:`ZERO` (what the clock and a floor take instead)."""
    return stamp if stamp <= bound(now_ms) else ZERO

