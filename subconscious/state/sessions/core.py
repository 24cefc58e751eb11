"""Session state: ``session-<id>.json`` (the upstream-readable view) and one version per host
(``hosts/<host>/session-<id>.json``), merged so that the cursor never moves back.

Each host writes only its own version (under its host lock); a reader merges the view, every host's
version, their conflict copies and displaced versions. The view is published like the conversations
view (:mod:`..publish`), so what upstream writes there is merged, never overwritten unread: its
version counts as newer than the one it replaced (see :func:`session_view_version`).

:class:`SessionFiles` is composed of :mod:`.reading` (listing, reading and merging versions),
:mod:`.writing` (updates, touch, merge-in, fold) and :mod:`.retirement` (the session floor,
removing retired files); the names this module always offered are re-exported from them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..clock import ZERO
from ..ids import is_host_id
from .reading import (  # re-exported with the rest: their old home
    HOSTS,
    MAX_REDO,
    SESSION_PREFIX,
    SESSION_SUFFIX,
    SessionReading,
    _group,
    _sid_of,
    counts,
    session_file_name,
    session_view_version,
)
from .retirement import _FLOOR_RE, FLOOR_FILE, FLOOR_FORMAT, SessionRetirement
from .writing import SessionWriting, _adopt, _render, _same_content, log

if TYPE_CHECKING:  # pragma: no cover
    from ..store.core import Store


class SessionFiles(SessionReading, SessionWriting, SessionRetirement):
    def __init__(self, store: "Store"):
        self.store = store
        self.fs = store.fs
        self.pending_floor = ZERO  # the highest floor the last floor read ignored as ahead (writes stamp past it)
        self._host_paths: dict[str, Path] = {}  # hosts/<host>/ of each host read (a Path made once, not per file)

    @property
    def home(self) -> Path:
        return self.store.home

    def view_path(self, session_id: str) -> Path:
        return self.home / session_file_name(session_id)

    def own_path(self, session_id: str) -> Path:
        return self.home / HOSTS / self.store.host / session_file_name(session_id)

    def _host_dirs(self) -> list[str]:
        return sorted(n for n in self.fs.listdir(self.home / HOSTS) if is_host_id(n) and not n.endswith(".json"))
