"""The state store: read → plan → apply on the shared state directory, redone when it loses a race.

Layout of ``$LETTA_HOME/.letta/claude/``::

    conversations.json            merged view, upstream-readable: {session_id: {conversationId, agentId, hlc, host}}
    session-<id>.json             one session's merged state, upstream-readable (upstream's format + host, hlc)
    hosts/<host>.json             this host's shard: its entries, tombstones and settings
    hosts/<host>/session-<id>.json  this host's version of a session
    quarantine/, backups/         bytes set aside, conflict copies folded — kept until gc prunes them by age

No lock can span hosts, and none is needed: every host writes only its own shard files (its processes
take the machine-local host lock), and every reader merges all shards. The two views are written by
everyone — other hosts, sync engines, upstream's plugin — so they are published with
:func:`~subconscious.state.publish.publish`, which never throws away a version it did not merge: a
write that finds someone else's version there is redone with it as one more source. A view is
therefore never the only place a write of ours lives; what upstream writes into it is adopted (and
stamped) into the next writer's shard.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable

from . import copies
from .clock import ZERO, Stamp, tick, wall_ms
from .conflicts import ConflictCopy, classify, is_original
from .files import Problem
from .fs import FS, REAL
from .ids import check_session_id, is_host_id, is_session_id
from .locks import DEFAULT_TIMEOUT
from .merge import max_stamp, merge_maps, merge_raw
from .order import same_json
from .order import wins as order_wins
from .plan import FLOOR_SETTING, below_floor, plan_conversations, view_versions
from .publish import DISPLACED, displaced_names, displaced_original, publish, settle_displaced
from .records import (
    Conversation,
    Record,
    RecordError,
    Setting,
    Tombstone,
    later,
    normalize_record,
    parse_record,
    parse_setting,
    raw_stamp,
)
from .sessions import SessionFiles, session_file_name
from .files import fit_name
from .sources import Read, Reader, Source, copy_source
from .textforms import TEMP_PREFIX
from .viewlines import ViewLines, member_lines, read_against, render_shard, render_view, shard_against

__all__ = ["Snapshot", "ShardInfo", "Store", "StoreError", "open_store", "session_file_name"]

CONVERSATIONS = "conversations.json"
HOSTS = "hosts"
BACKUPS = "backups"
SHARD_FORMAT = 1
DAY_MS = 86_400_000
TOMBSTONE_RETENTION_MS = 90 * DAY_MS
MAX_REDO = 16
HEARTBEAT_MS = DAY_MS  # a host's shard is rewritten at least this often while the host writes anything

log = logging.getLogger("subconscious")


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
    folded: list[Path] = field(default_factory=list)  # where a write filed the copies it merged (backups/)

    @cached_property
    def conversations(self) -> dict[str, Record]:
        return {k: parse_record(v) for k, v in self.raw.items()}

    @cached_property
    def live(self) -> dict[str, Conversation]:
        return {k: r for k, r in self.conversations.items() if isinstance(r, Conversation)}

    def get(self, session_id: str) -> Conversation | None:
        value = self.raw.get(session_id)
        return None if value is None or value.get("deleted") is True else parse_record(value)  # type: ignore[return-value]


@dataclass
class _Read:
    """One read of everything the conversations map lives in."""

    snap: Snapshot
    own_convs: dict[str, dict]
    own_settings: dict[str, Setting]
    shard_convs: dict[str, dict]  # the real shards' merged conversations
    shard_settings: dict[str, Setting]
    own_raw: bytes | None = None  # this host's shard as read (what a publish expects)
    view_raw: bytes | None = None
    sources: list[dict[str, dict]] = field(default_factory=list)  # every map read (for pruning)
    shard_clocks: list[Stamp] = field(default_factory=list)
    displaced: list[Read] = field(default_factory=list)
    folds: list[Read] = field(default_factory=list)  # conflict copies to fold once merged
    view_lines: ViewLines | None = None  # the view's entry lines, once it was read clean
    floor: Stamp = ZERO  # the tombstone prune floor


def floor_of(settings: dict[str, Setting]) -> Stamp:
    record = settings.get(FLOOR_SETTING)
    try:
        return Stamp.decode(record.value) if record is not None else ZERO
    except ValueError:
        return ZERO


class Store:
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
        fs: FS = REAL,
    ):
        self.home = Path(home)
        self.host = host
        self.host_name = host_name or host
        self.locks_dir, self.clocks_dir = Path(locks_dir), Path(clocks_dir)
        self.lock_timeout = lock_timeout
        self.now = now
        self.retention_ms = retention_ms
        self.read_only = read_only  # report problems without setting anything aside; refuse writes
        self.fs = fs = fs.confined(self.home)
        self.reader = Reader(fs, self.home, host, keep=not read_only)
        self.session_files = SessionFiles(self)
        self.retiring: frozenset[str] = frozenset()  # hosts whose files are being retired (read as copies)

    # ------------------------------------------------------------------ paths

    @property
    def view_path(self) -> Path:
        return self.home / CONVERSATIONS

    def shard_path(self, host: str | None = None) -> Path:
        return self.home / HOSTS / f"{host or self.host}.json"

    def lock(self):
        return self.fs.lock(self.locks_dir, self.host, self.lock_timeout)

    # ------------------------------------------------------------------ reading

    def _parse_map(self, read: Read, raw_map: Any, parse, what: str, known: dict | None = None) -> dict:
        """``known``: entries already validated (a canonical view's, see viewlines.ViewLines): an equal
        entry (all its fields are strings, so equal as JSON) is taken as it is."""
        if not isinstance(raw_map, dict):
            self.reader.wrong(read, "wrong-type", f"{what} is not a JSON object")
            return {}
        if known is not None:
            others = {k: v for k, v in raw_map.items() if known.get(k) != v}
            if not others:
                return dict(raw_map)
            checked = self._parse_map(read, others, parse, what)
            return {k: checked[k] if k in others else v for k, v in raw_map.items() if k not in others or k in checked}
        out, bad = {}, []
        for key, value in raw_map.items():
            try:
                if what == "conversations" and not is_session_id(key):
                    raise RecordError("not a valid session id")
                out[key] = parse(value)
            except (RecordError, ValueError, TypeError) as exc:
                bad.append(f"{str(key)[:60]!r}: {exc}")
        if bad:
            more = f" (+{len(bad) - 3} more)" if len(bad) > 3 else ""
            self.reader.wrong(read, "invalid-entry", f"skipped {len(bad)} invalid {what} entries: "
                              + "; ".join(bad[:3]) + more)
        return out

    def _shard_names(self, names: list[str]) -> list[str]:
        return sorted(n for n in names if n.endswith(".json") and is_host_id(n[:-5]) and is_original(n, where="hosts"))

    def read(self) -> Snapshot:
        """Merge the view and every host's shard. Takes no lock."""
        return self._read().snap

    def _accept(self, got: _Read, read: Read, ok: bool) -> bool:
        """Record what reading one source found. A weak-name copy whose content is not ours is ignored
        altogether (it is some other file that happens to look like a copy)."""
        if read.source.weak and (read.problems or not ok):
            return False
        got.snap.problems += read.problems
        return True

    def _read_shard(self, got: _Read, source: Source) -> list[tuple[dict, dict, dict]]:
        lines = got.view_lines if got.view_lines is not None and got.view_lines.canonical else None
        # a shard mostly repeats the canonical view line for line: its entries are the view's, parsed once
        read = self.reader.read(source, None if lines is None else (lambda raw: shard_against(raw, lines)))
        out = []
        for value in read.values:
            owner = source.owner
            if not isinstance(value, dict) or (source.weak and value.get("host") != owner):
                self.reader.wrong(read, "wrong-type", "not a shard of ours")
                continue
            if read.quick:  # every entry is the canonical view's (validated there)
                convs = value["conversations"]
            else:
                known = lines.value if lines is not None else None
                convs = self._parse_map(read, value.get("conversations", {}), normalize_record, "conversations", known)
            sets = self._parse_map(read, value.get("settings", {}), parse_setting, "settings")
            out.append((convs, sets, value))
        if not self._accept(got, read, bool(out)):
            return []
        if source.kind == "shard" and source.owner == self.host:
            got.own_raw = read.raw
        if source.foldable and read.raw:
            got.folds.append(read)
            got.snap.copies.append(copies.Found(source.path, source.copy, read.raw))
        if source.kind == "displaced" and read.raw is not None:
            got.displaced.append(read)
        return out

    def _read_root(self, got: _Read, writing: bool = False) -> list[tuple[Source, Read]]:
        """Read the view, then list the directory, then read the view's displaced versions and copies.

        The order is the order in which content moves (a publish swaps the view's version out to a
        displaced name; a fold files a copy away only after its content is in a shard, which is read
        after this): so whatever a writer moves while we read is seen at least once."""
        view = Source(self.view_path, "view")
        first = self.reader.read(view)
        names = self.fs.listdir(self.home)
        others = [Source(self.home / n, "displaced") for n in displaced_names(names, CONVERSATIONS)]
        others += [copy_source(self.home / c.name, c) for c in copies.find(names, "root", CONVERSATIONS)]
        if len(first.values) == 1 and not first.problems and first.raw is not None:
            # a canonical view validates the shards' equal entries and gives a write its unchanged lines
            # (a plain read with nothing else to read against does not pay for that check)
            if others or writing:
                got.view_lines = member_lines(first.raw, first.values[0], canonical_only=not others)
        lines = got.view_lines
        # a copy or displaced version mostly repeats the view: read only the lines the view lacks
        hook = None if lines is None else (lambda raw: read_against(raw, lines))
        return [(view, first), *((source, self.reader.read(source, hook)) for source in others)]

    def _read_view(self, got: _Read, source: Source, read: Read, shard_maps: dict[str, dict], from_shards: dict,
                   floor: Stamp) -> dict[str, dict]:
        merged: dict[str, dict] = {}
        maps = []
        for value in read.values:
            if isinstance(value, dict):  # the view mostly repeats the shards: validate only what differs
                value = {k: v for k, v in value.items() if (w := from_shards.get(k)) is not v and w != v}
            maps.append(self._parse_map(read, value, normalize_record, "conversations"))
        if not self._accept(got, read, bool(maps) or not read.values):
            return {}
        for m in maps:
            if source.upstream_writable:
                m = view_versions(m, shard_maps, from_shards)
            merged = merge_raw([merged, below_floor(m, floor, keep_unstamped=source.upstream_writable)])
        if source.kind == "view":
            got.view_raw = read.raw
        elif source.kind == "displaced" and read.raw is not None:
            got.displaced.append(read)
        elif source.foldable and read.raw:
            got.folds.append(read)
            got.snap.copies.append(copies.Found(source.path, source.copy, read.raw))
        got.sources.append(merged)
        return merged

    def _names_host(self, path: Path, original: str) -> bool:
        """Does the shard file at ``path`` say it belongs to the host of ``original`` (``<host>.json``)?"""
        got = self.fs.read(path)
        try:
            value = json.loads(got.data) if got.ok else None
        except (ValueError, RecursionError):
            return False
        return isinstance(value, dict) and value.get("host") == original[: -len(".json")]

    def _read(self, writing: bool = False) -> _Read:
        """The merged snapshot, this host's own shard, and what the real shards alone say (so a
        writer can adopt versions that live only in the view or in conflict copies)."""
        got = _Read(Snapshot(), {}, {}, {}, {})
        snap = got.snap
        root_reads = self._read_root(got, writing)  # before the shards: see _read_root
        hosts_dir = self.home / HOSTS
        host_names = self.fs.listdir(hosts_dir)
        host_copies = [c for c in copies.find(host_names, "hosts", include_ambiguous=True)
                       if not c.ambiguous or self._names_host(hosts_dir / c.name, c.original)]
        copy_names = {c.name for c in host_copies}
        shard_maps: dict[str, dict] = {}
        shard_sets: list[dict[str, Setting]] = []
        extra_shards: list[tuple[Source, list]] = []
        for name in self._shard_names(host_names):
            if name in copy_names:  # e.g. OneDrive's "<host>-<PC>.json" holding <host>'s shard
                continue
            host = name[:-5]
            if host in self.retiring:
                source = Source(hosts_dir / name, "copy", owner=host)
                extra_shards.append((source, self._read_shard(got, source)))
                continue
            for convs, sets, value in self._read_shard(got, Source(hosts_dir / name, "shard", owner=host)):
                shard_maps[host] = merge_raw([shard_maps.get(host, {}), convs])
                shard_sets.append(sets)
                info = self._shard_info(host, value, len(convs))
                snap.shards[host] = info
                got.shard_clocks.append(info.clock)
                if host == self.host:
                    got.own_convs = merge_raw([got.own_convs, convs])
                    got.own_settings = merge_maps([got.own_settings, sets])
        for copy in host_copies:
            source = copy_source(hosts_dir / copy.name, copy, copy.original[:-5])
            extra_shards.append((source, self._read_shard(got, source)))
        for name in host_names:
            original = displaced_original(name)
            if original is not None and original.endswith(".json"):
                source = Source(hosts_dir / name, "displaced", owner=original[:-5])
                extra_shards.append((source, self._read_shard(got, source)))
        from_shards = merge_raw(shard_maps.values())
        got.shard_settings = merge_maps(shard_sets)
        extra_sets = [sets for _, found in extra_shards for _, sets, _ in found]
        snap.settings = merge_maps([got.shard_settings, *extra_sets])
        # the floor only rises: the largest any source holds (two hosts pruning at once both count)
        floor = got.floor = max((floor_of(sets) for sets in [*shard_sets, *extra_sets]), default=ZERO)
        # a shard that has not written since the floor was set (restored, or back from retirement)
        # cannot bring back what was deleted before it
        stale = [h for h, info in snap.shards.items() if info.clock < floor]
        for host in stale:
            shard_maps[host] = below_floor(shard_maps[host], floor, keep_unstamped=False)
        if stale:
            from_shards = merge_raw(shard_maps.values())
        got.sources = list(shard_maps.values())
        extras = [below_floor(convs, floor, keep_unstamped=False)
                  for _, found in extra_shards for convs, _, _ in found]
        got.sources += extras
        for source, read in root_reads:
            extras.append(self._read_view(got, source, read, shard_maps, from_shards, floor))
        snap.raw = merge_raw([from_shards, *extras])
        got.shard_convs = from_shards
        # a shard's versions are never newer than its clock (a writer ticks past all it read), so only
        # what came from elsewhere (views, copies) and shards whose clock is unreadable are looked at
        # entry by entry: not 100,000 stamps on every write of a large home
        unclocked = [shard_maps[h] for h, info in snap.shards.items() if info.clock == ZERO and h in shard_maps]
        snap.newest = max(
            max((raw_stamp(v) for m in [*extras, *unclocked] for v in m.values()), default=ZERO),
            max_stamp(snap.settings.values()),
            max((s.clock for s in snap.shards.values()), default=ZERO),
        )
        return got

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
        return self._next_stamps(seen, 1)[0]

    def _next_stamps(self, seen: Stamp, n: int) -> list[Stamp]:
        """Issue ``n`` increasing stamps after ``seen`` and this host's last one (one clock write)."""
        path = self._clock_path()
        got = self.fs.read(path)
        try:
            previous = Stamp.decode(json.loads(got.data)["hlc"]) if got.ok else ZERO
        except (ValueError, KeyError, TypeError, RecursionError):
            previous = ZERO
        now = self.now()
        stamps = [tick(previous, now, seen)]
        while len(stamps) < n:
            stamps.append(tick(stamps[-1], now))
        self.fs.makedirs(self.clocks_dir)
        self.fs.write_atomic(path, (json.dumps({"hlc": stamps[-1].encode()}) + "\n").encode(), durable=False)
        return stamps

    # ------------------------------------------------------------------ writing conversations

    def _writable(self) -> None:
        if self.read_only:
            raise StoreError("this store was opened read-only")

    def _write(self, change: Callable[[Stamp], tuple[dict[str, Record], dict[str, Setting]]]) -> Snapshot:
        """Read everything, plan, publish this host's shard and then the view (under the host lock);
        redone from a fresh read whenever a publish finds a version it did not merge."""
        self._writable()
        with self.lock():
            for attempt in range(MAX_REDO):
                snap, redo = self._write_once(change)
                if not redo:
                    return snap
            log.warning("state: %s kept changing while this host wrote it (%d tries); this host's shard "
                        "holds the write, the view catches up on the next write", self.view_path, MAX_REDO)
            return snap

    def _write_once(self, change) -> tuple[Snapshot, bool]:
        got = self._read(writing=True)
        snap = got.snap
        own = snap.shards.get(self.host)
        if own is not None and own.format > SHARD_FORMAT:
            raise StoreError(
                f"{self.shard_path()} was written by a newer subconscious (format {own.format}); "
                "upgrade subconscious on this machine"
            )
        # two stamps: versions stamped when first seen (upstream's, legacy) get the first, this write's
        # own change the second — so a change made right after upstream's write of the same key wins
        adopt_stamp, stamp = self._next_stamps(snap.newest, 2)
        conv_change, setting_change = change(stamp)
        now = self.now()
        plan = plan_conversations(
            winners=snap.raw, shard_winners=got.shard_convs, own=got.own_convs,
            change={k: r.to_json() for k, r in conv_change.items()}, stamp=adopt_stamp, host=self.host,
            sources=got.sources, shard_clocks=got.shard_clocks, now_ms=now, retention_ms=self.retention_ms,
        )
        if plan.pruned or got.floor > floor_of(snap.settings):
            floor = max([got.floor, *plan.pruned.values()])
            setting_change = {**setting_change, FLOOR_SETTING: Setting(floor.encode(), stamp, self.host)}
        adopt_sets = {k: v for k, v in snap.settings.items() if got.shard_settings.get(k) != v}
        settings = merge_maps([snap.settings, setting_change])
        own_settings = {k: settings[k] for k in got.own_settings.keys() | adopt_sets.keys() | setting_change.keys()}
        shard = {
            "format": SHARD_FORMAT,
            "host": self.host,
            "name": self.host_name,
            "clock": stamp.encode(),
            "written": now,
            "conversations": plan.own,
            "settings": {k: v.to_json() for k, v in own_settings.items()},
        }
        self.fs.makedirs(self.home / HOSTS)
        result = Snapshot(plan.merged, settings, dict(snap.shards), snap.problems, max(snap.newest, stamp), snap.copies)
        if self._shard_unchanged(own, got, plan.own, own_settings, conv_change or setting_change, now):
            result.shards[self.host] = own  # nothing new for it: not rewritten (see _shard_unchanged)
        else:
            result.shards[self.host] = self._shard_info(self.host, shard, len(plan.own))
            out = publish(self.fs, self.shard_path(), render_shard(shard, got.view_lines), got.own_raw, shared=False)
            if out.redo:
                return result, True
        out = publish(self.fs, self.view_path, render_view(plan.view, got.view_lines), got.view_raw)
        if out.redo:
            return result, True
        # everything read is durably in this host's shard now
        result.folded = self._fold(got.folds)
        self._settle(got.displaced)
        return result, False

    def _shard_unchanged(self, own: ShardInfo | None, got: _Read, convs: dict, settings: dict, changed,
                         now: int) -> bool:
        """A write with no change of its own (a refresh, a fold) leaves this host's shard alone when it
        would only get a new clock: every rewrite is a new version for the sync engine, and hosts that
        refresh in a loop (watchers) would keep a mesh of replicas from ever agreeing. Once a day it is
        rewritten anyway, so a live host's clock and ``written`` keep moving (pruning and doctor's
        stale-shard finding go by them)."""
        if changed or own is None or got.own_raw is None or now - own.written_ms > HEARTBEAT_MS:
            return False
        if own.name != self.host_name or own.format != SHARD_FORMAT:
            return False
        return (same_json(convs, got.own_convs)
                and same_json({k: v.to_json() for k, v in settings.items()},
                              {k: v.to_json() for k, v in got.own_settings.items()}))

    def _settle(self, displaced: list[Read]) -> None:
        by_dir: dict[Path, dict[str, bytes]] = {}
        for read in displaced:
            if read.raw is not None and read.values and not read.problems:  # parsed whole (see settle_displaced)
                by_dir.setdefault(read.source.path.parent, {})[read.source.path.name] = read.raw
        for directory, merged in by_dir.items():
            settle_displaced(self.fs, directory, sorted(merged), merged)

    def _backup_dir(self) -> Path:
        """Where this host files what it folded today: ``backups/<date>/<host>/``."""
        return self.home / BACKUPS / time.strftime("%Y-%m-%d", time.gmtime()) / self.host

    def _fold(self, found: list[Read]) -> list[Path]:
        """Move conflict copies whose content is now part of the merged state into
        ``backups/<date>/<host>/``: moved first, then checked, so a copy rewritten meanwhile is put
        back to be merged next time, never filed away unmerged."""
        moved: list[Path] = []
        if not found:
            return moved
        target_dir = self._backup_dir()
        self.fs.makedirs(target_dir)
        for read in found:
            path = read.source.path
            name = path.name if path.parent == self.home else f"{path.parent.name}__{path.name}"
            target = target_dir / fit_name(name)
            if self.fs.read(target).status != "missing":
                target = target_dir / (fit_name(name, 200) + f".{time.time_ns()}")
            if not self.fs.rename(path, target):
                continue  # another host folded it first
            got = self.fs.read(target)
            if got.ok and got.data == read.raw:
                moved.append(target)
            elif self.fs.link(target, path):  # it changed between our read and the move
                self.fs.unlink(target)
            else:
                log.warning("state: %s changed while it was folded and its name is taken again; "
                            "its bytes are kept in %s", path, target)
        return moved

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
        return made[-1]

    def delete_conversation(self, session_id: str) -> None:
        check_session_id(session_id)
        self._write(lambda stamp: ({session_id: Tombstone(stamp, self.host)}, {}))

    def put_setting(self, key: str, value: Any) -> None:
        json.dumps(value)  # must be JSON
        self._write(lambda stamp: ({}, {key: Setting(value, stamp, self.host)}))

    def retire_conversations(self, session_ids: list[str], floor: Stamp) -> list[str]:
        """Tombstone the live entries of ``session_ids`` still stamped below ``floor`` (gc: one write for all
        of them; an entry written again since the plan was made is activity and stays). Returns the keys."""
        self._writable()
        done: list[str] = []
        with self.lock():
            snap = self.read()

            def change(stamp: Stamp):
                done[:] = [k for k in session_ids if (r := snap.get(k)) is not None and r.stamp < floor]
                return {k: Tombstone(stamp, self.host) for k in done}, {}

            if any((r := snap.get(k)) is not None and r.stamp < floor for k in session_ids):
                self._write(change)
        return done

    def merge_in(self, conversations: dict[str, dict], settings: dict[str, Setting]) -> dict[str, int]:
        """Merge versions from elsewhere (an archive) with their own stamps: each wins only where it is
        newer than what the home holds, by the one order, so merging the same versions twice is merging
        them once. Versions below the home's prune floor are dropped (a delete stays a delete), and so is
        the floor setting itself (it belongs to this home's pruning). Returns counts."""
        self._writable()
        counts = {"conversations": 0, "settings": 0, "older": 0}
        with self.lock():
            snap = self.read()
            floor = floor_of(snap.settings)
            records = {}
            for key, value in conversations.items():
                check_session_id(key)
                have = snap.raw.get(key)
                record = parse_record(value)
                if record.stamp < floor or (have is not None and order_wins(have, record.to_json())):
                    counts["older"] += 1
                    continue
                records[key] = record
            sets = {}
            for key, setting in settings.items():
                have = snap.settings.get(key)
                if key == FLOOR_SETTING or (have is not None and (have == setting or later(have, setting))):
                    continue
                sets[key] = setting
            counts["conversations"], counts["settings"] = len(records), len(sets)
            if records or sets:
                self._write(lambda stamp: (records, sets))
        return counts

    def refresh(self) -> Snapshot:
        """Rewrite this host's shard and the view from everything readable (upgrades legacy entries),
        and remove temp files that killed writers left behind."""
        snap = self._write(lambda stamp: ({}, {}))
        self.sweep_temp()
        return snap

    def fold_all(self) -> dict[str, int]:
        """Fold every conflict copy in the home (the watcher's and ``doctor --fix``'s job)."""
        before = self.refresh().copies  # one read of everything: the write's own (100,000 entries: ~0.5 s)
        names = self.fs.listdir(self.home)
        sessions = {c.original for c in copies.find(names, "root") if c.original != CONVERSATIONS}
        listing = frozenset(names)
        for name in copies.ambiguous_copies(names):  # OneDrive's session-<id>-<PC>.json is also a valid name
            found = classify(name, listing, where="root", include_ambiguous=True)
            if isinstance(found, ConflictCopy):
                sessions.add(found.original)
        sessions |= {o for n in names if (o := displaced_original(n)) is not None}
        sids = {n[len("session-"):-len(".json")] for n in sessions if n.startswith("session-") and n.endswith(".json")}
        sids |= set(self.session_files.ids_without_view(names))
        folded_sessions = 0
        for sid in sorted(sids):
            if is_session_id(sid):
                folded_sessions += len(self.fold_session(sid))
        return {"conversations": len(before), "sessions": folded_sessions}

    def sweep_temp(self, max_age_s: float = 600.0) -> list[Path]:
        """Delete our atomic-write temp files older than ``max_age_s`` (orphans of killed writers).
        Displaced versions are sources, not orphans: they go only once merged (see :mod:`.publish`)."""
        removed = []
        horizon = self.fs.now() - max_age_s
        dirs = [self.home, self.home / HOSTS]
        dirs += [self.home / HOSTS / n for n in self.fs.listdir(self.home / HOSTS) if is_host_id(n) and not n.endswith(".json")]
        for directory in dirs:
            for name in self.fs.listdir(directory):
                if not name.startswith(TEMP_PREFIX):
                    continue
                path = directory / name
                mtime = self.fs.mtime(path)
                if mtime is None or mtime > horizon:
                    continue
                got = self.fs.read(path)
                if name.startswith(DISPLACED):
                    # a source while it parses (a write merges and removes it); half written and this old,
                    # nobody is still writing it: its bytes go to quarantine/, it goes
                    if not got.ok or not got.data.strip():
                        pass
                    elif self.reader.read(Source(path, "view")).values:
                        continue
                    else:
                        self.reader.aside(Source(path, "view"), got.data, "unparseable")
                if got.status in ("ok", "missing") and self.fs.unlink(path):
                    removed.append(path)
        return removed

    def retire_host(self, host: str) -> list[Path]:
        """Retire another host's shard files (a machine gone, or a host id replaced on the same machine):
        everything they hold is adopted into this host's files first, then they are moved to backups/.
        Until a shard is retired, tombstones for keys it could hold are never pruned."""
        if host == self.host:
            raise StoreError("a host cannot retire itself")
        self._writable()
        with self.lock():
            self.retiring = frozenset({host})
            try:
                if (session_floor := self.session_files.floor()) != ZERO:
                    self.session_files.raise_floor(session_floor)  # its floor file goes to backups/ with it
                moved = list(self.refresh().folded)
                for sid in self.session_files.ids_of_host(host):
                    moved += self.session_files.fold(sid)
                leftover = self.home / HOSTS / host
                for name in self.fs.listdir(leftover):  # displaced or temp leftovers of a gone host
                    target = self._backup_dir() / f"{host}__{name}"
                    self.fs.makedirs(target.parent)
                    self.fs.rename(leftover / name, target)
                return moved
            finally:
                self.retiring = frozenset()

    # ------------------------------------------------------------------ sessions (composed)

    def session_path(self, session_id: str) -> Path:
        return self.home / session_file_name(session_id)

    def session_floor(self) -> Stamp:
        return self.session_files.floor()

    def session_ids(self, names: list[str] | None = None) -> list[str]:
        return self.session_files.ids(names)

    def sessions(self):
        return self.session_files.all()

    def _read_session(self, session_id: str, names: list[str] | None = None):
        return self.session_files.read(session_id, names)

    def session(self, session_id: str):
        return self.session_files.read(session_id)[0]

    def session_problems(self, session_id: str) -> list[Problem]:
        return self.session_files.read(session_id)[1]

    def update_session(self, session_id: str, change):
        return self.session_files.update(session_id, change)

    def fold_session(self, session_id: str) -> list[Path]:
        return self.session_files.fold(session_id)


def open_store(home: Path, host: str, local_root: Path, **kw: Any) -> Store:
    """A store for ``home`` with machine-local locks and clocks under ``local_root``."""
    return Store(home, host, Path(local_root) / "locks", Path(local_root) / "clocks", **kw)
