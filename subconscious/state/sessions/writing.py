"""Writing one session's state: this host's version merged (the cursor never moves back), then the view,
redone from a fresh read when a publish finds a version it did not merge; re-stamping a session still in
use, merging in an archive's version, folding conflict copies. A mixin of :class:`~.sessions.SessionFiles`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable

from ..clock import ZERO, Stamp
from ..ids import check_session_id
from ..merge import merge_sessions
from ..order import same_json
from ..publish import publish
from ..records import LEGACY_HOST, SessionState
from .reading import MAX_REDO, with_adopted
from ..textforms import dumps_canonical

log = logging.getLogger("subconscious")


class SessionWriting:
    """The write side of :class:`~.sessions.SessionFiles`."""

    # ------------------------------------------------------------------ writing

    def update(self, session_id: str, change: Callable[[SessionState | None], SessionState | None]
               ) -> SessionState | None:
        """Read the session (every version), apply ``change``, write this host's version merged (the
        cursor never moves back) and publish the view; redone when a publish finds a version it did not
        merge. ``change`` returning None, or a state equal to the current one, writes nothing of ours."""
        check_session_id(session_id)
        self.store._writable()
        with self.store.lock(), self.store._view_lock(self.view_path(session_id)):
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
            stamp = self.store._next_stamp(max(current.stamp if current else ZERO, reads["pass"]))
            proposed = proposed.evolve(stamp=stamp, host=self.store.host)
            if current is not None and current.host == LEGACY_HOST:  # upstream's version, first adopted
                proposed = with_adopted(proposed, current)
            merged = merge_sessions(current, proposed) if current is not None else proposed
            if self._publish_own(session_id, merged, reads):
                return merged, True
        return merged, self._publish_view(session_id, merged, reads)

    def _publish_own(self, session_id: str, state: SessionState, reads: dict) -> bool:
        """Publish ``state`` as this host's version; True when the publish found a version it did not
        merge (redo from a fresh read)."""
        own_raw = reads["own"].raw if reads["own"] is not None else None
        self.fs.makedirs(self.own_path(session_id).parent)
        return publish(self.fs, self.own_path(session_id), _render(state), own_raw, shared=False).redo

    def _publish_view(self, session_id: str, state: SessionState, reads: dict) -> bool:
        """Publish ``state`` as the shared view, then fold the copies and settle the displaced versions
        that were read; True (nothing folded or settled) when the publish found a version it did not merge."""
        view_raw = reads["view"].raw if reads["view"] is not None else None
        if self.store._deferred(self.view_path(session_id)):
            return False  # the lease stayed taken: this host's version holds the write, the view waits
        if publish(self.fs, self.view_path(session_id), _render(state), view_raw).redo:
            return True
        self._finish(reads)
        return False

    def _publish_both(self, session_id: str, state: SessionState, reads: dict) -> bool:
        return self._publish_own(session_id, state, reads) or self._publish_view(session_id, state, reads)

    def _finish(self, reads: dict) -> list[Path]:
        """After the view's publish: file the folded copies away, settle the displaced versions; returns the
        copies moved."""
        folded = self.store._fold(reads["folds"])
        self.store._settle(reads["displaced"])
        return folded

    def touch(self, session_id: str, floor: Stamp) -> SessionState | None:
        """Re-stamp a session that is still in use so that it stays above ``floor`` (gc calls this before
        it raises the floor): its merged state, as it is, becomes this host's version with a new stamp."""
        self.store._writable()
        with self.store.lock(), self.store._view_lock(self.view_path(session_id)):
            for _ in range(MAX_REDO):
                current, _, reads = self._read(session_id)
                if current is None or (current.stamp >= floor and current.host != LEGACY_HOST):
                    return current
                stamp = self.store._next_stamp(max(current.stamp, floor, reads["pass"]))
                if current.host == LEGACY_HOST:
                    current = with_adopted(current, current)
                current = current.evolve(stamp=stamp, host=self.store.host)
                if not self._publish_both(session_id, current, reads):
                    return current
            return None

    def merge_in(self, state: SessionState) -> str:
        """Merge a version from elsewhere (an archive) with its own stamp, the way copies merge: the cursor
        never moves back, the rest goes by the one order, so a version older than the home's changes only
        what is behind (nothing, usually) and merging it twice is merging it once. Below the session floor
        it is retired here already. Returns "merged", "same" or "retired"."""
        self.store._writable()
        session_id = check_session_id(state.session_id)
        with self.store.lock(), self.store._view_lock(self.view_path(session_id)):
            for _ in range(MAX_REDO):
                current, _, reads = self._read(session_id)
                if state.stamp < reads["floor"]:
                    return "retired"
                merged = merge_sessions(current, state) if current is not None else state
                if current is not None and same_json(merged.to_json(), current.to_json()) and not _adopt(current, reads):
                    return "same"
                if merged.host == LEGACY_HOST:
                    merged = with_adopted(merged, merged).evolve(stamp=self.store._next_stamp(max(merged.stamp, reads["pass"])),
                                           host=self.store.host)
                if not self._publish_both(session_id, merged, reads):
                    return "merged"
            return "merged"

    def fold(self, session_id: str) -> list[Path]:
        """Write the session merged with its copies (rebuilding a missing view) and move the copies to
        backups/."""
        self.store._writable()
        with self.store.lock(), self.store._view_lock(self.view_path(session_id)):
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
                        current = with_adopted(current, current).evolve(stamp=self.store._next_stamp(current.stamp),
                                                                        host=self.store.host)
                    if self._publish_own(session_id, current, reads):
                        continue
                if self.store._deferred(self.view_path(session_id)):
                    return []
                if publish(self.fs, self.view_path(session_id), _render(current), view_raw).redo:
                    continue
                return self._finish(reads)
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
