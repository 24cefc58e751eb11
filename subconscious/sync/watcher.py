"""Fold sync engines' conflict copies as they arrive (what ``subconscious watch`` runs).

A watchdog observer on the state dir and ``hosts/`` wakes the loop; the loop waits until events have
been quiet for ``debounce`` seconds, then checks for conflict copies (a directory listing) and, only
if there are new ones, runs ``Store.fold_all``. Our own writes wake it too, but find nothing new, so
there is no write loop; a copy a fold left (a lookalike that is not ours, one a busy lease kept) is not
retried on a wake until it changes, only by the periodic scan.

Once a second (an Event wait, no busy loop) it checks that the watched directories are still the
ones it watches: a directory that disappeared (an unmounted drive, a sync engine re-creating the
folder) is dropped, and watched again with a fresh fold when it comes back. A periodic rescan
(``interval``, woken or not) catches anything the OS did not report, tries again what a fold left, and
asks the daily gc.

With ``rebuild_views`` (``watch --rebuild-views``) it also keeps this machine's views --
``conversations.json`` and the ``session-<id>.json`` files upstream reads -- up to date with the host
shards: for a sync engine whose filter keeps the views out of the sync (rclone bisync 1.60-1.65
renames *both* versions of a file two machines rewrote, so two rebuilt views ping-pong forever; see
docs/sync-rclone.md), each machine writes its own views from the shards that arrive. Whenever a shard
or a view changed (size, mtime or inode), the views it feeds are rewritten through the store
(``refresh``, ``fold_session``), which writes nothing when the bytes would not change: its own writes
wake it once more and find nothing to do.

After each change it also keeps this machine's listing cache of the home fresh (state/sessions/listcache.py): once
a changed directory has been quiet for ``RACY_NS`` it is listed again, so that the next hook's read of a
session lists nothing, however many session files the home holds.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..state.conflicts import copies
from ..state.copynames import ConflictCopy, classify, is_temporary

HOSTS = "hosts"

Candidate = tuple[str, str, int, int]  # (dir, name, size, mtime_ns)
Signature = dict[str, tuple[int, int, int]]  # relative path -> (size, mtime_ns, inode)
VIEW = "conversations.json"
SESSION_PREFIX, SESSION_SUFFIX = "session-", ".json"


def _sid(name: str) -> str | None:
    if name.startswith(SESSION_PREFIX) and name.endswith(SESSION_SUFFIX) and len(name) > len(SESSION_PREFIX + SESSION_SUFFIX):
        return name[len(SESSION_PREFIX):-len(SESSION_SUFFIX)]
    return None


def view_sources(home: Path) -> Signature:
    """The stat of every file a view is made from or is: ``conversations.json``, the root session files,
    ``hosts/<host>.json`` and ``hosts/<host>/session-<id>.json`` (temp files and copies left out)."""
    out: Signature = {}

    def add(directory: Path, prefix: str, names) -> None:
        for name in names:
            if is_temporary(name) is not None:
                continue
            try:
                st = os.lstat(directory / name)
            except OSError:
                continue
            if not os.path.isfile(directory / name) or os.path.islink(directory / name):
                continue
            out[prefix + name] = (st.st_size, st.st_mtime_ns, st.st_ino)

    names = copies.listdir(home)
    add(home, "", [n for n in names if n == VIEW or _sid(n) is not None])
    hosts = home / HOSTS
    for name in copies.listdir(hosts):
        if name.endswith(".json"):
            add(hosts, f"{HOSTS}/", [name])
        elif not name.startswith("."):
            sub = hosts / name
            if os.path.isdir(sub) and not os.path.islink(sub):
                add(sub, f"{HOSTS}/{name}/", [n for n in copies.listdir(sub) if _sid(n) is not None])
    return out


def changed_views(before: Signature | None, after: Signature) -> tuple[bool, list[str]]:
    """What to rewrite after the view sources went from ``before`` (None: never looked) to ``after``:
    (conversations.json?, session ids). A pure function of the two signatures."""
    if before is None:
        sids = {s for p in after if (s := _sid(p.rsplit("/", 1)[-1])) is not None}
        return True, sorted(sids)
    paths = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
    view = any(p == VIEW or (p.startswith(f"{HOSTS}/") and p.count("/") == 1) for p in paths)
    sids = {s for p in paths if (s := _sid(p.rsplit("/", 1)[-1])) is not None and p != VIEW}
    return view, sorted(sids)


def candidates(home: Path) -> frozenset[Candidate]:
    """Every name in the state dir and hosts/ that reads as a conflict copy, with its stat."""
    out = set()
    names = copies.listdir(home)
    listing = frozenset(names)
    found = [c.name for c in copies.find(names, "root")]
    for name in copies.ambiguous_copies(names):
        c = classify(name, listing, where="root", include_ambiguous=True)
        if isinstance(c, ConflictCopy):
            found.append(name)
    host_names = copies.listdir(home / HOSTS)
    dirs = [(home, found), (home / HOSTS, [c.name for c in copies.find(host_names, "hosts")])]
    for name in host_names:  # hosts/<host>/: copies of a host's own session files
        sub = home / HOSTS / name
        if not name.endswith(".json") and not name.startswith(".") and sub.is_dir() and not sub.is_symlink():
            here = copies.listdir(sub)
            names_here = [c.name for c in copies.find(here, "root")]
            names_here += [n for n in copies.ambiguous_copies(here)
                           if isinstance(classify(n, frozenset(here), where="root", include_ambiguous=True), ConflictCopy)]
            dirs.append((sub, names_here))
    for directory, names_here in dirs:
        for name in names_here:
            try:
                st = os.lstat(directory / name)
            except OSError:
                continue
            out.add((str(directory), name, st.st_size, st.st_mtime_ns))
    return frozenset(out)


@dataclass
class Watcher:
    store: object  # subconscious.state.store.core.Store (writable)
    log: logging.Logger
    debounce: float = 0.3
    max_delay: float = 5.0
    interval: float = 60.0
    recheck: float = 1.0
    say: Callable[[str], None] = print
    gc: Callable[[], object] | None = None  # the daily gc (subconscious.sync.gc.daily); asked once per interval
    rebuild_views: bool = False  # keep this machine's views up to date with the shards (see the docstring)
    rebuilt: int = 0  # views rewritten (or found already up to date) after their sources changed
    stop: threading.Event = field(default_factory=threading.Event)
    folds: int = 0
    _wake: threading.Event = field(default_factory=threading.Event)
    _last_event: float = 0.0
    _tried: frozenset = frozenset()
    _observer: object = None
    _watching: dict = field(default_factory=dict)  # path -> (st_dev, st_ino)
    _sources: Signature | None = None  # the view sources as of the last rebuild
    _listing_due: int | None = None  # when (wall ns) the listing cache can next be refreshed (None: fresh)

    @property
    def home(self) -> Path:
        return Path(self.store.home)  # type: ignore[attr-defined]

    # ---------------------------------------------------------------- observer

    def _targets(self) -> dict[str, tuple[int, int]]:
        out = {}
        for path in (self.home, self.home / HOSTS):
            try:
                st = os.stat(path)
            except OSError:
                continue
            if os.path.isdir(path):
                out[str(path)] = (st.st_dev, st.st_ino)
        return out

    def _rebuild(self, targets: dict[str, tuple[int, int]]) -> None:
        from watchdog.events import FileSystemEventHandler
        from watchdog.observers import Observer

        self._stop_observer()
        watcher = self

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event) -> None:  # noqa: ANN001
                if event.event_type in ("opened", "closed_no_write"):
                    return
                names = [os.path.basename(p) for p in (event.src_path, getattr(event, "dest_path", "")) if p]
                if names and all(is_temporary(n) is not None for n in names):
                    return  # a temp file being written: the rename that follows is the event that counts
                watcher._last_event = time.monotonic()
                watcher._wake.set()

        observer = Observer()
        live = {}
        for path, ident in targets.items():
            try:
                # hosts/<host>/ holds the session shards (and a sync engine's copies of them)
                deep = path == str(self.home / HOSTS)
                observer.schedule(Handler(), path, recursive=deep)
                live[path] = ident
            except OSError as exc:  # vanished between the stat and the watch
                self.log.info("watch: cannot watch %s yet: %s", path, exc)
        observer.daemon = True
        try:
            observer.start()
        except OSError as exc:  # a directory vanished before its watch was set: try again on the next check
            self.log.info("watch: cannot watch yet (%s); retrying", exc)
            try:
                observer.stop()
            except Exception:
                pass
            return
        self._observer, self._watching = observer, live

    def _stop_observer(self) -> None:
        if self._observer is not None:
            try:
                self._observer.stop()  # type: ignore[attr-defined]
                self._observer.join(5)  # type: ignore[attr-defined]
            except Exception as exc:  # a dead emitter must not stop the watcher
                self.log.info("watch: stopping the old observer: %s", exc)
        self._observer, self._watching = None, {}

    def _check_dirs(self) -> bool:
        """Re-watch when a watched directory went away, came back, or was replaced. True if changed."""
        targets = self._targets()
        if targets == self._watching:
            return False
        gone = set(self._watching) - set(targets)
        for path in sorted(gone):
            self.log.info("watch: %s disappeared; waiting for it to come back", path)
            self.say(f"{path} disappeared; waiting for it to come back")
        for path in sorted(set(targets) - set(self._watching)):
            if self._watching or path != str(self.home / HOSTS):
                self.log.info("watch: watching %s", path)
        self._rebuild(targets)
        return True

    # ---------------------------------------------------------------- folding

    def fold_if_needed(self, force: bool = False) -> int:
        """Fold when there are copies not already tried; returns how many copies were moved away."""
        before = candidates(self.home)
        if not before or (not force and not (before - self._tried)):
            return 0
        t0 = time.monotonic()
        try:
            result = self.store.fold_all()  # type: ignore[attr-defined]
        except Exception as exc:  # lock timeout, disk full, a directory vanishing mid-fold: retry later
            self.log.warning("watch: fold failed (%s: %s); will retry", type(exc).__name__, exc)
            self.say(f"fold failed ({type(exc).__name__}: {exc}); will retry")
            return 0
        after = candidates(self.home)
        # tried: what was there before the fold and is still there, as it was. A copy that arrived during
        # the fold was never looked at (its arrival's wake must fold it), and one that changed is new
        self._tried = before & after
        moved = sorted({name for _, name, _, _ in before} - {name for _, name, _, _ in after})
        if moved:
            self.folds += len(moved)
            ms = (time.monotonic() - t0) * 1000
            self.log.info("watch: folded %d conflict copies in %.0f ms (%s): %s", len(moved), ms, result, ", ".join(moved))
            self.say(f"folded {len(moved)} conflict cop{'y' if len(moved) == 1 else 'ies'} in {ms:.0f} ms: {', '.join(moved)}")
        return len(moved)

    def rebuild_views_if_needed(self) -> int:
        """With ``rebuild_views``: rewrite the views whose sources changed since the last look; returns
        how many were looked at (0: nothing changed)."""
        if not self.rebuild_views:
            return 0
        sources = view_sources(self.home)
        view, sids = changed_views(self._sources, sources)
        if not view and not sids:
            return 0
        from ..state.ids import is_session_id

        try:
            if view:
                self.store.refresh()  # type: ignore[attr-defined]
            for sid in sids:
                if is_session_id(sid):
                    self.store.fold_session(sid)  # type: ignore[attr-defined]
        except Exception as exc:  # lock timeout, disk full, a directory vanishing: the next change retries
            self.log.warning("watch: rebuilding the views failed (%s: %s); will retry", type(exc).__name__, exc)
            self.say(f"rebuilding the views failed ({type(exc).__name__}: {exc}); will retry")
            return 0
        # the sources as they were before our writes: our own writes are seen as one more change, and
        # find nothing to do; a change that landed during the rebuild is not skipped
        self._sources = sources
        done = int(view) + len(sids)
        self.rebuilt += done
        self.log.info("watch: views rebuilt from changed sources (%s%d session file(s))",
                      "conversations.json, " if view else "", len(sids))
        return done

    def refresh_listings(self) -> None:
        """Keep this machine's listing cache of the home fresh (state/sessions/listcache.py), so that a hook's read
        after a change lists no directory: each changed directory is listed again once it has been quiet for
        RACY_NS (the loop wakes for it then), the rule a hook's own listing is trusted by."""
        try:
            self._listing_due = self.store.refresh_listings()  # type: ignore[attr-defined]
        except Exception as exc:  # a directory vanishing, the cache unwritable: a hook lists it itself
            self.log.info("watch: refreshing the listing cache: %s: %s", type(exc).__name__, exc)
            self._listing_due = None

    def _until_listing(self) -> float | None:
        if self._listing_due is None:
            return None
        return max(0.0, (self._listing_due - time.time_ns()) / 1e9)

    def gc_if_due(self) -> None:
        if self.gc is None:
            return
        try:
            done = self.gc()
        except Exception as exc:  # lock timeout, a directory vanishing: tomorrow's run retries
            self.log.warning("watch: gc failed (%s: %s); will retry", type(exc).__name__, exc)
            return
        if done is not None:
            self.say(f"gc: {done}")

    # ---------------------------------------------------------------- loop

    def request_stop(self) -> None:
        self.stop.set()
        self._wake.set()

    def run(self) -> int:
        self.log.info("watch: started on %s (host %s)", self.home, getattr(self.store, "host", "?"))
        self._check_dirs()
        if str(self.home) not in self._watching:
            self.say(f"waiting for {self.home} to appear")
        self.fold_if_needed(force=True)
        self.rebuild_views_if_needed()
        self.gc_if_due()
        self.refresh_listings()
        self.say(f"watching {self.home} (host {getattr(self.store, 'host', '?')}); stop with Ctrl-C or SIGTERM")
        last_scan = time.monotonic()
        try:
            while not self.stop.is_set():
                until = self._until_listing()
                woke = self._wake.wait(self.recheck if until is None else min(self.recheck, until + 0.05))
                if self.stop.is_set():
                    break
                if self._check_dirs():
                    woke = True
                    self._last_event = time.monotonic()
                if woke:
                    first = time.monotonic()
                    while not self.stop.is_set():  # debounce: until quiet, but not forever
                        quiet = time.monotonic() - self._last_event
                        if quiet >= self.debounce or time.monotonic() - first >= self.max_delay:
                            break
                        self.stop.wait(self.debounce - quiet)
                    self._wake.clear()
                    if self.stop.is_set():
                        break
                    self.fold_if_needed()
                    self.rebuild_views_if_needed()
                    self.refresh_listings()
                elif self._until_listing() == 0.0:
                    self.refresh_listings()
                # by the time since the last scan, woken or not: a home that changes more often than once a
                # recheck (sessions in progress) would otherwise never get it
                if time.monotonic() - last_scan >= self.interval:
                    self.fold_if_needed(force=True)  # what a fold left (a lease kept busy) is tried again
                    self.rebuild_views_if_needed()
                    self.gc_if_due()
                    self.refresh_listings()
                    last_scan = time.monotonic()
        finally:
            self._stop_observer()
            self.log.info("watch: stopped (%d copies folded)", self.folds)
            self.say(f"stopped ({self.folds} copies folded)")
        return 0
