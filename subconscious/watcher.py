"""Fold sync engines' conflict copies as they arrive (what ``subconscious watch`` runs).

A watchdog observer on the state dir and ``hosts/`` wakes the loop; the loop waits until events have
been quiet for ``debounce`` seconds, then checks for conflict copies (a directory listing) and, only
if there are new ones, runs ``Store.fold_all``. Our own writes wake it too, but find nothing new, so
there is no write loop; a lookalike that turns out not to be ours is not retried until it changes.

Once a second (an Event wait, no busy loop) it checks that the watched directories are still the
ones it watches: a directory that disappeared (an unmounted drive, a sync engine re-creating the
folder) is dropped, and watched again with a fresh fold when it comes back. A periodic rescan
(``interval``) catches anything the OS did not report.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .state import copies
from .state.conflicts import ConflictCopy, classify, is_temporary

HOSTS = "hosts"

Candidate = tuple[str, str, int, int]  # (dir, name, size, mtime_ns)


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
    for directory, names_here in ((home, found), (home / HOSTS, [c.name for c in copies.find(host_names, "hosts")])):
        for name in names_here:
            try:
                st = os.lstat(directory / name)
            except OSError:
                continue
            out.add((str(directory), name, st.st_size, st.st_mtime_ns))
    return frozenset(out)


@dataclass
class Watcher:
    store: object  # subconscious.state.store.Store (writable)
    log: logging.Logger
    debounce: float = 0.3
    max_delay: float = 5.0
    interval: float = 60.0
    recheck: float = 1.0
    say: Callable[[str], None] = print
    gc: Callable[[], object] | None = None  # the daily gc (subconscious.gc.daily); asked once per interval
    stop: threading.Event = field(default_factory=threading.Event)
    folds: int = 0
    _wake: threading.Event = field(default_factory=threading.Event)
    _last_event: float = 0.0
    _tried: frozenset = frozenset()
    _observer: object = None
    _watching: dict = field(default_factory=dict)  # path -> (st_dev, st_ino)

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
                observer.schedule(Handler(), path, recursive=False)
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
        self._tried = after  # what is left is not ours, or changed meanwhile (then its stat differs)
        moved = sorted({name for _, name, _, _ in before} - {name for _, name, _, _ in after})
        if moved:
            self.folds += len(moved)
            ms = (time.monotonic() - t0) * 1000
            self.log.info("watch: folded %d conflict copies in %.0f ms (%s): %s", len(moved), ms, result, ", ".join(moved))
            self.say(f"folded {len(moved)} conflict cop{'y' if len(moved) == 1 else 'ies'} in {ms:.0f} ms: {', '.join(moved)}")
        return len(moved)

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
        self.gc_if_due()
        self.say(f"watching {self.home} (host {getattr(self.store, 'host', '?')}); stop with Ctrl-C or SIGTERM")
        last_scan = time.monotonic()
        try:
            while not self.stop.is_set():
                woke = self._wake.wait(self.recheck)
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
                elif time.monotonic() - last_scan >= self.interval:
                    self.fold_if_needed()
                    self.gc_if_due()
                    last_scan = time.monotonic()
        finally:
            self._stop_observer()
            self.log.info("watch: stopped (%d copies folded)", self.folds)
            self.say(f"stopped ({self.folds} copies folded)")
        return 0
