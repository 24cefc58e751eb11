"""Reading one session's state: its view, every host's version, their conflict copies and displaced
versions, merged so that the cursor never moves back; listing the sessions a home holds. A mixin of
:class:`~.sessions.SessionFiles`; takes no lock.

Also the names of session files, and which version counts: below the session floor a version is retired
(:func:`counts`); upstream's rewrite of the view counts as newer than what it replaced
(:func:`session_view_version`).
"""

from __future__ import annotations

from typing import Iterator

from . import copies
from .clock import ZERO, Stamp, tick
from .files import Problem
from .ids import check_session_id, is_session_id
from .merge import merge_session_versions
from .order import canonical
from .publish import displaced_names
from .records import LEGACY_HOST, RecordError, SessionState, parse_session
from .sources import Read, Source, copy_source

SESSION_PREFIX, SESSION_SUFFIX = "session-", ".json"
HOSTS = "hosts"
MAX_REDO = 16


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


class SessionReading:
    """Listing and reading for :class:`~.sessions.SessionFiles`."""

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
