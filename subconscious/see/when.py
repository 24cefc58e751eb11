"""Times as people type them and as the state holds them. Pure.

``parse_since``: an ISO 8601 time (``2026-12-01``, ``2026-12-01T09:30``, ``…Z`` or ``+01:00``; no zone =
UTC) or an age (``90s``, ``30m``, ``2h``, ``3d``, ``1w``) before ``now_ms``. Stamps of the state store are
hybrid-clock stamps whose wall part is milliseconds since the epoch (:mod:`subconscious.state.clock`).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

__all__ = ["parse_since", "iso_ms", "ms_of_iso"]

_AGE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(s|m|h|d|w)\s*", re.IGNORECASE)
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 7 * 86_400_000}


def parse_since(text: str, now_ms: int) -> int:
    """Milliseconds since the epoch that ``text`` names; ValueError (saying what is accepted) otherwise."""
    m = _AGE.fullmatch(text)
    if m:
        return now_ms - int(float(m.group(1)) * _UNIT_MS[m.group(2).lower()])
    ms = ms_of_iso(text.strip())
    if ms is None:
        raise ValueError(f"not a time: {text!r} (give an ISO time like 2026-12-01T09:30Z, or an age like 2h, 3d)")
    return ms


def ms_of_iso(text: object) -> int | None:
    """Milliseconds of an ISO 8601 time (Letta's ``date``, our ``startedAt``); None if it is not one."""
    if not isinstance(text, str) or not text:
        return None
    raw = text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text
    try:
        dt = datetime.fromisoformat(raw)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return (dt - _EPOCH) // timedelta(milliseconds=1)  # exact: a float timestamp loses the last millisecond


def iso_ms(ms: int | None) -> str | None:
    """``2026-12-01T09:30:00.123Z`` for milliseconds since the epoch (None stays None)."""
    if ms is None:
        return None
    dt = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
