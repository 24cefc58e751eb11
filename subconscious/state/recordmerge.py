"""Three-way and n-way merges of the maps inside our files (conversations, settings, a shard's
fields), ordered exactly as the store orders versions (:mod:`.order`: the merge driver's key of a
readable version is the store's :func:`.order.version_key`). Values are compared as JSON text, never
with Python's ``==`` alone (``1``/``1.0``/``true``). Pure; used by :mod:`.conflicts.filemerge`."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

from .bounds import AHEAD_WHOLE_MAX, SETTING_AHEAD, ahead_map, ahead_record, held_only, kept_record
from .clock import ZERO, Stamp
from .merge import merge_session_versions
from .order import add_adopted, already_adopted, same_json, version_key
from .records import RecordError, SessionState, canonical, normalize_record, parse_session, parse_setting

_MISSING: Any = object()


# --------------------------------------------------------------------------- record orders


OrderKey = tuple


def conversation_order(value: Any) -> OrderKey:
    """Order of versions of one conversations key: the store's :func:`.order.version_key` for valid
    values, and below every valid value (compared by text) for values the store cannot read. The
    last part, the written form, only breaks ties between two forms of one version."""
    try:
        n = normalize_record(value)
    except (RecordError, ValueError, TypeError, KeyError):
        return (0, ZERO, "", canonical(value), "")
    return (1, *version_key(n), canonical(value))


def view_order(value: Any) -> OrderKey:
    """Order of versions of one key of a view (``conversations.json``, where upstream writes): the store's
    rule (:func:`.plan.view_versions`) as an order of two versions: upstream's unstamped version not yet
    adopted is upstream's newer write and beats every stamped one (the store stamps it just above the
    version it replaced); among stamped versions the store's :func:`.order.version_key`. Unstamped versions
    already adopted are taken out before (:func:`without_adopted`). Unreadable values below everything."""
    try:
        n = normalize_record(value)
    except (RecordError, ValueError, TypeError, KeyError):
        return (0, 0, ZERO, "", canonical(value), "")
    unstamped = n.get("hlc") == "0:0" and n.get("host") == ""
    return (1, 1 if unstamped else 0, *version_key(n), canonical(value))


def without_adopted(view: Mapping[str, Any] | None, adopted: Mapping[str, frozenset[str]] | None) -> dict | None:
    """A view map without upstream's unstamped versions whose content a writer already adopted for their
    key (a stale read-change-write, a restored old file): those count once, as the store reads them."""
    if view is None or not adopted:
        return None if view is None else dict(view)
    out = {}
    for key, value in view.items():
        digests = adopted.get(key)
        if digests:
            try:
                n = normalize_record(value)
            except (RecordError, ValueError, TypeError, KeyError):
                n = None
            if n is not None and n.get("hlc") == "0:0" and n.get("host") == "" and already_adopted(n, digests):
                continue
        out[key] = value
    return out


def setting_order(value: Any) -> OrderKey:
    try:
        s = parse_setting(value)
    except (RecordError, ValueError, TypeError):
        return (0, ZERO, "", canonical(value), "")
    return (1, *version_key(s.to_json()), canonical(value))


def _same(a: Any, b: Any, order: Callable[[Any], OrderKey]) -> bool:
    """The same version (written in the same or another form, e.g. upstream's bare string)."""
    return same_json(a, b) or order(a)[:-1] == order(b)[:-1]


def _pick(a: Any, b: Any, order: Callable[[Any], OrderKey]) -> Any:
    return a if order(a) >= order(b) else b


def merge_map2(maps: Iterable[Mapping[str, Any]], order: Callable[[Any], OrderKey]) -> dict[str, Any]:
    """Union of maps, the later version of each key by ``order`` (a join: any order, one result)."""
    out: dict[str, Any] = {}
    for m in maps:
        for key, value in m.items():
            have = out.get(key, _MISSING)
            out[key] = value if have is _MISSING or same_json(have, value) else _pick(have, value, order)
    return out


def merge_map3(
    base: Mapping[str, Any] | None,
    ours: Mapping[str, Any],
    theirs: Mapping[str, Any],
    order: Callable[[Any], OrderKey],
    both: Callable[[Any, Any, Any], Any] | None = None,
) -> dict[str, Any]:
    """Three-way merge of maps key → version.

    A key removed on one side and unchanged (same version as the ancestor) on the other is removed;
    a key removed on one side and changed on the other keeps the change; everything else is
    last-writer-wins by ``order``, or ``both(ours, theirs, ancestor)`` where given (the ancestor
    ``_MISSING`` when it has no version).
    """
    base = base or {}
    out: dict[str, Any] = {}
    for key in sorted(set(ours) | set(theirs)):
        a, b, o = ours.get(key, _MISSING), theirs.get(key, _MISSING), base.get(key, _MISSING)
        if a is _MISSING:
            if o is not _MISSING and _same(b, o, order):
                continue  # ours deleted it, theirs did not touch it
            out[key] = b
        elif b is _MISSING:
            if o is not _MISSING and _same(a, o, order):
                continue
            out[key] = a
        elif same_json(a, b):
            out[key] = a
        else:
            out[key] = both(a, b, o) if both is not None else _pick(a, b, order)
    return out


def _live(view: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in view.items() if not (isinstance(v, dict) and v.get("deleted") is True)}


# --------------------------------------------------------------------------- per kind


def merge_views(base: Mapping | None, ours: Mapping, theirs: Mapping,
                adopted: Mapping[str, frozenset[str]] | None = None) -> dict:
    """Three-way merge of ``conversations.json`` maps (live entries only, like the store's view), by the
    store's order of view versions (:func:`view_order`); ``adopted``: the home's adoption record (key →
    digests of upstream's versions already adopted, from the hosts' shards)."""
    base = without_adopted(base, adopted) or {}
    # a side whose version is one already adopted holds an old version: as if it had not touched the key
    ours, theirs = ({**{k: base[k] for k in m if k in base}, **(without_adopted(m, adopted) or {})}
                    for m in (ours, theirs))

    def both(a: Any, b: Any, o: Any) -> Any:
        if o is not _MISSING and _stale_unstamped(a, b, o):
            return b  # a stamped version written over the ancestor's unstamped one adopted it
        if o is not _MISSING and _stale_unstamped(b, a, o):
            return a
        return _pick(a, b, view_order)

    sides: tuple[dict, dict, dict] = ({}, {}, {})  # ours, theirs, the ancestor: each key's versions as adopted
    for key in set(ours) | set(theirs):
        for side, value in zip(sides, _as_adopted(ours.get(key, _MISSING), theirs.get(key, _MISSING),
                                                  base.get(key, _MISSING))):
            if value is not _MISSING:
                side[key] = value
    return _live(merge_map3(sides[2], sides[0], sides[1], view_order, both))


def _stale_unstamped(a: Any, b: Any, o: Any) -> bool:
    """``a`` is upstream's unstamped version unchanged since the ancestor, ``b`` a change: a stamped
    version's writer adopted ``a`` (its record says so; this holds where the record is not at hand), an
    unstamped one is upstream's newer write."""
    return _unstamped_content(a)[0] and _same(a, o, view_order) and not _same(b, o, view_order)


def _unstamped_content(value: Any) -> tuple[bool, Any]:
    try:
        n = normalize_record(value)
    except (RecordError, ValueError, TypeError, KeyError):
        return False, None
    return n.get("hlc") == "0:0" and n.get("host") == "", {k: v for k, v in n.items() if k not in ("hlc", "host")}


def _as_adopted(*values: Any) -> list[Any]:
    """An unstamped version with the content of a stamped version beside it is that version (the store
    reads upstream's rewrite of a key with the content it already has as nothing new)."""
    forms = [_unstamped_content(v) if v is not _MISSING else (False, None) for v in values]
    out = list(values)
    for i, (unstamped, content) in enumerate(forms):
        if not unstamped:
            continue
        same = [v for v, (u, c) in zip(values[:2], forms[:2]) if v is not _MISSING and not u and c is not None
                and same_json(c, content)]  # ours and theirs (the ancestor's versions are no candidates)
        if same:
            out[i] = max(same, key=view_order)
    return out


def _stamp(value: Any) -> Stamp:
    try:
        return Stamp.decode(value)
    except ValueError:
        return ZERO


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _shard_rank(s: Mapping) -> tuple:
    return (_stamp(s.get("clock")), _int(s.get("written")) or 0, canonical(s))


def _fold_shards(values: list[dict]) -> dict | None:
    """Several versions of one side (conflict-marker sides) joined into one (no deletions)."""
    if not values:
        return None
    out = dict(max(values, key=_shard_rank))
    out["conversations"] = merge_map2((v.get("conversations", {}) for v in values), conversation_order)
    out["settings"] = merge_map2((v.get("settings", {}) for v in values), setting_order)
    adopted = _adopted_union(*(v.get("adopted") for v in sorted(values, key=_shard_rank, reverse=True)))
    if adopted:
        out["adopted"] = adopted
    if len(values) > 1:  # one version (no conflict markers): merge_shards joins its record with the other side's
        ahead = _ahead_union(*(v.get("ahead") for v in values), held=_held(out))
        if ahead:
            out["ahead"] = ahead
        else:
            out.pop("ahead", None)
    for key in ("clock",):
        stamps = [_stamp(v.get(key)) for v in values if key in v]
        if stamps:
            out[key] = max(stamps).encode()
    for key in ("written", "format"):
        ints = [i for v in values if (i := _int(v.get(key))) is not None]
        if ints:
            out[key] = max(ints)
    return out


_SHARD_MERGED = frozenset({"conversations", "settings", "clock", "written", "format", "host", "name", "adopted", "ahead"})


def _adopted_union(*records: Any) -> dict[str, list[str]]:
    """Shards' adoption records joined (a key's digests in the order first seen, capped as a writer caps)."""
    out: dict[str, list[str]] = {}
    for record in records:
        if isinstance(record, dict):
            for key, digests in sorted(record.items()):
                if isinstance(key, str) and isinstance(digests, list):
                    out[key] = add_adopted(out.get(key, []), digests)
    return {k: v for k, v in out.items() if v}


def _ahead_union(*records: Any, held: set[str] | None = None) -> dict[str, list[str]]:
    """Shards' ahead records joined (see :mod:`.bounds`): every side's versions stay demoted, the newest
    per key kept as a writer keeps them. Taking one side's record, as for a plain key, let a version stamped
    far ahead that only the other side recorded win its key again. Records larger than
    :data:`~.bounds.AHEAD_WHOLE_MAX` together (planted: a merge parsed and sorted a forged 6 MiB record for
    1.9 s, and kept it) are joined only for the keys in ``held`` (those the merged shard holds), as a
    writer carries on such a record."""
    parts, total = [], 0
    for record in records:
        clean, cost = kept_record(record, AHEAD_WHOLE_MAX)
        parts.append(record if clean is None else clean)
        total += cost
    whole = held is None or total <= AHEAD_WHOLE_MAX
    out: dict[str, frozenset] = {}
    for record in parts:
        for key, entries in (ahead_map(record) if whole else held_only(record, held)).items():
            out[key] = out.get(key, frozenset()) | entries
    return ahead_record(out, {})


def _held(shard: Mapping) -> set[str]:
    """The keys a merged shard holds, as its ahead record names them."""
    convs, sets = shard.get("conversations"), shard.get("settings")
    held = set(convs) if isinstance(convs, dict) else set()
    held.update(SETTING_AHEAD + k for k in (sets if isinstance(sets, dict) else ()))
    return held


def merge_shards(base: Mapping | None, ours: Mapping, theirs: Mapping, host: str | None = None) -> dict:
    """Three-way merge of two versions of one host's shard."""
    later, earlier = (ours, theirs) if _shard_rank(ours) >= _shard_rank(theirs) else (theirs, ours)
    b = base or {}
    out: dict[str, Any] = {}
    for key in sorted((set(ours) | set(theirs)) - _SHARD_MERGED):
        a, t, o = ours.get(key, _MISSING), theirs.get(key, _MISSING), b.get(key, _MISSING)
        if same_json(a, t):
            out[key] = a
        elif a is _MISSING or (o is not _MISSING and same_json(a, o)):
            if t is not _MISSING:
                out[key] = t
        elif t is _MISSING or (o is not _MISSING and same_json(t, o)):
            out[key] = a
        else:
            out[key] = later.get(key, earlier.get(key))
    out["conversations"] = merge_map3(
        b.get("conversations") if isinstance(b.get("conversations"), dict) else None,
        ours.get("conversations", {}), theirs.get("conversations", {}), conversation_order,
    )
    out["settings"] = merge_map3(
        b.get("settings") if isinstance(b.get("settings"), dict) else None,
        ours.get("settings", {}), theirs.get("settings", {}), setting_order,
    )
    clocks = [_stamp(s["clock"]) for s in (ours, theirs) if "clock" in s]
    if clocks:
        out["clock"] = max(clocks).encode()
    for key in ("written", "format"):
        ints = [i for s in (ours, theirs) if (i := _int(s.get(key))) is not None]
        if ints:
            out[key] = max(ints)
        elif key in later:
            out[key] = later[key]
    adopted = _adopted_union(later.get("adopted"), earlier.get("adopted"))
    if adopted:
        out["adopted"] = adopted
    ahead = _ahead_union(ours.get("ahead"), theirs.get("ahead"), held=_held(out))
    if ahead:
        out["ahead"] = ahead
    out["host"] = host or later.get("host", earlier.get("host"))
    if "name" in later or "name" in earlier:
        out["name"] = later.get("name", earlier.get("name"))
    return out


def merge_session_values(values: Iterable[Any], session_id: str | None) -> SessionState:
    """Every version of one session file joined (raises :class:`RecordError` for a foreign value)."""
    states: list[SessionState] = []
    for value in values:
        state = parse_session(value, session_id)
        if session_id is None:
            session_id = state.session_id
        states.append(state)
    merged = merge_session_versions(states)
    if merged is None:
        raise RecordError("no session version")
    return merged
