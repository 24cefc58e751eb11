"""Writing the store: this host's clock, and a write (read → plan → publish this host's shard, then the
view), redone from a fresh read when a publish finds a version it did not merge; conflict copies merged by
a write are filed into ``backups/`` (a mixin of :class:`~.store.Store`).
"""

from __future__ import annotations

import json
import logging
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable

from ..bounds import SETTING_AHEAD, ahead_map, ahead_record, demote_named, outgrown
from ..clock import ZERO, Stamp, bound, follow_limit, tick
from ..files import fit_name
from ..ids import check_session_id, is_session_id
from ..merge import merge_maps
from ..order import record_of, same_json
from .plan import FLOOR_SETTING, legacy_adopted, plan_conversations
from ..publish import publish, settle_displaced, whole
from ..records import Conversation, Record, Setting, Tombstone
from .snapshot import (
    BACKUPS,
    HOSTS,
    HEARTBEAT_MS,
    MAX_REDO,
    SHARD_FORMAT,
    ShardInfo,
    Snapshot,
    StoreError,
    _Read,
    floor_of,
)
from ..sources import Read
from ..conflicts.viewlines import render_shard, render_view
from ..viewlock import BUSY, BUSY_MEMORY_S, LEASE_WAIT_S, pending_path, view_lock

log = logging.getLogger("subconscious")

TORN_WRITE_S = 5.0  # a torn view changed this recently may be an in-place write still going on ...
TORN_WAIT_S, TORN_POLLS = 0.01, 5  # ... and is given this long to change (upstream's write takes ms)


