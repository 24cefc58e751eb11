"""Upkeep of the store: retiring conversations (gc) and hosts, merging in versions from an archive,
folding every conflict copy, sweeping killed writers' temp files (a mixin of :class:`~.store.Store`).
"""

from __future__ import annotations

from pathlib import Path

from ..conflicts import copies
from ..clock import ZERO, Stamp
from ..copynames import ConflictCopy, classify
from ..ids import check_session_id, is_host_id, is_session_id
from ..order import wins as order_wins
from .plan import FLOOR_SETTING
from ..publish import DISPLACED, displaced_original
from ..records import RecordError, Setting, Tombstone, later, parse_record
from .snapshot import CONVERSATIONS, HOSTS, StoreError, floor_of
from ..sources import Source
from ..textforms import TEMP_PREFIX


class Upkeep:
    """Retirement, merge-in, fold-all and sweeping for :class:`~.store.Store`."""

    def retire_conversations(self, session_ids: list[str], floor: Stamp, cursors: dict[str, int] | None = None
                             ) -> list[str]:
        """Tombstone the live entries of ``session_ids`` still stamped below ``floor`` (gc: one write for all
        of them; an entry written again since the plan was made is activity and stays). Each tombstone is
        the retirement record: the conversation, its agent and the session's cursor (``cursors``), so a
        session that comes back keeps them. Returns the keys."""
        from ..order import canonical

        cursors = cursors or {}
        self._writable()
        done: list[str] = []
        with self.lock():
            snap = self.read()

            def change(stamp: Stamp):
                done[:] = [k for k in session_ids if (r := snap.get(k)) is not None and r.stamp < floor]
                return {k: Tombstone(stamp, self.host, canonical({"retired": {
                    "conversationId": snap.get(k).conversation_id, "agentId": snap.get(k).agent_id,
                    "cursor": cursors.get(k, -1)}})) for k in done}, {}

            if any((r := snap.get(k)) is not None and r.stamp < floor for k in session_ids):
                self._write(change)
        return done

    def retired_conversation(self, session_id: str) -> dict | None:
        """The retirement record gc left for ``session_id`` (``{"conversationId", "agentId", "cursor"}``), when
        its entry is a tombstone that holds one; None otherwise (live, never known, or deleted otherwise)."""
        raw = self.read().raw.get(session_id)
        if not isinstance(raw, dict) or raw.get("deleted") is not True:
            return None
        try:
            record = parse_record(raw)
        except RecordError:
            return None
        return record.retired if isinstance(record, Tombstone) else None

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
        # a sync engine's copy of a host's own session file (hosts/<host>/session-<id> (conflicted
        # copy …).json) names the same session: fold_session folds those too
        for host_dir in self.session_files._host_dirs():
            here = self.fs.listdir(self.home / HOSTS / host_dir)
            sessions |= {c.original for c in copies.find(here, "root")}
            here_set = frozenset(here)
            for name in copies.ambiguous_copies(here):  # OneDrive's session-<id>-<PC>.json, as above
                found = classify(name, here_set, where="root", include_ambiguous=True)
                if isinstance(found, ConflictCopy):
                    sessions.add(found.original)
        sids = {n[len("session-"):-len(".json")] for n in sessions if n.startswith("session-") and n.endswith(".json")}
        sids |= set(self.session_files.ids_without_view(names))
        folded_sessions = 0
        for sid in sorted(sids):
            if is_session_id(sid):
                folded_sessions += len(self.fold_session(sid))
        return {"conversations": len(before), "sessions": folded_sessions}

    def sweep_temp(self, max_age_s: float = 600.0) -> list[Path]:
        """Delete our atomic-write temp files older than ``max_age_s`` (orphans of killed writers).
        Displaced versions are sources, not orphans: they go only once merged (see :mod:`..publish`)."""
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
