"""Pure merges of whole state files: what ``subconscious merge-driver`` and ``doctor --fix`` run.

git hands a merge driver three versions of one file (ancestor, ours, theirs); this module turns their
bytes into one canonical text with the store's own record merges, so a git merge or rebase decides
exactly as the store does:

- ``conversations.json`` (the view): three-way per key. A key present in the ancestor and removed on
  one side while unchanged on the other is deleted (the view drops deleted entries); anything else is
  last-writer-wins by (hlc, host, content) — the order of :func:`subconscious.state.merge.merge_raw`.
- ``hosts/<host>.json`` (a shard): the same three-way rule for its ``conversations`` (tombstones
  included) and ``settings``; ``clock``, ``written`` and ``format`` take the maximum.
- ``session-<id>.json``: :func:`subconscious.state.merge.merge_sessions` (the cursor never moves
  back; the rest from the later writer). The ancestor adds nothing to a join and is not used.

A version with git conflict markers (a clone that merged without the driver) stands for each of its
sides. A version that does not parse at all is treated as "no change since the ancestor", and its
bytes are returned in :attr:`MergeResult.set_aside` for the caller to keep: nothing is lost. Only
when neither side can be read is there no result (the caller keeps both, e.g. as conflict markers).

No I/O here; property tests in tests/unit/test_filemerge.py.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from .clock import ZERO, Stamp
from .merge import merge_session_versions
from .records import (
    RecordError,
    SessionState,
    canonical,
    normalize_record,
    parse_session,
    parse_setting,
    raw_stamp,
)
from .textforms import dumps_canonical, has_conflict_markers, split_conflict_sides

VIEW, SHARD, SESSION = "view", "shard", "session"
KINDS = (VIEW, SHARD, SESSION)
_MISSING: Any = object()


# --------------------------------------------------------------------------- reading one version


@dataclass(frozen=True)
class Version:
    """What one version (bytes) of a file stands for."""

    label: str  # "base" | "ours" | "theirs" | a file name
    raw: bytes
    values: tuple[Any, ...] = ()  # JSON values (several when the text has conflict markers)
    problem: str | None = None  # why some or all of it could not be read
    conflicted: bool = False  # had git conflict markers

    @property
    def empty(self) -> bool:
        return not self.raw.strip()

    @property
    def readable(self) -> bool:
        return bool(self.values)


def read_version(raw: bytes, label: str) -> Version:
    """Parse bytes as JSON; a text with conflict markers gives each side that parses."""
    if not raw.strip():
        return Version(label, raw)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return Version(label, raw, problem="not UTF-8 text")
    try:
        return Version(label, raw, (json.loads(text),))
    except json.JSONDecodeError as exc:
        error = f"invalid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
    if has_conflict_markers(text):
        sides = split_conflict_sides(text)
        values = []
        for side in sides:
            try:
                values.append(json.loads(side))
            except json.JSONDecodeError:
                pass
        problem = None if len(values) == len(sides) else f"git conflict markers: {len(values)} of {len(sides)} sides parse"
        return Version(label, raw, tuple(values), problem, conflicted=True)
    return Version(label, raw, problem=error)


# --------------------------------------------------------------------------- which file


def kind_of_path(path: str | None) -> str | None:
    """The kind of our file at ``path`` (as git's %P gives it, relative, '/'-separated)."""
    if not path:
        return None
    path = path.replace("\\", "/")
    name, parent = posixpath.basename(path), posixpath.basename(posixpath.dirname(path))
    if not name.endswith(".json"):
        return None
    if name == "conversations.json":
        return VIEW
    if parent == "hosts":
        return SHARD
    if name.startswith("session-"):
        return SESSION
    return None


def kind_of_value(value: Any) -> str | None:
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("conversations"), dict) and "host" in value and ("format" in value or "clock" in value):
        return SHARD
    if isinstance(value.get("sessionId"), str) and isinstance(value.get("lastProcessedIndex", -1), int) and not isinstance(
        value.get("lastProcessedIndex", -1), bool
    ):
        return SESSION
    return VIEW


def _guess_kind(versions: Iterable[Version]) -> str | None:
    votes = [kind_of_value(v) for version in versions for v in version.values]
    for kind in (SHARD, SESSION, VIEW):
        if kind in votes:
            return kind
    return None


def session_id_of_path(path: str | None) -> str | None:
    if not path:
        return None
    name = posixpath.basename(path.replace("\\", "/"))
    if name.startswith("session-") and name.endswith(".json"):
        return name[len("session-") : -len(".json")] or None
    return None