class Writing:
    """The write side of :class:`~.store.Store`."""

    # ------------------------------------------------------------------ clock

    def _clock_path(self) -> Path:
        return self.clocks_dir / f"{self.host}.json"

    def _next_stamp(self, seen: Stamp) -> Stamp:
        """Issue a stamp (call under the host lock). Persisted so it never repeats or goes back."""
        return self._next_stamps(seen, 1, follow=True)[0]

    def _next_stamps(self, seen: Stamp, n: int, follow: bool = False) -> list[Stamp]:
        """Issue ``n`` increasing stamps after ``seen`` and this host's last one (one clock write), following
        neither beyond :func:`~.clock.follow_limit` (a write of the conversations map records what it
        replaces from beyond it: see _ahead) unless ``follow`` (a session version, which has no ahead
        record yet: it follows up to the bound as before)."""
        path = self._clock_path()
        got = self.fs.read(path)
        try:
            previous = Stamp.decode(json.loads(got.data)["hlc"]) if got.ok else ZERO
        except (ValueError, KeyError, TypeError, RecursionError):
            previous = ZERO
        now = self.now()
        limit = bound(now)
        if previous > limit:  # pinned by a stamp from beyond the bound before this check existed
            log.warning("state: this host's clock %s is beyond its wall clock + 24 h; it starts again from the "
                        "wall clock (versions stamped beyond that count as the oldest of their key)", previous)
            previous = ZERO
        # the clock never follows a stamp from beyond the bound (a read orders such versions as the oldest),
        # and a write of the conversations map none beyond the follow limit
        if not follow:
            limit = follow_limit(now)
            previous = min(previous, limit)
        stamps = [tick(previous, now, seen if seen <= limit else (limit if not follow else ZERO))]
        while len(stamps) < n:
            stamps.append(tick(stamps[-1], now))
        self.fs.makedirs(self.clocks_dir)
        self.fs.write_atomic(path, (json.dumps({"hlc": stamps[-1].encode()}) + "\n").encode(), durable=False)
        return stamps

    # ------------------------------------------------------------------ writing conversations

    def _writable(self) -> None:
        if self.read_only:
            raise StoreError("this store was opened read-only")

    views_busy: dict  # view -> when (monotonic) another holder last kept its lease for our whole wait

    def _view_lock(self, path: Path):
        """This host's turn at the shared view ``path`` among the hosts of its directory (see
        :mod:`..viewlock`): held from the read to the publish, so no other host's acknowledged write can
        vanish from the view behind a publish based on an older read."""
        return self._leased(path)

    @contextmanager
    def _leased(self, path: Path):
        """The lease on ``path``, waited for at most :data:`~.viewlock.LEASE_WAIT_S`: when another holder
        keeps it that long, ``path`` is *deferred* (:meth:`_deferred`) for this operation: its writes go to
        this host's files only, and the view is left to a write that gets the lease."""
        nested = str(path) in self.views_held
        wait = min(self.lock_timeout, self.lease_wait_s)
        busy_at = self.views_busy.get(str(path))
        if busy_at is not None and time.monotonic() - busy_at < BUSY_MEMORY_S:
            wait = 0.0  # kept by another holder a moment ago: a bulk write (gc, doctor --fix) waits once, not per item
        with view_lock(self.fs, path, self.host, self.views_held, wait_s=wait) as got:
            busy = got is BUSY
            if busy:
                self.views_deferred.add(str(path))
                if busy_at is None or time.monotonic() - busy_at >= BUSY_MEMORY_S:
                    self.views_busy[str(path)] = time.monotonic()
            elif got is True:
                self.views_busy.pop(str(path), None)
            try:
                yield got
            finally:
                if busy:
                    self.views_deferred.discard(str(path))
            if got is True and not nested:
                self._catch_up(path)

    def _catch_up(self, path: Path) -> None:
        """Before giving the lease on ``path`` back: a writer that gave up waiting for it meanwhile left
        ``path`` unpublished (its write is in its host's files, :meth:`_deferred`) and said so with a marker;
        the view is published again from everything, so it does not wait for the next write."""
        marker = pending_path(path)
        try:
            if self.fs.read(marker, cap=64).status == "missing" or not self.fs.unlink(marker):
                return
        except OSError as exc:  # not a marker of ours (a directory, a name we cannot remove): this write
            # published the view already, and no writer can leave a marker there
            log.warning("state: %s is not a marker of ours (%s: %s); left as it is", marker, type(exc).__name__, exc)
            return
        try:
            if path == self.view_path:
                for _ in range(MAX_REDO):
                    if not self._write_once(lambda stamp: ({}, {}))[1]:
                        break
            elif path.name.startswith("session-") and path.name.endswith(".json"):
                self.session_files.fold(path.name[len("session-"):-len(".json")])
        except Exception as exc:  # the operation itself is done and durable: never fail it for the view
            log.warning("state: %s could not be published for a writer that waited (%s: %s); the next "
                        "write publishes it", path, type(exc).__name__, exc)

    def _deferred(self, path: Path) -> bool:
        """Is the view ``path`` left for later by this operation (its lease stayed taken)?"""
        if str(path) in self.views_deferred:
            try:
                self.fs.create_new(pending_path(path), b"")  # the holder publishes it before letting go
            except OSError:
                pass
            log.warning("state: %s is left as it is: another writer kept its lease for %.1f s; this write is "
                        "in this host's files, and the next write that gets the lease publishes it", path,
                        self.lease_wait_s)
            return True
        return False

    def _write(self, change: Callable[[Stamp], tuple[dict[str, Record], dict[str, Setting]]]) -> Snapshot:
        """Read everything, plan, publish this host's shard and then the view (under the host lock);
        redone from a fresh read whenever a publish finds a version it did not merge."""
        self._writable()
        with self.lock(), self._view_lock(self.view_path):
            for attempt in range(MAX_REDO):
                snap, redo = self._write_once(change)
                if not redo:
                    return snap
            log.warning("state: %s kept changing while this host wrote it (%d tries); this host's shard "
                        "holds the write, the view catches up on the next write", self.view_path, MAX_REDO)
            return snap

    def _write_once(self, change) -> tuple[Snapshot, bool]:
        read_ms = self.now()  # legacy entries are as old as this read of them (plan.legacy_adopted)
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
        ahead, named = self._ahead(got, conv_change, adopt_stamp, setting_change, stamp)
        if named:  # what this write replaces from beyond the follow limit is older than it, for every reader
            snap.raw, got.shard_convs, got.own_convs = (demote_named(m, named) for m in
                                                        (snap.raw, got.shard_convs, got.own_convs))
            got.sources = [demote_named(m, named) for m in got.sources]
            snap.settings, got.shard_settings, got.own_settings = (_demote_settings(m, named) for m in (
                snap.settings, got.shard_settings, got.own_settings))
        plan = plan_conversations(
            winners=snap.raw, shard_winners=got.shard_convs, own=got.own_convs,
            change={k: r.to_json() for k, r in conv_change.items()}, stamp=adopt_stamp, host=self.host,
            sources=got.sources, shard_clocks=got.shard_clocks, now_ms=now, retention_ms=self.retention_ms,
            legacy_stamp=legacy_adopted(Stamp(max(0, read_ms), 0)),
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
        if ahead:
            held = {k: v["hlc"] for k, v in plan.own.items()}
            held.update((SETTING_AHEAD + k, v.stamp.encode()) for k, v in own_settings.items())
            ahead = outgrown(ahead, held)
        if ahead:
            shard["ahead"] = ahead
        own_record = record_of(got.own_adopted, is_session_id)
        adopted = record_of([own_record, plan.adopted, *got.carried_adopted], is_session_id)
        if adopted:  # upstream's versions this host adopted: seen unstamped again, they are old
            shard["adopted"] = adopted
        new_adoption = adopted != own_record or (bool(got.own_adopted) and got.own_adopted[-1] != own_record)
        new_adoption = new_adoption or ahead != self._own_ahead(got)
        self.fs.makedirs(self.home / HOSTS)
        result = Snapshot(plan.merged, settings, dict(snap.shards), snap.problems, max(snap.newest, stamp), snap.copies)
        if self._shard_unchanged(own, got, plan.own, own_settings, conv_change or setting_change or new_adoption, now):
            result.shards[self.host] = own  # nothing new for it: not rewritten (see _shard_unchanged)
        else:
            result.shards[self.host] = self._shard_info(self.host, shard, len(plan.own))
            out = publish(self.fs, self.shard_path(), render_shard(shard, got.view_lines), got.own_raw, shared=False)
            if out.redo:
                return result, True
        if self._deferred(self.view_path):
            return result, False  # acknowledged from this host's shard; the view is not published without the lease
        if self._mid_write(self.view_path, got) and self._written_on(self.view_path, got.view_raw):
            # upstream was half-way through its in-place write of the view (truncated, then written in
            # parts): its file may be the only copy of entries no shard holds (unstamped ones not adopted
            # yet). Swapped away now, they would be missing from the view until its finished write was
            # merged back; so this write (durable in this host's shard already) is redone on its result.
            return result, True
        out = publish(self.fs, self.view_path, render_view(plan.view, got.view_lines), got.view_raw)
        if out.redo:
            return result, True
        # everything read is durably in this host's shard now
        result.folded = self._fold(got.folds)
        self._settle(got.displaced)
        return result, False

    @staticmethod
    def _own_ahead(got: _Read) -> dict[str, list[str]]:
        own: dict = {}
        for record in got.own_ahead:
            for key, entries in record.items():
                own[key] = own.get(key, frozenset()) | entries
        return ahead_record(own, {}) if own else {}

    def _ahead(self, got: _Read, change: dict, stamp: Stamp, setting_change: dict | None = None,
               setting_stamp: Stamp | None = None) -> tuple[dict[str, list[str]], dict[str, set]]:
        """This host's ahead record: what its shard held, and every version of a key this write changes
        that is stamped after this write's stamp (beyond the follow limit: the clock did not follow it).
        Such a version was read before this write, so it is older: every reader orders it as the oldest.
        A setting's versions likewise, under :data:`~.bounds.SETTING_AHEAD` and its key (the prune floor
        aside: every reader takes the largest floor any source holds)."""
        new: dict[str, set] = {}
        for key in change:
            seen = set(got.originals.get(key, ()))
            seen.update((v["hlc"], v["host"]) for m in got.sources if (v := m.get(key)) is not None)
            later = {(h, host) for h, host in seen if Stamp.decode(h) > stamp}
            if later:
                new[key] = later
        for key in setting_change or ():
            if key == FLOOR_SETTING:
                continue
            seen = set(got.originals.get(SETTING_AHEAD + key, ()))
            seen.update((v.stamp.encode(), v.host) for m in got.setting_sources if (v := m.get(key)) is not None)
            later = {(h, host) for h, host in seen if Stamp.decode(h) > setting_stamp}
            if later:
                new[SETTING_AHEAD + key] = later
        own: dict = {}
        # this host's record, and those of files that may go (a retired host's shard, a conflict copy): the
        # versions they name may outlive them in other shards, and must stay the oldest of their key
        for record in got.own_ahead:
            for key, entries in record.items():
                own[key] = own.get(key, frozenset()) | entries
        if got.carried_ahead:  # only for keys the home holds: a crafted copy's record cannot grow this shard
            known = {SETTING_AHEAD + k for k in got.snap.settings}
            for m in got.sources:
                known.update(m)
            for raw in got.carried_ahead:
                for key, entries in ahead_map(raw, known if len(known) < len(raw) else None).items():
                    if key in known:
                        own[key] = own.get(key, frozenset()) | entries
        return (ahead_record(own, new) if (own or new) else {}), new

    def _mid_write(self, path: Path, got: _Read) -> bool:
        """Could the view we read (``got.view_raw``) be a torn file an in-place writer is still writing?"""
        return got.view_lines is None and self._may_be_written(path, got.view_raw)  # view_lines: read clean

    def _may_be_written(self, path: Path, raw: bytes | None) -> bool:
        """Could the file we read as ``raw`` at ``path`` be one an in-place writer is still writing? It does
        not parse whole and it changed within :data:`TORN_WRITE_S` (by this file system's clock, either way:
        a skewed mtime cannot make us wait on it for longer). A conflict copy too: Syncthing renames a local
        file it finds in conflict to a ``.sync-conflict-`` name, and an in-place writer (upstream's Node
        ``writeFileSync``) that opened it before goes on writing into it under that name: filed into
        ``backups/`` while torn, the rest of that write would land where nobody reads it, so such a copy
        stays until it parses whole (its torn bytes are already set aside in ``quarantine/``)."""
        if raw is None or whole(raw):
            return False
        mtime = self.fs.mtime(path)
        return mtime is not None and abs(self.fs.now() - mtime) < TORN_WRITE_S

    def _written_on(self, path: Path, raw: bytes) -> bool:
        """Wait a little (at most :data:`TORN_POLLS` x :data:`TORN_WAIT_S`) for the torn ``path`` to change
        from ``raw``. False: nobody is writing it (a writer that died, garbage): it is published over, its
        bytes kept (quarantined, and displaced by the swap)."""
        for _ in range(TORN_POLLS):
            self.fs.wait_changed(path, TORN_WAIT_S)
            now = self.fs.read(path)
            if not (now.ok and now.data == raw):
                return True
        return False

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
        try:
            self.fs.makedirs(target_dir)
        except OSError as exc:
            # backups/ is a symbolic link (never written through) or cannot be made: the write itself is
            # done and durable; the copies stay where they are (merged already, they change nothing)
            log.warning("state: conflict copies are left in place: %s cannot be used (%s)", target_dir,
                        exc.strerror or exc)
            return moved
        for read in found:
            path = read.source.path
            if self._may_be_written(path, read.raw):
                continue  # a torn copy: maybe an in-place write a sync engine renamed aside; merged once whole
            name = path.name if path.parent == self.home else f"{path.parent.name}__{path.name}"
            target = target_dir / fit_name(name)
            if self.fs.read(target).status != "missing":
                target = target_dir / (fit_name(name, 200) + f".{time.time_ns()}")
            try:
                if not self.fs.rename(path, target):
                    continue  # another host folded it first
            except OSError as exc:
                log.warning("state: %s is left in place: it cannot be filed into %s (%s)", path, target_dir,
                            exc.strerror or exc)
                continue
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


    def refresh(self) -> Snapshot:
        """Rewrite this host's shard and the view from everything readable (upgrades legacy entries),
        and remove temp files that killed writers left behind."""
        snap = self._write(lambda stamp: ({}, {}))
        self.sweep_temp()
        return snap


def _demote_settings(values: dict[str, Setting], named: dict[str, set]) -> dict[str, Setting]:
    """``values`` with the setting versions ``named`` (under SETTING_AHEAD) ordered as the oldest."""
    hit = [k for k, v in values.items() if (v.stamp.encode(), v.host) in named.get(SETTING_AHEAD + k, ())]
    if not hit:
        return values
    return {k: Setting(v.value, ZERO, v.host) if k in hit else v for k, v in values.items()}
