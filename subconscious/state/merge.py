"""Pure merges of state versions.

Every merge here is a join of a semilattice: commutative, associative and idempotent, so any set of
copies (sync-engine conflict copies, git sides, per-host shards) folds to the same result in any
order on every host. Property tests in tests/unit/test_merge_laws.py.
"""

from __future__ import annotations

from typing import Iterable, Mapping, TypeVar

from .clock import Stamp
from .order import wins
from .records import SessionState, later, raw_stamp

V = TypeVar("V")


def merge_maps(maps: Iterable[Mapping[str, V]]) -> dict[str, V]:
    """Last-writer-wins union of maps key → versioned record (entries, tombstones or settings), by
    the one order (:func:`.order.wins` on their JSON forms). Records' ``==`` is JSON-exact (settings
    compare values as JSON text), so equal records are skipped before any ordering is computed."""
    out: dict[str, V] = {}
    for m in maps:
        for key, value in m.items():
            have = out.get(key)
            if have is None:
                out[key] = value
            elif have is not value and have != value and not later(have, value):
                out[key] = value
    return out


def merge_raw(maps: Iterable[Mapping[str, dict]]) -> dict[str, dict]:
    """:func:`merge_maps` over normalized JSON values (see ``records.normalize_record``): the store's
    hot path, where records are never built.

    Copies of a home mostly agree, so most pairs are equal dicts: for the shapes we write the C-level
    ``==`` settles them (:func:`.order.exact_eq`); a pair equal in Python but maybe not in JSON
    (unknown fields holding ``1`` and ``1.0``) goes to :func:`.order.wins` like any other pair."""
    out: dict[str, dict] = {}
    for m in maps:
        for key, value in m.items():
            have = out.get(key)
            if have is None:
                out[key] = value
            elif have is value:
                continue
            elif have == value:
                # order.exact_eq(have), inlined (a call per equal pair costs ~15 ms per 100,000)
                n = len(have)
                if not (n == 3 or (n == 4 and "agentId" in have)) and not wins(have, value):
                    out[key] = value
            elif not wins(have, value):
                out[key] = value
    return out


def max_stamp(records: Iterable[object]) -> Stamp:
    best = Stamp(0, 0)
    for r in records:
        stamp = getattr(r, "stamp", None)
        if stamp is not None and stamp > best:
            best = stamp
    return best


def merge_sessions(a: SessionState, b: SessionState) -> SessionState:
    """Two versions of one session file.

    The cursor never moves backwards (max), the start time is the earliest known, and the rest comes
    from the later writer by (clock, host, content), the content compared as canonical JSON text as in
    :mod:`.order`.
    """
    if a.session_id != b.session_id:
        raise ValueError(f"cannot merge sessions {a.session_id!r} and {b.session_id!r}")
    # group_key's order, its content part (canonical JSON) computed only on a clock and host tie: this
    # runs for every version of every session when all are read
    if a.stamp != b.stamp:
        win = a if a.stamp > b.stamp else b
    elif a.host != b.host:
        win = a if a.host > b.host else b
    else:
        win = a if a.group_key() >= b.group_key() else b
    starts = [s for s in (a.started_at, b.started_at) if s is not None]
    cursor, start = max(a.last_processed_index, b.last_processed_index), min(starts) if starts else None
    if win.last_processed_index == cursor and win.started_at == start:
        return win
    return win.evolve(last_processed_index=cursor, started_at=start)


def merge_session_versions(versions: Iterable[SessionState]) -> SessionState | None:
    result: SessionState | None = None
    for v in versions:
        result = v if result is None else merge_sessions(result, v)
    return result