def host_of_path(path: str | None) -> str | None:
    if kind_of_path(path) != SHARD:
        return None
    return posixpath.basename(path.replace("\\", "/"))[: -len(".json")]  # type: ignore[union-attr]


# --------------------------------------------------------------------------- record orders


OrderKey = tuple


def conversation_order(value: Any) -> OrderKey:
    """Order of versions of one conversations key; the store's ``raw_later`` for valid values, and
    below every valid value (compared by text) for values the store cannot read."""
    try:
        n = normalize_record(value)
    except (RecordError, ValueError, TypeError, KeyError):
        return (0, ZERO, "", canonical(value), "")
    return (1, raw_stamp(n), n["host"], canonical(n), canonical(value))  # last: the written form (ties)


def setting_order(value: Any) -> OrderKey:
    try:
        s = parse_setting(value)
    except (RecordError, ValueError, TypeError):
        return (0, ZERO, "", canonical(value), "")
    return (1, s.stamp, s.host, canonical(s.to_json()), canonical(value))


def _same(a: Any, b: Any, order: Callable[[Any], OrderKey]) -> bool:
    """The same version (written in the same or another form, e.g. upstream's bare string)."""
    return a == b or order(a)[:-1] == order(b)[:-1]


def _pick(a: Any, b: Any, order: Callable[[Any], OrderKey]) -> Any:
    return a if order(a) >= order(b) else b


def merge_map2(maps: Iterable[Mapping[str, Any]], order: Callable[[Any], OrderKey]) -> dict[str, Any]:
    """Union of maps, the later version of each key by ``order`` (a join: any order, one result)."""
    out: dict[str, Any] = {}
    for m in maps:
        for key, value in m.items():
            have = out.get(key, _MISSING)
            out[key] = value if have is _MISSING or have == value else _pick(have, value, order)
    return out


