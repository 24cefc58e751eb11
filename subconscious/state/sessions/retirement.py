"""The session floor and the removal of retired session files. A mixin of :class:`~.sessions.SessionFiles`.

Each host keeps the session floor it has seen in ``hosts/<host>/floor.json``; the floor in force is the
largest any host's file holds, and it only rises (see state/store/retention.py). A session whose every version is
below it is retired: :meth:`SessionRetirement.remove_retired` moves its files out, never losing a version
written meanwhile.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..conflicts import copies
from ..bounds import future_message, when
from ..clock import FOLLOW_MS, ZERO, Stamp, bound, follow_limit
from ..files import Problem
from ..publish import DISPLACED, displaced_names, publish
from ..records import LEGACY_HOST, RecordError, parse_session
from .reading import HOSTS, MAX_REDO, session_file_name
from ..sources import Read, Source
from ..textforms import dumps_canonical

FLOOR_FILE = "floor.json"  # hosts/<host>/floor.json: the session floor this host has seen (see state/store/retention.py)
FLOOR_FORMAT = 1
_FLOOR_RE = re.compile(rb'\{\n  "format": 1,\n  "host": "([A-Za-z0-9_.-]{1,128})",\n  "sessionFloor": "([0-9]{1,16}):([0-9]{1,9})"\n\}\n')


class SessionRetirement:
    """The floor and retired files for :class:`~.sessions.SessionFiles`."""

    # ------------------------------------------------------------------ the session floor

    def floor_path(self, host: str | None = None) -> Path:
        return self.home / HOSTS / (host or self.store.host) / FLOOR_FILE

    def _floor_reads(self, listings: dict[str, list[str]]) -> list[tuple[str, Read, Stamp]]:
        """Each host's floor file: (host, what was read, its floor). A floor beyond this machine's clock +
        FOLLOW_MS is no floor (ZERO, reported in the read's problems): one file must not retire every session,
        here or anywhere it would be adopted. gc sets a floor at most at its reference (its clock, or the
        newest write of the other machines, whichever is earlier: state/store/retention.py), and a correct clock
        is at most FOLLOW_MS ahead of the stamps it follows, so no gc sets one further ahead; the 24 h read
        bound would let a floor 23 h ahead hide every session (red team, issue 24)."""
        now = self.store.now()
        limit = bound(now)
        follow = follow_limit(now)
        out = []
        pending = ZERO
        for host, read, stamp in self._floor_reads_unbounded(listings):
            if stamp > limit:
                read.problems.append(Problem("future-stamp", str(read.source.path), future_message(
                    {"sessionFloor": stamp}, "floor", what="a session floor")))
                stamp = ZERO
            elif stamp > follow:
                read.problems.append(Problem("future-stamp", str(read.source.path), (
                    f"a session floor {stamp.encode()} ({when(stamp)}) ahead of this machine's clock + "
                    f"{FOLLOW_MS // 60_000} minutes (no gc sets that: it counts ages from its clock or the "
                    "others' newest write): ignored, retires nothing (never adopted into this host's files). "
                    "A clock that was wrong, or a crafted file")))
                # not a floor here, but writes still stamp past it: a correct gc on a machine whose clock
                # is ahead must not retire what this machine writes afterwards (retention.py)
                pending = max(pending, stamp)
                stamp = ZERO
            out.append((host, read, stamp))
        self.pending_floor = pending
        return out

    def floor_problems(self) -> list[Problem]:
        """What is wrong with the floor files (doctor reports it)."""
        listings = {h: self.fs.listdir(self.home / HOSTS / h) for h in self._host_dirs()}
        return [p for _, read, _ in self._floor_reads(listings) for p in read.problems]

    def _floor_reads_unbounded(self, listings: dict[str, list[str]]) -> list[tuple[str, Read, Stamp]]:
        out = []
        for host, listing in listings.items():
            if FLOOR_FILE not in listing:
                continue
            path = self.floor_path(host)
            got = self.fs.read(path)
            m = _FLOOR_RE.fullmatch(got.data) if got.ok else None
            if m is not None and m[1].decode() == host:  # as we write it: no JSON parse on a hook's path
                out.append((host, Read(Source(path, "shard", owner=host), got.data), Stamp(int(m[2]), int(m[3]))))
                continue
            read = self.store.reader.read(Source(path, "shard", owner=host))
            stamp = ZERO
            for value in read.values:
                try:
                    stamp = max(stamp, Stamp.decode(value.get("sessionFloor") if isinstance(value, dict) else None))
                except ValueError:
                    self.store.reader.wrong(read, "wrong-type", "not a session floor of ours")
            out.append((host, read, stamp))
        return out

    def floor(self, listings: dict[str, list[str]] | None = None) -> Stamp:
        """The session floor: the largest any host's floor file holds (it only rises; a stale copy of
        one holds a lower floor, which changes nothing)."""
        if listings is None:
            listings = {h: self.fs.listdir(self.home / HOSTS / h) for h in self._host_dirs()}
        return max((stamp for _, _, stamp in self._floor_reads(listings)), default=ZERO)

    def raise_floor(self, floor: Stamp) -> Stamp:
        """Write this host's floor file: the largest of ``floor`` and every host's (so retiring a host, or
        losing its file, never lowers it). Returns the floor now in force."""
        self.store._writable()
        with self.store.lock():
            for _ in range(MAX_REDO):
                listings = {h: self.fs.listdir(self.home / HOSTS / h) for h in self._host_dirs()}
                reads = self._floor_reads(listings)
                target = max([floor, *(stamp for _, _, stamp in reads)])
                own = next((r for h, r, _ in reads if h == self.store.host), None)
                data = dumps_canonical({"format": FLOOR_FORMAT, "host": self.store.host,
                                        "sessionFloor": target.encode()}, expand=1).encode()
                path = self.floor_path()
                self.fs.makedirs(path.parent)
                if not publish(self.fs, path, data, own.raw if own is not None else None, shared=False).redo:
                    return target
            return target

    def remove_retired(self, session_id: str, floor: Stamp, unstamped_before: float | None = None) -> list[Path]:
        """Remove the files of ``session_id`` that hold only versions below ``floor`` (retired: they count
        for nothing) — the view, every host's version, their displaced versions and conflict copies; with
        ``unstamped_before`` (epoch seconds) also upstream's unstamped view written before then. Each file is
        moved aside first and then checked, so one rewritten meanwhile (a live write) is kept as a displaced
        version that the next read merges, never lost. Files that do not parse are left (doctor reports them)."""
        self.store._writable()
        name = session_file_name(session_id)
        removed: list[Path] = []
        with self.store.lock():
            dirs = [self.home] + [self.home / HOSTS / h for h in self._host_dirs()]
            for directory in dirs:
                listing = self.fs.listdir(directory)
                candidates = [name] if name in listing else []
                candidates += displaced_names(listing, name)
                candidates += [c.name for c in copies.find(listing, "root", name)]
                for entry in candidates:
                    path = directory / entry
                    judged = self._retired_file(path, session_id, floor, unstamped_before)
                    if judged is not None:
                        if self._move_out(path, judged):
                            removed.append(path)
        return removed

    def _retired_file(self, path: Path, session_id: str, floor: Stamp, unstamped_before: float | None
                      ) -> bytes | None:
        """The file's bytes if it holds only retired versions, else None."""
        read = self.store.reader.read(Source(path, "weak-copy"))  # weak: nothing set aside from here
        if not read.values or read.problems or read.raw is None:
            return None
        for value in read.values:
            try:
                state = parse_session(value, session_id)
            except RecordError:
                return None
            if state.stamp == ZERO and state.host == LEGACY_HOST:
                mtime = self.fs.mtime(path)
                if unstamped_before is None or mtime is None or mtime >= unstamped_before:
                    return None
            elif state.stamp >= floor:
                return None
        return read.raw

    def _move_out(self, path: Path, judged: bytes) -> bool:
        """Remove ``path`` if it still holds the bytes judged retired: moved to a temp name first, then
        compared; a version written in between goes back as a displaced version (a source), never lost."""
        import secrets

        from ..textforms import TEMP_PREFIX

        aside = path.with_name(f"{TEMP_PREFIX}retired-{secrets.token_hex(4)}")
        if not self.fs.rename(path, aside):
            return False
        now = self.fs.read(aside)
        if now.ok and now.data == judged:
            self.fs.unlink(aside)
            return True
        self.fs.rename(aside, path.with_name(f"{DISPLACED}{path.name}-{secrets.token_hex(4)}"))
        return False
