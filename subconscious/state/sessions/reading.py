"""Reading one session's state: its view, every host's version, their conflict copies and displaced
versions, merged so that the cursor never moves back; listing the sessions a home holds. A mixin of
:class:`~.sessions.SessionFiles`; takes no lock.

Also the names of session files, and which version counts: below the session floor a version is retired
(:func:`counts`); upstream's rewrite of the view counts as newer than what it replaced
(:func:`session_view_version`).
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Iterator

from ..conflicts import copies
from ..bounds import future_message
from ..clock import ZERO, Stamp, bound, tick
from ..files import Problem
from ..ids import check_session_id, is_session_id
from ..merge import merge_session_versions
from ..order import ADOPTED_MAX, add_adopted, adoption_digest, canonical, is_digest
from ..publish import displaced_names, displaced_prefix
from ..records import LEGACY_HOST, RecordError, SessionState, parse_session
from ..sources import Read, Source, copy_source

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


ADOPTED_KEY = "adopted"  # a session version's record of upstream's versions adopted (see adopted_by)


def session_digest(state: SessionState) -> str:
    """The adoption digest of a session version's last-writer-wins part (not the cursor, the start time
    or the record itself)."""
    extra = state._extra_dict()
    extra.pop(ADOPTED_KEY, None)
    return adoption_digest([state.conversation_id, state.agent_id, state.last_block_values,
                            state.last_seen_message_id, extra])


def adopted_by(state: SessionState | None) -> list[str]:
    """The digests of upstream's versions that ``state``'s writers adopted."""
    got = state._extra_dict().get(ADOPTED_KEY) if state is not None and state.extra else None
    return [d for d in got[-ADOPTED_MAX:] if is_digest(d)] if isinstance(got, list) else []


def with_adopted(state: SessionState, adopted: SessionState) -> SessionState:
    """``state`` recording that it adopts upstream's version ``adopted`` (stamped by nobody until now)."""
    rest = state._extra_dict()
    have = adopted_by(state)
    digests = add_adopted(have, [session_digest(adopted)])
    if digests == have:
        return state
    rest[ADOPTED_KEY] = digests
    return state.evolve(extra=canonical(rest))


def session_view_version(view: SessionState, hosts: dict[str, SessionState], winner: SessionState | None,
                         adopted: frozenset[str] | set[str] = frozenset()) -> SessionState:
    """What the view's version counts as: upstream's rewrite of a version (unstamped, or stamped like a
    host's version but with other content) is newer than the version it replaced — once: a content some
    writer already adopted (``adopted``, digests) is upstream's stale read-change-write, as old as it is
    (its cursor still counts: the cursor is the maximum of every version)."""
    if winner is None:
        return view
    if adopted and session_digest(view) in adopted:
        return view
    if view.stamp == ZERO and view.host == LEGACY_HOST:
        return view.evolve(stamp=tick(winner.stamp, 0)) if _group(view) != _group(winner) else view
    mine = hosts.get(view.host)
    if mine is not None and mine.stamp == view.stamp and _group(mine) != _group(view):
        return view.evolve(stamp=tick(max(mine.stamp, winner.stamp), 0), host=LEGACY_HOST)
    return view


def unusual(names: list[str]) -> list[str]:
    from .listcache import unusual

    return unusual(names)


class Listing:
    """One directory listing indexed once, so that reading every session of a home looks at each name a
    bounded number of times (issue 24: one scan of the whole listing per session was quadratic, 47 s at
    8,000 sessions). A session's displaced versions and copies are the names that start with its file's
    stem or displaced prefix: a range of the sorted names, found by bisection."""

    __slots__ = ("names", "ordered", "members", "complete", "present")

    def __init__(self, names: list[str], complete: bool = True, present=None):
        """``complete=False``: only the directory's unusual names (:func:`.listcache.unusual`); a plain
        name is then taken as present (a read of it finds out), except where a weak copy's name counts only
        beside its original: ``present(name)`` then says if the session's own file is there (None: taken as
        present)."""
        self.names = names
        # what a session's displaced versions and copies can be named is never a plain name of another
        # session (except one that extends its name: OneDrive's session-<id>-LAPTOP.json), so only the
        # directory's unusual names are searched (:func:`.listcache.unusual`; the whole listing is still
        # what ``in`` and the weak patterns see)
        self.ordered = sorted(unusual(names)) if complete else sorted(names)
        self.members = frozenset(names)
        self.complete = complete
        self.present = present

    def __contains__(self, name: str) -> bool:
        return name in self.members or (not self.complete and copies.plain(name))

    def starting(self, prefix: str) -> list[str]:
        i = bisect_left(self.ordered, prefix)
        out = []
        ordered = self.ordered
        while i < len(ordered) and ordered[i].startswith(prefix):
            out.append(ordered[i])
            i += 1
        return out

    def displaced(self, name: str) -> list[str]:
        if not self.ordered:
            return []  # (most directories: no unusual name at all)
        return displaced_names(self.starting(displaced_prefix(name)), name)

    def copies(self, name: str) -> list[copies.ConflictCopy]:
        if not self.ordered:
            return []
        stem = name[: -len(SESSION_SUFFIX)]
        found = self.starting(stem)
        if not found:
            return []
        listing = self.members
        if not self.complete and (self.present is None or self.present(name)):
            listing = listing | {name}  # (a weak copy counts only beside its original, as in a full listing)
        return copies.find(found, "root", name, listing=listing)


