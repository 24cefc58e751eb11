"""The state store: read-merge-write operations on the shared state directory.

Layout of ``$LETTA_HOME/.letta/claude/``::

    conversations.json     merged view, upstream-readable: {session_id: {conversationId, agentId, hlc, host}}
    hosts/<host>.json      this host's shard: everything it knows (entries, tombstones, settings)
    session-<id>.json      one session's cursor and caches (upstream's format + host, hlc)
    quarantine/            bytes of files that did not parse, set aside, never lost

Every host writes only its own shard, so hosts writing one directory at once (NFS, SMB, several
simulated hosts) cannot lose each other's entries; ``conversations.json`` is written by everyone but is
only a view that any host regenerates from the union of all shards (and which is read as one more
source, for upstream-written and legacy entries). The processes of one host are serialised by the
host lock; a write reads everything, merges its change in, and writes atomically.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable

from . import copies
from .conflicts import ConflictCopy, classify, is_original
from .clock import ZERO, Stamp, tick, wall_ms
from .files import Problem, atomic_write, ensure_dir, read_json, set_aside
from .ids import check_session_id, is_host_id, is_session_id
from .locks import DEFAULT_TIMEOUT, host_lock
from .merge import (
    max_stamp,
    merge_maps,
    merge_raw,
    prune_raw_tombstones,
)
from .records import (
    Conversation,
    Record,
    RecordError,
    Setting,
    Tombstone,
    normalize_record,
    parse_record,
    parse_setting,
    raw_stamp,
)
from .sessions import SessionFiles, session_file_name

__all__ = ["Snapshot", "ShardInfo", "Store", "StoreError", "open_store", "session_file_name"]
from .textforms import TEMP_PREFIX, dumps_canonical

CONVERSATIONS = "conversations.json"
HOSTS = "hosts"
SHARD_FORMAT = 1
DAY_MS = 86_400_000
TOMBSTONE_RETENTION_MS = 90 * DAY_MS


class StoreError(RuntimeError):
    """The store refuses an operation; the message says why and what to do."""


@dataclass(frozen=True)
class ShardInfo:
    host: str
    name: str
    clock: Stamp
    written_ms: int  # the writer's wall clock when it wrote the shard
    format: int
    entries: int


@dataclass
class Snapshot:
    """Everything the directory says, merged: what a reader sees.

    ``raw`` holds each session's winning version in its canonical JSON form; records are built
    from it only when asked for (a home can hold thousands of sessions, a hook needs one).
    """

    raw: dict[str, dict] = field(default_factory=dict)
    settings: dict[str, Setting] = field(default_factory=dict)
    shards: dict[str, ShardInfo] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    newest: Stamp = ZERO
    copies: list[copies.Found] = field(default_factory=list)  # conflict copies merged into this view

    @cached_property
    def conversations(self) -> dict[str, Record]:
        return {k: parse_record(v) for k, v in self.raw.items()}

    @cached_property
    def live(self) -> dict[str, Conversation]:
        return {k: r for k, r in self.conversations.items() if isinstance(r, Conversation)}

    def get(self, session_id: str) -> Conversation | None:
        value = self.raw.get(session_id)
        return None if value is None or value.get("deleted") is True else parse_record(value)  # type: ignore[return-value]


def _weak(copy) -> bool:
    return copy is not None and copy.weak


@dataclass
class _Read:
    snap: Snapshot
    own_convs: dict[str, dict]
    own_settings: dict[str, Setting]
    shard_convs: dict[str, dict]  # the real shards' merged conversations
    shard_settings: dict[str, Setting]


class Store(SessionFiles):
    def __init__(
        self,
        home: Path,
        host: str,
        locks_dir: Path,
        clocks_dir: Path,
        *,
        host_name: str | None = None,
        lock_timeout: float = DEFAULT_TIMEOUT,
        now: Callable[[], int] = wall_ms,
        retention_ms: int = TOMBSTONE_RETENTION_MS,
        read_only: bool = False,
    ):
        self.home = Path(home)
        self.host = host
        self.host_name = host_name or host
        self.locks_dir, self.clocks_dir = Path(locks_dir), Path(clocks_dir)
        self.lock_timeout = lock_timeout
        self.now = now
        self.retention_ms = retention_ms
        self.read_only = read_only  # report problems without setting anything aside; refuse writes

    # ------------------------------------------------------------------ paths

    @property
    def view_path(self) -> Path:
        return self.home / CONVERSATIONS

    def shard_path(self, host: str | None = None) -> Path:
        return self.home / HOSTS / f"{host or self.host}.json"

    def _aside(self, path: Path, raw: bytes, kind: str) -> str | None:
        return None if self.read_only else str(set_aside(path, raw, kind, self.home, self.host))

    def _read_json(self, path: Path, copy=None):
        """Read one source; a weak-named copy is read without setting anything aside (it may not be
        ours at all)."""
        return read_json(path, root=self.home, host=self.host, keep=not self.read_only and not _weak(copy))

    def lock(self):
        return host_lock(self.locks_dir, self.host, self.lock_timeout)

    # ------------------------------------------------------------------ reading

    def _parse_map(self, path: Path, raw_map: Any, parse, problems: list[Problem], raw: bytes, what: str, copy=None) -> dict:
        aside = (lambda *a: None) if _weak(copy) else self._aside
        if not isinstance(raw_map, dict):
            problems.append(Problem("wrong-type", str(path), f"{what} is not a JSON object", aside(path, raw, "wrong-type")))
            return {}
        out, bad = {}, []
        for key, value in raw_map.items():
            try:
                if what == "conversations" and not is_session_id(key):
                    raise RecordError("not a valid session id")
                out[key] = parse(value)
            except RecordError as exc:
                bad.append(f"{key[:60]!r}: {exc}")
        if bad:
            kept = aside(path, raw, "invalid-entry")
            more = f" (+{len(bad) - 3} more)" if len(bad) > 3 else ""
            problems.append(
                Problem("invalid-entry", str(path), f"skipped {len(bad)} invalid {what} entries: "
                        + "; ".join(bad[:3]) + more, kept)
            )
        return out

    def _shard_paths(self) -> list[Path]:
        try:
            names = sorted(p for p in (self.home / HOSTS).iterdir() if p.suffix == ".json")
        except FileNotFoundError:
            return []
        return [p for p in names if is_host_id(p.stem) and is_original(p.name, where="hosts")]

    def read(self) -> Snapshot:
        """Merge the view and every host's shard. Takes no lock (all files are replaced atomically)."""
        return self._read().snap

    def _read(self) -> "_Read":
        """The merged snapshot, this host's own shard, and what the real shards alone say (so a
        writer can adopt versions that live only in the view or in conflict copies)."""
        snap = Snapshot()
        shard_convs: list[dict[str, dict]] = []
        shard_sets: list[dict[str, Setting]] = []
        extra_convs: list[dict[str, dict]] = []
        extra_sets: list[dict[str, Setting]] = []
        own_convs: dict[str, dict] = {}
        own_settings: dict[str, Setting] = {}
        host_names = copies.listdir(self.home / HOSTS)
        host_copies = [c for c in copies.find(host_names, "hosts", include_ambiguous=True)
                       if not c.ambiguous or self._names_host(self.home / HOSTS / c.name, c.original)]
        copy_names = {c.name for c in host_copies}
        for path in self._shard_paths():
            if path.name in copy_names:  # e.g. OneDrive's "<host>-<PC>.json" holding <host>'s shard
                continue
            for convs, sets, value in self._read_shard(path, snap):
                shard_convs.append(convs)
                shard_sets.append(sets)
                snap.shards[path.stem] = self._shard_info(path.stem, value, len(convs))
                if path.stem == self.host:
                    own_convs = merge_raw([own_convs, convs])
                    own_settings = merge_maps([own_settings, sets])
        for copy in host_copies:
            for convs, sets, _ in self._read_shard(self.home / HOSTS / copy.name, snap, copy):
                extra_convs.append(convs)
                extra_sets.append(sets)
        from_shards = merge_raw(shard_convs)
        view_copies = copies.find(copies.listdir(self.home), "root", CONVERSATIONS)
        for path, copy in [(self.view_path, None), *((self.home / c.name, c) for c in view_copies)]:
            extra_convs += self._read_view(path, snap, from_shards, copy)
        snap.raw = merge_raw([from_shards, *extra_convs])
        shard_settings = merge_maps(shard_sets)
        snap.settings = merge_maps([shard_settings, *extra_sets])
        snap.newest = max(
            max(map(raw_stamp, snap.raw.values()), default=ZERO),
            max_stamp(snap.settings.values()),
            max((s.clock for s in snap.shards.values()), default=ZERO),
        )
        return _Read(snap, own_convs, own_settings, from_shards, shard_settings)

    def _accept(self, snap: Snapshot, path: Path, copy, raw: bytes, problems: list[Problem], ok: bool) -> bool:
        """Record what reading one source found. A weak-name copy whose content is not ours is
        ignored altogether (it is some other file that happens to look like a copy)."""
        if copy is not None and copy.weak and (problems or not ok):
            return False
        snap.problems += problems
        if copy is not None and raw:
            snap.copies.append(copies.Found(path, copy, raw))
        return True

    @staticmethod
    def _names_host(path: Path, original: str) -> bool:
        """Does the shard file at ``path`` say it belongs to the host of ``original`` (``<host>.json``)?"""
        try:
            value = json.loads(path.read_bytes())
        except (OSError, ValueError):
            return False
        return isinstance(value, dict) and value.get("host") == original[: -len(".json")]

    def _read_shard(self, path: Path, snap: Snapshot, copy=None) -> list[tuple[dict, dict, dict]]:
        result = self._read_json(path, copy)
        problems = list(result.problems)
        out = []
        for value in result.values:
            owner = copy.original[: -len(".json")] if copy is not None else path.stem
            if not isinstance(value, dict) or (copy is not None and copy.weak and value.get("host") != owner):
                kept = None if _weak(copy) else self._aside(path, result.raw, "wrong-type")
                problems.append(Problem("wrong-type", str(path), "not a shard of ours", kept))
                continue
            convs = self._parse_map(path, value.get("conversations", {}), normalize_record, problems, result.raw, "conversations", copy)
            sets = self._parse_map(path, value.get("settings", {}), parse_setting, problems, result.raw, "settings", copy)
            out.append((convs, sets, value))
        return out if self._accept(snap, path, copy, result.raw, problems, bool(out)) else []

    def _read_view(self, path: Path, snap: Snapshot, from_shards: dict, copy=None) -> list[dict]:
        result = self._read_json(path, copy)
        problems = list(result.problems)
        out = []
        for value in result.values:
            if isinstance(value, dict):  # the view mostly repeats the shards: validate only what differs
                value = {k: v for k, v in value.items() if from_shards.get(k) != v}
            out.append(self._parse_map(path, value, normalize_record, problems, result.raw, "conversations", copy))
        return out if self._accept(snap, path, copy, result.raw, problems, bool(out)) else []

    @staticmethod
    def _shard_info(host: str, value: dict, entries: int) -> ShardInfo:
        try:
            clock = Stamp.decode(value.get("clock", "0:0"))
        except ValueError:
            clock = ZERO
        written, fmt = value.get("written"), value.get("format")
        return ShardInfo(
            host=host,
            name=str(value.get("name") or host),
            clock=clock,
            written_ms=written if isinstance(written, int) and not isinstance(written, bool) else 0,
            format=fmt if isinstance(fmt, int) and not isinstance(fmt, bool) else 0,
            entries=entries,
        )

    def conversation(self, session_id: str) -> Conversation | None:
        return self.read().get(check_session_id(session_id))

    def setting(self, key: str, default: Any = None) -> Any:
        record = self.read().settings.get(key)
        return default if record is None else record.value

    # ------------------------------------------------------------------ clock

    def _clock_path(self) -> Path:
        return self.clocks_dir / f"{self.host}.json"

    def _next_stamp(self, seen: Stamp) -> Stamp:
        """Issue a stamp (call under the host lock). Persisted so it never repeats or goes back."""
        path = self._clock_path()
        try:
            previous = Stamp.decode(json.loads(path.read_text())["hlc"])
        except (OSError, ValueError, KeyError, TypeError):
            previous = ZERO
        stamp = tick(previous, self.now(), seen)
        atomic_write(path, json.dumps({"hlc": stamp.encode()}) + "\n", durable=False)
        return stamp

    # ------------------------------------------------------------------ writing conversations

    def _writable(self) -> None:
        if self.read_only:
            raise StoreError("this store was opened read-only")

    def _write(self, change: Callable[[Stamp], tuple[dict[str, Record], dict[str, Setting]]]) -> Snapshot:
        """Read everything, merge ``change`` in, write this host's shard and the view (under the lock).

        The shard holds this host's own writes, plus legacy entries it upgraded (so they survive
        even if the view is replaced); the view holds every live entry of the merged whole.
        """
        self._writable()
        with self.lock():
            got = self._read()
            snap = got.snap
            own = snap.shards.get(self.host)
            if own is not None and own.format > SHARD_FORMAT:
                raise StoreError(
                    f"{self.shard_path()} was written by a newer subconscious (format {own.format}); "
                    "upgrade subconscious on this machine"
                )
            stamp = self._next_stamp(snap.newest)
            conv_change, setting_change = change(stamp)
            raw_change = {k: r.to_json() for k, r in conv_change.items()}
            # every winning version must live in some shard: adopt those found only in the view
            # (legacy, upstream-written) or in conflict copies, so they survive folding and races
            adopt = {k: v for k, v in snap.raw.items() if got.shard_convs.get(k) != v}
            adopt_sets = {k: v for k, v in snap.settings.items() if got.shard_settings.get(k) != v}
            now = self.now()
            merged = prune_raw_tombstones(merge_raw([snap.raw, raw_change]), now, self.retention_ms)
            settings = merge_maps([snap.settings, setting_change])
            # this shard: the merged winner of every key it held, adopted or changed — so shards converge
            # too, a resolved race does not linger as two hosts' versions, and a pruned key leaves it
            own_keys = got.own_convs.keys() | adopt.keys() | raw_change.keys()
            own_convs = {k: merged[k] for k in own_keys if k in merged}
            own_settings = {k: settings[k] for k in got.own_settings.keys() | adopt_sets.keys() | setting_change.keys()}
            snap = Snapshot(merged, settings, snap.shards, snap.problems, max(snap.newest, stamp), snap.copies)
            shard = {
                "format": SHARD_FORMAT,
                "host": self.host,
                "name": self.host_name,
                "clock": stamp.encode(),
                "written": now,
                "conversations": own_convs,
                "settings": {k: v.to_json() for k, v in own_settings.items()},
            }
            ensure_dir(self.home / HOSTS)
            atomic_write(self.shard_path(), dumps_canonical(shard, expand=2))
            snap.shards[self.host] = self._shard_info(self.host, shard, len(own_convs))
            live = {k: v for k, v in merged.items() if v.get("deleted") is not True}
            atomic_write(self.view_path, dumps_canonical(live, expand=1))
            copies.fold(snap.copies, self.home, self.host)  # their content is durably in our shard now
            return snap

    def put_conversation(self, session_id: str, conversation_id: str, agent_id: str | None) -> Conversation:
        check_session_id(session_id)
        if not isinstance(conversation_id, str) or not conversation_id:
            raise StoreError("a conversation id is required")
        made: list[Conversation] = []

        def change(stamp: Stamp):
            entry = Conversation(conversation_id, agent_id, stamp, self.host)
            made.append(entry)
            return {session_id: entry}, {}

        self._write(change)
        return made[0]

    def delete_conversation(self, session_id: str) -> None:
        check_session_id(session_id)
        self._write(lambda stamp: ({session_id: Tombstone(stamp, self.host)}, {}))

    def put_setting(self, key: str, value: Any) -> None:
        json.dumps(value)  # must be JSON
        self._write(lambda stamp: ({}, {key: Setting(value, stamp, self.host)}))

    def refresh(self) -> Snapshot:
        """Rewrite this host's shard and the view from everything readable (upgrades legacy entries),
        and remove temp files that killed writers left behind."""
        snap = self._write(lambda stamp: ({}, {}))
        self.sweep_temp()
        return snap

    def fold_all(self) -> dict[str, int]:
        """Fold every conflict copy in the home (the watcher's and ``doctor --fix``'s job)."""
        before = self.read().copies
        self.refresh()
        names = copies.listdir(self.home)
        sessions = {c.original for c in copies.find(names, "root") if c.original != CONVERSATIONS}
        listing = frozenset(names)
        for name in copies.ambiguous_copies(names):  # OneDrive's session-<id>-<PC>.json is also a valid name
            found = classify(name, listing, where="root", include_ambiguous=True)
            if isinstance(found, ConflictCopy):
                sessions.add(found.original)
        folded_sessions = 0
        for name in sorted(sessions):
            sid = name[len("session-") : -len(".json")]
            if is_session_id(sid):
                folded_sessions += len(self.fold_session(sid))
        return {"conversations": len(before), "sessions": folded_sessions}

    def sweep_temp(self, max_age_s: float = 600.0) -> list[Path]:
        """Delete our atomic-write temp files older than ``max_age_s`` (orphans of killed writers)."""
        import time

        removed = []
        horizon = time.time() - max_age_s
        for directory in (self.home, self.home / HOSTS):
            try:
                entries = list(os.scandir(directory))
            except FileNotFoundError:
                continue
            for entry in entries:
                if entry.name.startswith(TEMP_PREFIX) and entry.is_file(follow_symlinks=False):
                    try:
                        if entry.stat(follow_symlinks=False).st_mtime <= horizon:
                            os.unlink(entry.path)
                            removed.append(Path(entry.path))
                    except FileNotFoundError:
                        pass
        return removed

def open_store(home: Path, host: str, local_root: Path, **kw: Any) -> Store:
    """A store for ``home`` with machine-local locks and clocks under ``local_root``."""
    return Store(home, host, Path(local_root) / "locks", Path(local_root) / "clocks", **kw)


