"""The one order of versions of a key: which of two writes wins.

Every merge of state — the store's view and shards (:mod:`.merge`), conflict-copy folds (what
``subconscious watch`` runs, through the store), the git merge driver and ``doctor --fix``
(:mod:`.recordmerge`) — decides here, so they all pick the same winner on every host.

A version is a *normalized* JSON value (``records.normalize_record``, or a record's ``to_json()``):
an object with ``hlc`` and ``host``. Versions are ordered by :func:`version_key`: the clock, then the
host, then the version's canonical JSON text. The last part is compared as JSON text, not with
Python's ``==``: ``1``, ``1.0`` and ``true`` are equal in Python but different bytes on disk, and
treating them as one version would let the order in which copies were read pick the bytes.

Equal keys mean byte-identical canonical JSON, so any merge by this order is a join (commutative,
associative, idempotent) down to the bytes.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from .clock import Stamp

_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical(value: Any) -> str:
    """Compact canonical JSON: sorted keys, no spaces, UTF-8 kept."""
    return _ENCODER.encode(value)


def stamp_of(value: Mapping[str, Any]) -> Stamp:
    """The stamp of a normalized value (its ``hlc`` is known to be well formed)."""
    wall, _, count = value["hlc"].partition(":")
    return Stamp(int(wall), int(count))


VersionKey = tuple[Stamp, str, str]


def version_key(value: Mapping[str, Any]) -> VersionKey:
    """The position of a normalized version in the order: (clock, host, canonical JSON)."""
    return (stamp_of(value), value["host"], canonical(value))


def wins(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """``version_key(a) >= version_key(b)``, computing the content part only on a clock and host tie
    (then ``True`` means ``a`` is later or byte-identical to ``b``)."""
    if a is b:
        return True
    sa, sb = stamp_of(a), stamp_of(b)
    if sa != sb:
        return sa > sb
    ha, hb = a["host"], b["host"]
    if ha != hb:
        return ha > hb
    return canonical(a) >= canonical(b)


_STR = frozenset({str})


def same_json(a: Any, b: Any) -> bool:
    """Equal as JSON text (``1``, ``1.0`` and ``true`` are three values). Cheap for strings and for
    objects whose fields are all strings (``==`` is exact there); anything else compares canonical
    text."""
    if a is b:
        return True
    if type(a) is str or type(b) is str or a is None or b is None:
        return a == b
    if a != b:
        return False
    return (type(a) is dict and _STR.issuperset(map(type, a.values()))) or canonical(a) == canonical(b)


def exact_eq(value: Mapping[str, Any]) -> bool:
    """True when, for this normalized version, Python's ``==`` with any other normalized version
    already means byte-identical JSON, so :func:`merge_raw <.merge.merge_raw>` may skip the order.

    That holds for the two shapes we write, whose fields are all strings (a tombstone's ``deleted``
    is always ``true``): a live entry ``{agentId, conversationId, hlc, host}`` (4 keys with
    ``agentId``: normalization guarantees the other three) and 3-key values (a tombstone, or an
    entry without ``agentId``). Anything else (unknown fields) may hold ``1`` vs ``1.0``.
    Kept to two C-level operations: this runs once per equal pair on the store's hot path.
    """
    n = len(value)
    return n == 3 or (n == 4 and "agentId" in value)
