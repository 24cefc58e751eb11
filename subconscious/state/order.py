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


# --------------------------------------------------------------------------- upstream's unstamped versions
#
# Upstream's plugin writes versions without a stamp (``{conversationId, agentId}``, a bare id, a session file
# without ``hlc``), and it writes them with a read-change-write of the whole file: a map it read before our
# last write comes back with its old unstamped entries. Such a version counts once: the first writer that
# adopts it (stamps it into its own file) records a digest of its content for its key, and the same content
# seen unstamped again is that old version — it loses to every stamped one (and is dropped where nothing
# else holds the key). Different content is upstream's new write and beats what it replaced.

ADOPTED_MAX = 16  # digests kept per key (the newest): upstream rewrites one key a handful of times at most
_DIGEST_LEN = 16


def adoption_digest(content: Any) -> str:
    """The digest recorded for an adopted unstamped version: of its content (fields besides ``hlc`` and
    ``host``) as canonical JSON, so upstream's bare id and ``{"conversationId": id}`` are one version."""
    import hashlib

    return hashlib.sha256(canonical(content).encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST_LEN]


def is_digest(value: Any) -> bool:
    return (type(value) is str and len(value) == _DIGEST_LEN
            and all(c in "0123456789abcdef" for c in value))


def add_adopted(have: list[str] | tuple[str, ...], new: Any) -> list[str]:
    """``have`` with the digests of ``new`` appended (each once, in adoption order, the newest
    :data:`ADOPTED_MAX` kept)."""
    out = [d for d in have if is_digest(d)]
    for d in new:
        if is_digest(d) and d not in out:
            out.append(d)
    return out[-ADOPTED_MAX:]


def adopted_map(value: Any) -> dict[str, frozenset[str]]:
    """A shard's ``adopted`` record (key → digests) as read: anything malformed is left out."""
    if type(value) is not dict:
        return {}
    out = {}
    for key, digests in value.items():
        if type(key) is str and type(digests) is list:
            got = frozenset(d for d in digests[:ADOPTED_MAX] if is_digest(d))
            if got:
                out[key] = got
    return out


def union_adopted(maps: Any) -> dict[str, frozenset[str]]:
    out: dict[str, frozenset[str]] = {}
    for m in maps:
        for key, digests in m.items():
            have = out.get(key)
            out[key] = digests if have is None else have | digests
    return out


def upstream_content(value: Mapping[str, Any]) -> dict:
    return {k: v for k, v in value.items() if k not in ("hlc", "host")}


def already_adopted(value: Mapping[str, Any], digests: Any) -> bool:
    """Is the normalized ``value`` (unstamped, or upstream's edit of a stamped one) a version whose content
    some writer already adopted for this key (``digests``: the key's recorded digests)?"""
    return bool(digests) and adoption_digest(upstream_content(value)) in digests


class AdoptedRecords:
    """Every shard's adoption record as read, looked up lazily: a key's digests are gathered only when a
    view holds an unstamped version of it (a hook's read of a large home builds nothing)."""

    __slots__ = ("raws",)

    def __init__(self) -> None:
        self.raws: list[dict] = []

    def add(self, raw: Any) -> None:
        if type(raw) is dict and raw:
            self.raws.append(raw)

    def __bool__(self) -> bool:
        return bool(self.raws)

    def get(self, key: str, default: Any = None) -> frozenset[str] | None:
        out: set[str] = set()
        for raw in self.raws:
            digests = raw.get(key)
            if type(digests) is list:
                out.update(d for d in digests[-ADOPTED_MAX:] if is_digest(d))
        return frozenset(out) if out else default


def record_of(raws: list, keep: Any = None) -> dict[str, list[str]]:
    """Raw records (a shard's ``adopted`` as read) joined into one well-formed record: keys for which
    ``keep(key)`` holds, each key's digests in order, the newest :data:`ADOPTED_MAX` kept."""
    out: dict[str, list[str]] = {}
    for raw in raws:
        if type(raw) is not dict:
            continue
        for key, digests in raw.items():
            if type(key) is str and type(digests) is list and (keep is None or keep(key)):
                got = add_adopted(out.get(key, []), digests[-ADOPTED_MAX:])
                if got:
                    out[key] = got
    return out
