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

import posixpath
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from ..recordmerge import (  # noqa: F401  (re-exported: the merges callers and tests use)
    conversation_order,
    merge_map2,
    merge_map3,
    merge_session_values,
    merge_shards,
    merge_views,
    setting_order,
    view_order,
    without_adopted,
    _fold_shards,
)
from ..jsontext import Unparseable, loads_state
from ..records import RecordError, parse_session
from ..textforms import dumps_canonical, has_conflict_markers, split_conflict_sides

VIEW, SHARD, SESSION = "view", "shard", "session"
KINDS = (VIEW, SHARD, SESSION)


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
    """Parse bytes as JSON (:func:`~subconscious.state.jsontext.loads_state`: a BOM is fine; deep
    nesting, huge integers and the like are just unreadable); a text with conflict markers gives each
    side that parses."""
    if not raw.strip():
        return Version(label, raw)
    try:
        return Version(label, raw, (loads_state(raw),))
    except Unparseable as exc:
        error = exc.reason
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return Version(label, raw, problem=error)
    if has_conflict_markers(text):
        sides = split_conflict_sides(text)
        values = []
        for side in sides:
            try:
                values.append(loads_state(side))
            except Unparseable:
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


# --------------------------------------------------------------------------- fitting a kind


class _Unfit(ValueError):
    """A value that is JSON but not this kind of file of ours."""


def _view_of(value: Any) -> dict:
    if not isinstance(value, dict):
        raise _Unfit(f"a conversations view must be a JSON object, not {type(value).__name__}")
    return value


def _shard_of(value: Any) -> dict:
    if not isinstance(value, dict):
        raise _Unfit(f"a host shard must be a JSON object, not {type(value).__name__}")
    for part in ("conversations", "settings"):
        if not isinstance(value.get(part, {}), dict):
            raise _Unfit(f"the shard's {part!r} must be a JSON object")
    return value


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


def merge_versions(base: Version | None, ours: Version, theirs: Version, path: str | None = None,
                   adopted: Mapping[str, frozenset[str]] | None = None) -> MergeResult:
    """Merge three versions of one of our files (``path`` as git's %P, if known; ``adopted``: the home's
    adoption record, see :func:`~.recordmerge.merge_views`)."""
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

    # upstream's versions already adopted go first (each side of conflict markers too): they count once
    def known(values: list) -> dict:
        if len(values) == 1:
            return values[0]  # merge_views takes out what was already adopted (as an untouched key)
        out: dict = {}
        for v in values:  # the sides of conflict markers: one version each, joined as the store joins them
            out = merge_views(None, out, without_adopted(v, adopted) or {})
        return out

    b = known(base_values) if base_values else None
    o = known(sides[ours.label]) if sides[ours.label] else (b or {})
    t = known(sides[theirs.label]) if sides[theirs.label] else (b or {})
    return MergeResult(kind, render(kind, merge_views(b, o, t, adopted)), tuple(notes), tuple(aside))


def merge_bytes(base: bytes | None, ours: bytes, theirs: bytes, path: str | None = None,
                adopted: Mapping[str, frozenset[str]] | None = None) -> MergeResult:
    """:func:`merge_versions` from raw bytes (git's %O, %A, %B; an empty %O means no ancestor)."""
    b = read_version(base, "base") if base is not None and base.strip() else None
    return merge_versions(b, read_version(ours, "ours"), read_version(theirs, "theirs"), path, adopted)


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