def _displaced(names, name: str) -> list[str]:
    return names.displaced(name) if isinstance(names, Listing) else displaced_names(names, name)


def _copies(names, name: str) -> list:
    return names.copies(name) if isinstance(names, Listing) else copies.find(names, "root", name)


def _holds(names, name: str) -> bool:
    return name in names


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
        found = copies.plain_session_names(names)
        if found is not None:  # a OneDrive/Nextcloud copy named like a session is not a session
            return [m.group(1) for m in found if m.group(0) not in copy_names]
        out = []
        for name in names:
            if name in copy_names or not copies.plain(name):  # a OneDrive/Nextcloud copy named like a session
                continue
            sid = _sid_of(name)
            if sid is not None:
                out.append(sid)
        return out

    def ids_listed(self, names: list[str], listings: dict[str, list[str]]) -> list[str]:
        """:meth:`ids` from listings already taken (the home's and each host directory's)."""
        out = set(self._view_ids(names))
        for listing in listings.values():
            out |= set(self._view_ids(listing))
        return sorted(out)

    def ids_of_host(self, host: str) -> list[str]:
        return sorted(set(self._view_ids(self.fs.listdir(self.home / HOSTS / host))))

    def ids_without_view(self, names: list[str]) -> list[str]:
        present = set(self._view_ids(names))
        return [sid for sid in self.ids(names) if sid not in present]

    def all(self) -> Iterator[tuple[str, SessionState | None, list[Problem]]]:
        """Every session with its merged state and problems, from one listing of each directory."""
        names = self.fs.listdir(self.home)
        listings = {h: self.fs.listdir(self.home / HOSTS / h) for h in self._host_dirs()}
        ids = self.ids_listed(names, listings)
        floor = self.floor(listings)
        # indexed once: each session's own names are then a bisection away (linear, not one scan per session)
        root = Listing(names)
        indexed = {h: Listing(listing) for h, listing in listings.items()}
        for sid, state, problems, reads in self.read_each(ids, root, indexed, floor):
            if state is None and not problems and reads["retired"]:
                continue  # every version is below the session floor: retired, only its files are left
            yield sid, state, problems

    def read_each(self, ids, root: "Listing", indexed: dict, floor: Stamp):
        """``(sid, state, problems, reads)`` of each session in ``ids``, from listings taken once; each
        directory opened once for all of them (:meth:`.fs.FS.holding`), not once per file."""
        held = self.fs.holding()
        cache = self._session_cache(floor)
        try:
            if cache is None:
                for sid in ids:
                    with held:
                        state, problems, reads = self._read(sid, root, indexed, floor)
                    yield sid, state, problems, reads
                return
            for sid in ids:
                with held:
                    plan = self._plan(session_file_name(sid), root, indexed)
                    taken, tokens = cache.tokens(plan)
                    got = cache.get(sid, tokens, self.store.now())
                    if got is not None:
                        state, problems, retired = got
                        reads = {"retired": retired, "cached": True}
                    else:
                        state, problems, reads = self._read(sid, root, indexed, floor, plan)
                        cache.put(sid, taken, tokens, state, problems, reads)
                yield sid, state, problems, reads
            cache.complete = True
        finally:
            held.close()
            if cache is not None:
                cache.save()

    def _session_cache(self, floor: Stamp):
        """The machine-local cache of a read-only bulk read (:mod:`.cache`), or None: a store that
        writes, a preview, or a file system that cannot tell a file's identity read every file."""
        store = self.store
        if not (store.read_only and store.keep_caches and getattr(self.fs, "FILE_TOKENS", False)):
            return None
        from .cache import SessionCache

        return SessionCache(self.fs, self.home, store.clocks_dir.parent / "cache",
                            [store.host, floor.encode(), sorted(store.retiring)])

    # ------------------------------------------------------------------ reading

    def read(self, session_id: str, names: list[str] | None = None
             ) -> tuple[SessionState | None, list[Problem], list[copies.Found]]:
        listings = None
        if names is None:  # a hook's read: the unusual names of each directory, listed only when it changed
            names, listings = self._cached_listings()
        state, problems, reads = self._read(session_id, names, listings)
        return state, problems, [copies.Found(r.source.path, r.source.copy, r.raw) for r in reads["folds"]]

    def _cached_listings(self) -> tuple[Listing | None, dict | None]:
        """Each session directory's unusual names through the machine-local listing cache (see
        :mod:`.listcache`), or (None, None) where the file system cannot tell a directory changed. Only
        reads use it: every write lists the directories it merges."""
        cache = self._listing_cache()
        root = cache.names(self.home)
        if root is None:
            return None, None
        listings: dict = {}
        for host in self._host_dirs():
            directory = self.home / HOSTS / host
            found = cache.names(directory)
            listings[host] = (Listing(found, complete=False, present=self._present_in(directory)) if found is not None
                              else self.fs.listdir(directory))
        if self.store.keep_caches:
            cache.save()
        return Listing(root, complete=False, present=self._present_in(self.home)), listings

    def _present_in(self, directory: Path):
        """Is a file of this name in ``directory``, for a listing that holds only its unusual names (a
        name that cannot be told, a link or a FIFO, is there as a listing would show it)?"""
        token = self.fs.file_token
        return lambda name: token(directory / name) != ()

    def _listing_cache(self):
        from .listcache import ListingCache

        return ListingCache(self.fs, self.home, self.store.clocks_dir.parent / "cache")

    def refresh_listings(self, large: int = 0) -> int | None:
        """Keep the listing cache a hook's read goes through fresh, off the hook path: each session
        directory whose cached listing is stale is listed again once it has not changed for
        :data:`.listcache.RACY_NS` (:meth:`.listcache.ListingCache.refresh`). Returns the wall time (ns) to
        call again for the directories that changed too recently — only those whose last listing had at
        least ``large`` names (a small directory costs a hook less to list than anyone to wait for) — or
        None. A hook still lists a directory the cache is stale for: a refresh saves a hook's time, it
        never decides what a read finds."""
        if not self.store.keep_caches:
            return None
        cache = self._listing_cache()
        dues = []
        for directory in (self.home, *(self.home / HOSTS / h for h in self._host_dirs())):
            due = cache.refresh(directory)
            if due is not None and (cache.size(directory) or 0) >= large:
                dues.append(due)
        cache.save()
        return max(dues) if dues else None


    def _plan(self, name: str, names, listings: dict | None) -> list[tuple]:
        """The sources of session file ``name`` the listings name, as ``(host or None, file name, kind,
        copy)`` (None: in the home): the view, its displaced versions and copies, then with ``listings``
        each host's version, displaced versions and copies. One rule for what a read reads and what the
        bulk read's cache (:mod:`.cache`) checks is unchanged."""
        plan = [(None, name, "view", None)]
        plan += [(None, n, "displaced", None) for n in _displaced(names, name)]
        plan += [(None, c.name, "weak-copy" if c.weak or c.ambiguous else "copy", c) for c in _copies(names, name)]
        if listings is not None:
            plan += self._host_plan(name, listings)
        return plan

    def _host_plan(self, name: str, listings: dict) -> list[tuple]:
        plan = []
        for host, listing in listings.items():
            if _holds(listing, name):
                plan.append((host, name, "copy" if host in self.store.retiring else "shard", None))
            plan += [(host, n, "displaced", None) for n in _displaced(listing, name)]
            plan += [(host, c.name, "weak-copy" if c.weak or c.ambiguous else "copy", c) for c in _copies(listing, name)]
        return plan

    def _sources(self, plan: list[tuple]) -> list[Source]:
        dirs = self._host_paths
        out = []
        for host, n, kind, copy in plan:
            if host is None:
                out.append(Source(self.home / n, kind, copy))
            else:
                directory = dirs.get(host) or dirs.setdefault(host, self.home / HOSTS / host)
                out.append(Source(directory / n, kind, copy, host))
        return out

    def _gather(self, session_id: str, names: list[str] | None, listings: dict[str, list[str]] | None,
                plan: list[tuple] | None = None):
        """Read every source of one session, in the order content moves: the view, then (listed after
        it) its displaced versions and copies, then each host's version — a publish swaps the view's
        version out to a displaced name, and a displaced version or copy goes away only after its content
        is in a host's version. So what a writer moves while we read is seen at least once. (The bulk
        read passes listings taken once for every session, and may miss a version moved meanwhile.)
        ``plan``: the sources' plan (:meth:`_plan`) already made from ``names`` and ``listings``; the
        plan read is returned third (it differs from that one when the hosts were listed again)."""
        name = session_file_name(session_id)
        limit = bound(self.store.now())  # (once per session, not per file)
        if plan is None:
            view = Source(self.home / name, "view")
            out = [(view, *self._read_one(view, session_id, limit))]
            names = self.fs.listdir(self.home) if names is None else names
            plan = self._plan(name, names, listings)
            home_plan = [p for p in plan if p[0] is None]
            others = self._sources(home_plan[1:])
        else:
            home_plan = [p for p in plan if p[0] is None]
            view, *others = self._sources(home_plan)
            out = [(view, *self._read_one(view, session_id, limit))]
        got = [(source, *self._read_one(source, session_id, limit)) for source in others]
        out += got
        if listings is not None and any(read.raw is None for _, read, _ in got):
            # the hosts' names were listed before the view was read (the listing cache, a bulk read): a displaced
            # version or copy that went away meanwhile was merged into a host's version made after that
            # listing, so the hosts are listed again, now (the simulation found a read that missed both)
            listings = None
        if listings is None:
            listings = {h: self.fs.listdir(self.home / HOSTS / h) for h in self._host_dirs()}
            host_plan = self._host_plan(name, listings)
        else:
            host_plan = [p for p in plan if p[0] is not None]
        hosts = self._sources(host_plan)
        return out, [(source, *self._read_one(source, session_id, limit)) for source in hosts], home_plan + host_plan

    def _read_one(self, source: Source, session_id: str, limit: Stamp | None = None) -> tuple[Read, list[SessionState]]:
        read = self.store.reader.read(source)
        parsed = []
        limit = bound(self.store.now()) if limit is None else limit
        for value in read.values:
            try:
                state = parse_session(value, session_id)
            except RecordError as exc:
                self.store.reader.wrong(read, "invalid-entry", f"not a session state: {exc}")
                continue
            if state.stamp > limit:
                # beyond the bound: ordered as the oldest version (its cursor still counts), see .bounds
                read.problems.append(Problem("future-stamp", str(source.path),
                                             future_message({session_id: state.stamp}, "versions")))
                state = state.evolve(stamp=ZERO)
            parsed.append(state)
        return read, parsed

    def _read(self, session_id: str, names: list[str] | None = None, listings: dict | None = None,
              floor: Stamp | None = None, plan: list[tuple] | None = None):
        if listings is None:
            listings = {h: self.fs.listdir(self.home / HOSTS / h) for h in self._host_dirs()}
        if floor is None:
            floor = self.floor(listings)
        view_reads, host_reads, plan = self._gather(session_id, names, listings, plan)
        problems: list[Problem] = []
        reads = {"view": None, "own": None, "folds": [], "displaced": [], "floor": floor, "retired": False,
                 "pass": max(floor, self.pending_floor),  # what a write stamps past
                 "plan": plan,  # the sources read (see _plan)
                 # the newest stamp of any version read (the bulk read's cache checks it is still within the bound)
                 "newest": max((p.stamp for _, _, parsed in (*view_reads, *host_reads) for p in parsed), default=ZERO),
                 # a version was stamped beyond the bound (ordered as the oldest; a weak copy's is not reported)
                 "future": any(p.kind == "future-stamp" for _, read, _ in (*view_reads, *host_reads)
                               for p in read.problems)}
        if floor != ZERO:
            # below the floor a version is retired, wherever it comes from (see state/store/retention.py)
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
        adopted = {d for s in [*by_host.values(), *others] for d in adopted_by(s)}
        for source, read, parsed in view_reads:
            if not take(source, read, parsed):
                continue
            if source.kind == "view":
                reads["view"] = read
            if source.upstream_writable:
                parsed = [session_view_version(p, by_host, winner, adopted) for p in parsed]
            others += parsed
        state = merge_session_versions([*by_host.values(), *others])
        # what the hosts' files alone say: if the views (upstream's writes, displaced versions) added
        # something, the next writer adopts it into its own version before they can go away
        reads["hosts_only"] = winner
        return state, problems, reads
