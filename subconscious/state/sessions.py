"""Session state: ``session-<id>.json`` (the upstream-readable view) and one version per host
(``hosts/<host>/session-<id>.json``), merged so that the cursor never moves back.

Each host writes only its own version (under its host lock); a reader merges the view, every host's
version, their conflict copies and displaced versions. The view is published like the conversations
view (:mod:`.publish`), so what upstream writes there is merged, never overwritten unread: its
version counts as newer than the one it replaced (see :func:`session_view_version`).
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from . import copies
from .clock import ZERO, Stamp, tick
from .files import Problem
from .ids import check_session_id, is_host_id, is_session_id
from .merge import merge_session_versions, merge_sessions
from .order import canonical, same_json
from .publish import DISPLACED, displaced_names, publish
from .records import LEGACY_HOST, RecordError, SessionState, parse_session
from .sources import Read, Source, copy_source
from .textforms import dumps_canonical

if TYPE_CHECKING:  # pragma: no cover
    from .store import Store

SESSION_PREFIX, SESSION_SUFFIX = "session-", ".json"
HOSTS = "hosts"
FLOOR_FILE = "floor.json"  # hosts/<host>/floor.json: the session floor this host has seen (see state/retention.py)
FLOOR_FORMAT = 1
_FLOOR_RE = re.compile(rb'\{\n  "format": 1,\n  "host": "([A-Za-z0-9_.-]{1,128})",\n  "sessionFloor": "([0-9]{1,16}):([0-9]{1,9})"\n\}\n')
MAX_REDO = 16
log = logging.getLogger("subconscious")


def session_file_name(session_id: str) -> str:
    return f"{SESSION_PREFIX}{check_session_id(session_id)}{SESSION_SUFFIX}"


def _sid_of(name: str) -> str | None:
    if name.startswith(SESSION_PREFIX) and name.endswith(SESSION_SUFFIX):
        sid = name[len(SESSION_PREFIX):-len(SESSION_SUFFIX)]
        return sid if is_session_id(sid) else None
    return None


def _group(state: SessionState) -> tuple:
    return canonical([state.conversation_id, state.agent_id, state.last_block_values, state.last_seen_message_id,
                      state.extra])


def counts(state: SessionState, floor: Stamp, upstream_writable: bool) -> bool:
    """Does this version count under the session floor? Below it, a version is retired wherever it comes
    from; upstream's unstamped version in a view is upstream's write and counts (gc retires it by age)."""
    return state.stamp >= floor or (upstream_writable and state.stamp == ZERO and state.host == LEGACY_HOST)


def session_view_version(view: SessionState, hosts: dict[str, SessionState], winner: SessionState | None) -> SessionState:
    """What the view's version counts as: upstream's rewrite of a version (unstamped, or stamped like a
    host's version but with other content) is newer than the version it replaced."""
    if winner is None:
        return view
    if view.stamp == ZERO and view.host == LEGACY_HOST:
        return view.evolve(stamp=tick(winner.stamp, 0)) if _group(view) != _group(winner) else view
    mine = hosts.get(view.host)
    if mine is not None and mine.stamp == view.stamp and _group(mine) != _group(view):
        return view.evolve(stamp=tick(max(mine.stamp, winner.stamp), 0), host=LEGACY_HOST)
    return view


class SessionFiles:
    def __init__(self, store: "Store"):
        self.store = store
        self.fs = store.fs

    @property
    def home(self) -> Path:
        return self.store.home

    def view_path(self, session_id: str) -> Path:
        return self.home / session_file_name(session_id)

    def own_path(self, session_id: str) -> Path:
        return self.home / HOSTS / self.store.host / session_file_name(session_id)

    def _host_dirs(self) -> list[str]:
        return sorted(n for n in self.fs.listdir(self.home / HOSTS) if is_host_id(n) and not n.endswith(".json"))

    # ------------------------------------------------------------------ the session floor

    def floor_path(self, host: str | None = None) -> Path:
        return self.home / HOSTS / (host or self.store.host) / FLOOR_FILE

    def _floor_reads(self, listings: dict[str, list[str]]) -> list[tuple[str, Read, Stamp]]:
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

    # ------------------------------------------------------------------ listing

    def ids(self, names: list[str] | None = None) -> list[str]:
        """Sessions with a view or a host's version here (not counting copies named like a session)."""
        names = self.fs.listdir(self.home) if names is None else names
        out = set(self._view_ids(names))
        for host in self._host_dirs():
            out |= set(self._view_ids(self.fs.listdir(self.home / HOSTS / host)))
        return sorted(out)

    @staticmethod
    def _view_ids(names: list[str]) -> list[str]:
        copy_names = copies.ambiguous_copies(names)
        out = []
        for name in names:
            if name in copy_names or not copies.plain(name):  # a OneDrive/Nextcloud copy named like a session
                continue
            sid = _sid_of(name)
            if sid is not None:
                out.append(sid)
        return out

    def ids_of_host(self, host: str) -> list[str]:
        return sorted(set(self._view_ids(self.fs.listdir(self.home / HOSTS / host))))

    def ids_without_view(self, names: list[str]) -> list[str]:
        present = set(self._view_ids(names))
        return [sid for sid in self.ids(names) if sid not in present]

    def all(self) -> Iterator[tuple[str, SessionState | None, list[Problem]]]:
        """Every session with its merged state and problems, from one listing of each directory."""
        names = self.fs.listdir(self.home)
        listings = {h: self.fs.listdir(self.home / HOSTS / h) for h in self._host_dirs()}
        ids = set(self._view_ids(names))
        for listing in listings.values():
            ids |= set(self._view_ids(listing))
        floor = self.floor(listings)
        for sid in sorted(ids):
            state, problems, reads = self._read(sid, names, listings, floor)
            if state is None and not problems and reads["retired"]:
                continue  # every version is below the session floor: retired, only its files are left
            yield sid, state, problems

    # ------------------------------------------------------------------ reading

    def read(self, session_id: str, names: list[str] | None = None
             ) -> tuple[SessionState | None, list[Problem], list[copies.Found]]:
        state, problems, reads = self._read(session_id, names)
        return state, problems, [copies.Found(r.source.path, r.source.copy, r.raw) for r in reads["folds"]]

    def _gather(self, session_id: str, names: list[str] | None, listings: dict[str, list[str]] | None):
        """Read every source of one session, in the order content moves: the view, then (listed after
        it) its displaced versions and copies, then each host's version — a publish swaps the view's
        version out to a displaced name, and a displaced version or copy goes away only after its content
        is in a host's version. So what a writer moves while we read is seen at least once. (The bulk
        read passes listings taken once for every session, and may miss a version moved meanwhile.)"""
        name = session_file_name(session_id)
        view = Source(self.home / name, "view")
        out = [(view, *self._read_one(view, session_id))]
        names = self.fs.listdir(self.home) if names is None else names
        others = [Source(self.home / n, "displaced") for n in displaced_names(names, name)]
        others += [copy_source(self.home / c.name, c) for c in copies.find(names, "root", name)]
        out += [(source, *self._read_one(source, session_id)) for source in others]
        hosts = []
        if listings is None:
            listings = {h: self.fs.listdir(self.home / HOSTS / h) for h in self._host_dirs()}
        for host, listing in listings.items():
            directory = self.home / HOSTS / host
            if name in listing:
                kind = "copy" if host in self.store.retiring else "shard"
                hosts.append(Source(directory / name, kind, owner=host))
            hosts += [Source(directory / n, "displaced", owner=host) for n in displaced_names(listing, name)]
            hosts += [copy_source(directory / c.name, c, host) for c in copies.find(listing, "root", name)]
        return out, [(source, *self._read_one(source, session_id)) for source in hosts]

    def _read_one(self, source: Source, session_id: str) -> tuple[Read, list[SessionState]]:
        read = self.store.reader.read(source)
        parsed = []
        for value in read.values:
            try:
                parsed.append(parse_session(value, session_id))
            except RecordError as exc:
                self.store.reader.wrong(read, "invalid-entry", f"not a session state: {exc}")
        return read, parsed

    def _read(self, session_id: str, names: list[str] | None = None, listings: dict | None = None,
              floor: Stamp | None = None):
        if listings is None:
            listings = {h: self.fs.listdir(self.home / HOSTS / h) for h in self._host_dirs()}
        if floor is None:
            floor = self.floor(listings)
        view_reads, host_reads = self._gather(session_id, names, listings)
        problems: list[Problem] = []
        reads = {"view": None, "own": None, "folds": [], "displaced": [], "floor": floor, "retired": False}
        if floor != ZERO:
            # below the floor a version is retired, wherever it comes from (see state/retention.py)
            def alive(found):
                out = []
                for source, read, parsed in found:
                    kept = [p for p in parsed if counts(p, floor, source.upstream_writable)]
                    reads["retired"] |= len(kept) < len(parsed)
                    out.append((source, read, kept))
                return out

            view_reads, host_reads = alive(view_reads), alive(host_reads)
        by_host: dict[str, SessionState] = {}
        others: list[SessionState] = []

        def take(source: Source, read: Read, parsed: list[SessionState]) -> bool:
            if source.weak and (read.problems or not parsed):
                return False  # a weak name match whose content is not this session's
            problems.extend(read.problems)
            if source.foldable and read.raw:
                reads["folds"].append(read)
            if source.kind == "displaced" and read.raw is not None:
                reads["displaced"].append(read)
            return True

        for source, read, parsed in host_reads:
            if not take(source, read, parsed):
                continue
            if source.kind == "shard":
                if source.owner == self.store.host:
                    reads["own"] = read
                merged = merge_session_versions(parsed)
                if merged is not None:
                    by_host[source.owner] = merged
            else:
                others += parsed
        winner = merge_session_versions([*by_host.values(), *others])
        for source, read, parsed in view_reads:
            if not take(source, read, parsed):
                continue
            if source.kind == "view":
                reads["view"] = read
            if source.upstream_writable:
                parsed = [session_view_version(p, by_host, winner) for p in parsed]
            others += parsed
        state = merge_session_versions([*by_host.values(), *others])
        # what the hosts' files alone say: if the views (upstream's writes, displaced versions) added
        # something, the next writer adopts it into its own version before they can go away
        reads["hosts_only"] = winner
        return state, problems, reads

    # ------------------------------------------------------------------ writing

    def update(self, session_id: str, change: Callable[[SessionState | None], SessionState | None]
               ) -> SessionState | None:
        """Read the session (every version), apply ``change``, write this host's version merged (the
        cursor never moves back) and publish the view; redone when a publish finds a version it did not
        merge. ``change`` returning None, or a state equal to the current one, writes nothing of ours."""
        check_session_id(session_id)
        self.store._writable()
        with self.store.lock():
            state: SessionState | None = None
            for _ in range(MAX_REDO):
                state, redo = self._update_once(session_id, change)
                if not redo:
                    return state
            log.warning("state: session %s kept changing while this host wrote it (%d tries); this "
                        "host's version holds the write", session_id, MAX_REDO)
            return state

    def _update_once(self, session_id: str, change) -> tuple[SessionState | None, bool]:
        current, _, reads = self._read(session_id)
        proposed = change(current)
        if proposed is None:
            return current, False
        proposed = proposed.evolve(session_id=session_id)
        merged = current
        if current is None or not _same_content(current, proposed) or _adopt(current, reads):
            # past the floor too: a write is activity, never retired by the gc that raised the floor
            stamp = self.store._next_stamp(max(current.stamp if current else ZERO, reads["floor"]))
            proposed = proposed.evolve(stamp=stamp, host=self.store.host)
            merged = merge_sessions(current, proposed) if current is not None else proposed
            own_raw = reads["own"].raw if reads["own"] is not None else None
            self.fs.makedirs(self.own_path(session_id).parent)
            out = publish(self.fs, self.own_path(session_id), _render(merged), own_raw, shared=False)
            if out.redo:
                return merged, True
        view_raw = reads["view"].raw if reads["view"] is not None else None
        out = publish(self.fs, self.view_path(session_id), _render(merged), view_raw)
        if out.redo:
            return merged, True
        self._finish(reads)
        return merged, False

    def _finish(self, reads: dict) -> None:
        self.store._fold(reads["folds"])
        self.store._settle(reads["displaced"])

    def touch(self, session_id: str, floor: Stamp) -> SessionState | None:
        """Re-stamp a session that is still in use so that it stays above ``floor`` (gc calls this before
        it raises the floor): its merged state, as it is, becomes this host's version with a new stamp."""
        self.store._writable()
        with self.store.lock():
            for _ in range(MAX_REDO):
                current, _, reads = self._read(session_id)
                if current is None or (current.stamp >= floor and current.host != LEGACY_HOST):
                    return current
                stamp = self.store._next_stamp(max(current.stamp, floor, reads["floor"]))
                current = current.evolve(stamp=stamp, host=self.store.host)
                own_raw = reads["own"].raw if reads["own"] is not None else None
                self.fs.makedirs(self.own_path(session_id).parent)
                if publish(self.fs, self.own_path(session_id), _render(current), own_raw, shared=False).redo:
                    continue
                view_raw = reads["view"].raw if reads["view"] is not None else None
                if publish(self.fs, self.view_path(session_id), _render(current), view_raw).redo:
                    continue
                self._finish(reads)
                return current
            return None

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

        from .textforms import TEMP_PREFIX

        aside = path.with_name(f"{TEMP_PREFIX}retired-{secrets.token_hex(4)}")
        if not self.fs.rename(path, aside):
            return False
        now = self.fs.read(aside)
        if now.ok and now.data == judged:
            self.fs.unlink(aside)
            return True
        self.fs.rename(aside, path.with_name(f"{DISPLACED}{path.name}-{secrets.token_hex(4)}"))
        return False

    def merge_in(self, state: SessionState) -> str:
        """Merge a version from elsewhere (an archive) with its own stamp, the way copies merge: the cursor
        never moves back, the rest goes by the one order, so a version older than the home's changes only
        what is behind (nothing, usually) and merging it twice is merging it once. Below the session floor
        it is retired here already. Returns "merged", "same" or "retired"."""
        self.store._writable()
        session_id = check_session_id(state.session_id)
        with self.store.lock():
            for _ in range(MAX_REDO):
                current, _, reads = self._read(session_id)
                if state.stamp < reads["floor"]:
                    return "retired"
                merged = merge_sessions(current, state) if current is not None else state
                if current is not None and same_json(merged.to_json(), current.to_json()) and not _adopt(current, reads):
                    return "same"
                if merged.host == LEGACY_HOST:
                    merged = merged.evolve(stamp=self.store._next_stamp(max(merged.stamp, reads["floor"])),
                                           host=self.store.host)
                own_raw = reads["own"].raw if reads["own"] is not None else None
                self.fs.makedirs(self.own_path(session_id).parent)
                if publish(self.fs, self.own_path(session_id), _render(merged), own_raw, shared=False).redo:
                    continue
                view_raw = reads["view"].raw if reads["view"] is not None else None
                if publish(self.fs, self.view_path(session_id), _render(merged), view_raw).redo:
                    continue
                self._finish(reads)
                return "merged"
            return "merged"

    def fold(self, session_id: str) -> list[Path]:
        """Write the session merged with its copies (rebuilding a missing view) and move the copies to
        backups/."""
        self.store._writable()
        with self.store.lock():
            for _ in range(MAX_REDO):
                current, _, reads = self._read(session_id)
                if current is None:
                    return []
                view_raw = reads["view"].raw if reads["view"] is not None else None
                if reads["folds"] or _adopt(current, reads):
                    # the copies' content must live in this host's version before they are filed away;
                    # adopted as it is (not restamped), so every host folding the same copies writes the
                    # same view — two replicas folding at once do not make a new conflict. Upstream's
                    # version (nobody's stamp) is stamped now: first seen.
                    if current.host == LEGACY_HOST:
                        current = current.evolve(stamp=self.store._next_stamp(current.stamp), host=self.store.host)
                    own_raw = reads["own"].raw if reads["own"] is not None else None
                    self.fs.makedirs(self.own_path(session_id).parent)
                    if publish(self.fs, self.own_path(session_id), _render(current), own_raw, shared=False).redo:
                        continue
                if publish(self.fs, self.view_path(session_id), _render(current), view_raw).redo:
                    continue
                folded = self.store._fold(reads["folds"])
                self.store._settle(reads["displaced"])
                return folded
            return []


def _adopt(current: SessionState, reads: dict) -> bool:
    """Did a view or a displaced version (not a host's file) give the merged state something — upstream's
    rewrite, a cursor only upstream wrote? Then a host's version must take it before those go away."""
    hosts_only = reads.get("hosts_only")
    if hosts_only is None:
        return bool(reads.get("displaced")) or current.host == LEGACY_HOST
    return current.host == LEGACY_HOST or not same_json(current.to_json(), hosts_only.to_json())


def _render(state: SessionState) -> bytes:
    return dumps_canonical(state.to_json(), expand=1).encode()


def _same_content(a: SessionState, b: SessionState) -> bool:
    strip = lambda s: {k: v for k, v in s.to_json().items() if k not in ("hlc", "host")}  # noqa: E731
    return same_json(strip(a), strip(b))
