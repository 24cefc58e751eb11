"""Session files (``session-<id>.json``): read with their conflict copies, updated under the host
lock with a merge that never moves the cursor back.

A base class of :class:`~subconscious.state.store.Store`; it uses the store's paths, lock, clock
and reading helpers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

from . import copies
from .clock import ZERO
from .files import Problem, atomic_write
from .ids import check_session_id, is_session_id
from .merge import merge_session_versions, merge_sessions
from .records import RecordError, SessionState, parse_session
from .textforms import dumps_canonical

CONVERSATIONS = "conversations.json"
SESSION_PREFIX, SESSION_SUFFIX = "session-", ".json"


def session_file_name(session_id: str) -> str:
    return f"{SESSION_PREFIX}{check_session_id(session_id)}{SESSION_SUFFIX}"


class SessionFiles:
    home: Path
    host: str

    def session_path(self, session_id: str) -> Path:
        return self.home / session_file_name(session_id)

    def session_ids(self, names: list[str] | None = None) -> list[str]:
        """Sessions with a file here (not counting OneDrive-style copies named like a session)."""
        out: list[str] = []
        names = copies.listdir(self.home) if names is None else names
        copy_names = copies.ambiguous_copies(names)
        for name in names:
            if name in copy_names or not copies.plain(name):  # a OneDrive/Nextcloud copy named like a session
                continue
            if name.startswith(SESSION_PREFIX) and name.endswith(SESSION_SUFFIX):
                sid = name[len(SESSION_PREFIX) : -len(SESSION_SUFFIX)]
                if is_session_id(sid):
                    out.append(sid)
        return sorted(out)

    def sessions(self) -> Iterator[tuple[str, SessionState | None, list[Problem]]]:
        """Every session with its merged state and problems, from one listing of the directory (reading
        them one by one with :meth:`session` would list it once per session)."""
        names = copies.listdir(self.home)
        for sid in self.session_ids(names):
            state, problems, _ = self._read_session(sid, names)
            yield sid, state, problems

    def _read_session(self, session_id: str, names: list[str] | None = None
                      ) -> tuple[SessionState | None, list[Problem], list[copies.Found]]:
        """The session merged from its file and every conflict copy of it."""
        name = session_file_name(session_id)
        found = copies.find(copies.listdir(self.home) if names is None else names, "root", name)
        versions, problems, folded = [], [], []
        for path, copy in [(self.home / name, None), *((self.home / c.name, c) for c in found)]:
            doubtful = (copy is not None and copy.weak) or (copy is not None and copy.ambiguous)
            result = self._read_json(path, copy)
            local, parsed = list(result.problems), []
            for value in result.values:
                try:
                    parsed.append(parse_session(value, session_id))
                except RecordError as exc:
                    kept = None if doubtful else self._aside(path, result.raw, "invalid-entry")
                    local.append(Problem("invalid-entry", str(path), f"not a session state: {exc}", kept))
            if doubtful and (local or not parsed):
                continue  # a weak name match whose content is not this session's
            versions += parsed
            problems += local
            if copy is not None and result.exists:
                folded.append(copies.Found(path, copy, result.raw))
        return merge_session_versions(versions), problems, folded

    def session(self, session_id: str) -> SessionState | None:
        return self._read_session(session_id)[0]

    def session_problems(self, session_id: str) -> list[Problem]:
        return self._read_session(session_id)[1]

    def update_session(
        self, session_id: str, change: Callable[[SessionState | None], SessionState | None]
    ) -> SessionState | None:
        """Read the session (with its conflict copies), apply ``change`` and write the result merged,
        so the cursor never moves back; then fold the copies. ``change`` returning None, or a state
        equal to the current one, writes nothing (copies are then left for :meth:`fold_session`)."""
        check_session_id(session_id)
        self._writable()
        with self.lock():
            current, _, found = self._read_session(session_id)
            proposed = change(current)
            if proposed is None:
                return current
            proposed = proposed.evolve(session_id=session_id)
            if current is not None and _same_content(current, proposed):
                return current
            stamp = self._next_stamp(current.stamp if current else ZERO)
            proposed = proposed.evolve(stamp=stamp, host=self.host)
            merged = merge_sessions(current, proposed) if current is not None else proposed
            atomic_write(self.session_path(session_id), dumps_canonical(merged.to_json(), expand=1))
            copies.fold(found, self.home, self.host)
            return merged

    def fold_session(self, session_id: str) -> list[Path]:
        """Write the session merged with its conflict copies and move the copies to backups/."""
        self._writable()
        with self.lock():
            current, _, found = self._read_session(session_id)
            if not found or current is None:
                return []
            atomic_write(self.session_path(session_id), dumps_canonical(current.to_json(), expand=1))
            return copies.fold(found, self.home, self.host)

def _same_content(a: SessionState, b: SessionState) -> bool:
    strip = lambda s: {k: v for k, v in s.to_json().items() if k not in ("hlc", "host")}  # noqa: E731
    return strip(a) == strip(b)
