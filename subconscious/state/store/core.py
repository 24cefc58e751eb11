"""The state store: read → plan → apply on the shared state directory, redone when it loses a race.

Layout of ``$LETTA_HOME/.letta/claude/``::

    conversations.json            merged view, upstream-readable: {session_id: {conversationId, agentId, hlc, host}}
    session-<id>.json             one session's merged state, upstream-readable (upstream's format + host, hlc)
    hosts/<host>.json             this host's shard: its entries, tombstones and settings
    hosts/<host>/session-<id>.json  this host's version of a session
    quarantine/, backups/         bytes set aside, conflict copies folded — kept until gc prunes them by age

No lock can span hosts, and none is needed: every host writes only its own shard files (its processes
take the machine-local host lock), and every reader merges all shards. The two views are written by
everyone — other hosts, sync engines, upstream's plugin — so they are published with
:func:`~subconscious.state.publish.publish`, which never throws away a version it did not merge: a
write that finds someone else's version there is redone with it as one more source. A view is
therefore never the only place a write of ours lives; what upstream writes into it is adopted (and
stamped) into the next writer's shard.

The store is composed of :mod:`.reading` (merging every source into a :class:`Snapshot`),
:mod:`.writing` (the clock and the publish of a write) and :mod:`.upkeep` (retirement, merge-in,
folding, sweeping); the types a read yields and the layout's names are in :mod:`.snapshot`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from ..clock import Stamp, wall_ms
from ..files import Problem
from ..fs import FS, REAL
from ..locks import DEFAULT_TIMEOUT
from .reading import Reading
from ..sessions.core import SessionFiles, session_file_name
from .snapshot import (  # re-exported: their old home
    BACKUPS,
    CONVERSATIONS,
    DAY_MS,
    HEARTBEAT_MS,
    HOSTS,
    MAX_REDO,
    SHARD_FORMAT,
    TOMBSTONE_RETENTION_MS,
    ShardInfo,
    Snapshot,
    StoreError,
    _Read,
    floor_of,
)
from ..sources import Reader
from .upkeep import Upkeep
from ..viewlock import LEASE_WAIT_S
from .writing import Writing

__all__ = ["Snapshot", "ShardInfo", "Store", "StoreError", "open_store", "session_file_name"]


class Store(Reading, Writing, Upkeep):
    def __init__(
        self,
        home: Path,
        host: str,
        locks_dir: Path,
        clocks_dir: Path,
        *,
        host_name: str | None = None,
        lock_timeout: float = DEFAULT_TIMEOUT,
        now: Callable[[], int] = wall_ms,
        retention_ms: int = TOMBSTONE_RETENTION_MS,
        read_only: bool = False,
        fs: FS = REAL,
    ):
        self.home = Path(home)
        self.host = host
        self.host_name = host_name or host
        self.locks_dir, self.clocks_dir = Path(locks_dir), Path(clocks_dir)
        self.lock_timeout = lock_timeout
        self.lease_wait_s = LEASE_WAIT_S  # what a write waits for a view lease another holder keeps (a hook sets less)
        self.views_busy: dict[str, float] = {}  # (see Writing._leased: one wait per view per BUSY_MEMORY_S)
        self.now = now
        self.retention_ms = retention_ms
        self.read_only = read_only  # report problems without setting anything aside; refuse writes
        self.fs = fs = fs.confined(self.home)
        self.reader = Reader(fs, self.home, host, keep=not read_only)
        self.session_files = SessionFiles(self)
        self.retiring: frozenset[str] = frozenset()  # hosts whose files are being retired (read as copies)
        self.keep_caches = True  # False: not even a machine-local cache is written (preview changes nothing)
        self.views_held: set[str] = set()  # the view leases this store holds (nested writes never wait on them)
        self.views_deferred: set[str] = set()  # views whose lease stayed taken during the current write

    # ------------------------------------------------------------------ paths

    @property
    def view_path(self) -> Path:
        return self.home / CONVERSATIONS

    def shard_path(self, host: str | None = None) -> Path:
        return self.home / HOSTS / f"{host or self.host}.json"

    def lock(self):
        return self.fs.lock(self.locks_dir, self.host, self.lock_timeout)

    # ------------------------------------------------------------------ sessions (composed)

    def session_path(self, session_id: str) -> Path:
        return self.home / session_file_name(session_id)

    def session_floor(self) -> Stamp:
        return self.session_files.floor()

    def session_ids(self, names: list[str] | None = None) -> list[str]:
        return self.session_files.ids(names)

    def sessions(self):
        return self.session_files.all()

    def _read_session(self, session_id: str, names: list[str] | None = None):
        return self.session_files.read(session_id, names)

    def session(self, session_id: str):
        return self.session_files.read(session_id)[0]

    def session_problems(self, session_id: str) -> list[Problem]:
        return self.session_files.read(session_id)[1]

    def update_session(self, session_id: str, change):
        return self.session_files.update(session_id, change)

    def refresh_listings(self, large: int = 0) -> int | None:
        return self.session_files.refresh_listings(large)

    def fold_session(self, session_id: str) -> list[Path]:
        return self.session_files.fold(session_id)


def open_store(home: Path, host: str, local_root: Path, **kw: Any) -> Store:
    """A store for ``home`` with machine-local locks and clocks under ``local_root``."""
    return Store(home, host, Path(local_root) / "locks", Path(local_root) / "clocks", **kw)
