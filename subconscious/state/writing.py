"""Writing the store: this host's clock, and a write (read → plan → publish this host's shard, then the
view), redone from a fresh read when a publish finds a version it did not merge; conflict copies merged by
a write are filed into ``backups/`` (a mixin of :class:`~.store.Store`).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any, Callable

from .clock import ZERO, Stamp, tick
from .files import fit_name
from .ids import check_session_id
from .merge import merge_maps
from .order import same_json
from .plan import FLOOR_SETTING, plan_conversations
from .publish import publish, settle_displaced
from .records import Conversation, Record, Setting, Tombstone
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
from .sources import Read
from .viewlines import render_shard, render_view

log = logging.getLogger("subconscious")


class Writing:
    """The write side of :class:`~.store.Store`."""

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


    def refresh(self) -> Snapshot:
        """Rewrite this host's shard and the view from everything readable (upgrades legacy entries),
        and remove temp files that killed writers left behind."""
        snap = self._write(lambda stamp: ({}, {}))
        self.sweep_temp()
        return snap