def merge_map3(
    base: Mapping[str, Any] | None,
    ours: Mapping[str, Any],
    theirs: Mapping[str, Any],
    order: Callable[[Any], OrderKey],
) -> dict[str, Any]:
    """Three-way merge of maps key → version.

    A key removed on one side and unchanged (same version as the ancestor) on the other is removed;
    a key removed on one side and changed on the other keeps the change; everything else is
    last-writer-wins by ``order``.
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
        else:
            out[key] = a if a == b else _pick(a, b, order)
    return out


def _live(view: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in view.items() if not (isinstance(v, dict) and v.get("deleted") is True)}


# --------------------------------------------------------------------------- per kind


class _Unfit(ValueError):
    """A value that is JSON but not this kind of file of ours."""


def _view_of(value: Any) -> dict:
    if not isinstance(value, dict):
        raise _Unfit(f"a conversations view must be a JSON object, not {type(value).__name__}")
    return value


def merge_views(base: Mapping | None, ours: Mapping, theirs: Mapping) -> dict:
    """Three-way merge of ``conversations.json`` maps (live entries only, like the store's view)."""
    return _live(merge_map3(base, ours, theirs, conversation_order))


def _shard_of(value: Any) -> dict:
    if not isinstance(value, dict):
        raise _Unfit(f"a host shard must be a JSON object, not {type(value).__name__}")
    for part in ("conversations", "settings"):
        if not isinstance(value.get(part, {}), dict):
            raise _Unfit(f"the shard's {part!r} must be a JSON object")
    return value


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
    for key in ("clock",):
        stamps = [_stamp(v.get(key)) for v in values if key in v]
        if stamps:
            out[key] = max(stamps).encode()
    for key in ("written", "format"):
        ints = [i for v in values if (i := _int(v.get(key))) is not None]
        if ints:
            out[key] = max(ints)
    return out


_SHARD_MERGED = frozenset({"conversations", "settings", "clock", "written", "format", "host", "name"})


def merge_shards(base: Mapping | None, ours: Mapping, theirs: Mapping, host: str | None = None) -> dict:
    """Three-way merge of two versions of one host's shard."""
    later, earlier = (ours, theirs) if _shard_rank(ours) >= _shard_rank(theirs) else (theirs, ours)
    b = base or {}
    out: dict[str, Any] = {}
    for key in sorted((set(ours) | set(theirs)) - _SHARD_MERGED):
        a, t, o = ours.get(key, _MISSING), theirs.get(key, _MISSING), b.get(key, _MISSING)
        if a == t:
            out[key] = a
        elif a is _MISSING or (o is not _MISSING and a == o):
            if t is not _MISSING:
                out[key] = t
        elif t is _MISSING or (o is not _MISSING and t == o):
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


# --------------------------------------------------------------------------- whole files


@dataclass(frozen=True)
class MergeResult:
    kind: str | None
    text: str | None  # the merged canonical text; None when no side could be read
    notes: tuple[str, ...] = ()  # plain-language account of anything unusual
    set_aside: tuple[Version, ...] = field(default=())  # versions that could not be used: keep their bytes

    @property
    def ok(self) -> bool:
        return self.text is not None


def render(kind: str, value: Any) -> str:
    """The canonical text the store writes for this kind of file."""
    return dumps_canonical(value, expand=2 if kind == SHARD else 1)


def _usable(version: Version, check: Callable[[Any], Any]) -> tuple[list[Any], str | None]:
    """The values of ``version`` that fit the kind, and why the rest did not."""
    good, why = [], version.problem
    for value in version.values:
        try:
            good.append(check(value))
        except (_Unfit, RecordError) as exc:
            why = str(exc)
    return good, why


def merge_versions(base: Version | None, ours: Version, theirs: Version, path: str | None = None) -> MergeResult:
    """Merge three versions of one of our files (``path`` as git's %P, if known)."""
    kind = kind_of_path(path) or _guess_kind([ours, theirs, *([base] if base else [])])
    if kind is None:
        return MergeResult(None, None, ("neither side is a state file of ours (no JSON object in either)",),
                           tuple(v for v in (ours, theirs) if not v.empty))
    notes: list[str] = []
    aside: list[Version] = []
    sid = session_id_of_path(path)
    if kind == SESSION and sid is None:  # no path: the session named inside (ours first)
        sid = next((v["sessionId"] for version in (ours, theirs) for v in version.values
                    if isinstance(v, dict) and isinstance(v.get("sessionId"), str)), None)

    if kind == SESSION:
        def check(value: Any) -> Any:
            parse_session(value, sid)
            return value
    elif kind == SHARD:
        check = _shard_of
    else:
        check = _view_of

    sides: dict[str, list[Any]] = {}
    for version in (ours, theirs):
        good, why = _usable(version, check)
        sides[version.label] = good
        if version.conflicted and good:
            notes.append(f"{version.label} had git conflict markers: merged the {len(good)} sides that parse")
        if not good and not version.empty:
            notes.append(f"{version.label} could not be read ({why}); merged without it, its bytes kept")
            aside.append(version)
        elif why and good:
            notes.append(f"{version.label}: part could not be read ({why}); its bytes kept")
            aside.append(version)
    base_values = _usable(base, check)[0] if base is not None else []
    if not sides[ours.label] and not sides[theirs.label]:
        return MergeResult(kind, None, (*notes, "no side could be read: nothing to merge"), tuple(aside))

    if kind == SESSION:
        every = sides[ours.label] + sides[theirs.label]
        merged = merge_session_values(every, sid).to_json()
        return MergeResult(kind, render(kind, merged), tuple(notes), tuple(aside))

    if kind == SHARD:
        folded_base = _fold_shards(base_values)
        o = _fold_shards(sides[ours.label]) or folded_base or {}
        t = _fold_shards(sides[theirs.label]) or folded_base or {}
        merged = merge_shards(folded_base, o, t, host_of_path(path))
        return MergeResult(kind, render(kind, merged), tuple(notes), tuple(aside))

    b = merge_map2(base_values, conversation_order) if base_values else None
    o = merge_map2(sides[ours.label], conversation_order) if sides[ours.label] else (b or {})
    t = merge_map2(sides[theirs.label], conversation_order) if sides[theirs.label] else (b or {})
    return MergeResult(kind, render(kind, merge_views(b, o, t)), tuple(notes), tuple(aside))


def merge_bytes(base: bytes | None, ours: bytes, theirs: bytes, path: str | None = None) -> MergeResult:
    """:func:`merge_versions` from raw bytes (git's %O, %A, %B; an empty %O means no ancestor)."""
    b = read_version(base, "base") if base is not None and base.strip() else None
    return merge_versions(b, read_version(ours, "ours"), read_version(theirs, "theirs"), path)


def repair(raw: bytes, path: str | None = None) -> MergeResult:
    """One file with git conflict markers (or several versions inside it) → its merged text."""
    version = read_version(raw, "file")
    return merge_versions(None, version, Version("other", b""), path)


def conflict_text(ours: bytes, theirs: bytes) -> bytes:
    """Both versions in one file with whole-file conflict markers (when nothing can be merged), so
    a person — or the store's reader, which recovers each side that parses — sees both."""
    def block(raw: bytes) -> bytes:
        return raw if raw.endswith(b"\n") or not raw else raw + b"\n"

    return b"<<<<<<< ours\n" + block(ours) + b"=======\n" + block(theirs) + b">>>>>>> theirs\n"
