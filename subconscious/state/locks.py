"""The per-host lock: one OS lock file per host, in the machine-local state dir.

Hosts never contend for one file and nothing is written to the synced tree to take it (a lock file in
a synced folder is useless: each machine's O_EXCL create succeeds and one becomes a conflict copy).
Correctness across hosts does not rest on this lock: each host writes only its own shard; the lock
serialises the processes of one host (hooks, worker, watcher).

On POSIX the lock is ``fcntl.flock`` (what portalocker uses there too) — importing portalocker costs
~35 ms through ``importlib.metadata``, too much for a hook; Windows uses portalocker. The holder
writes its pid, host and start time into the lock file so that a lock held past its timeout is
reported with who holds it, never silently broken.
"""

from __future__ import annotations

import json
import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ..base.atomic import FILE_MODE, ensure_dir

try:
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)

except ImportError:  # pragma: no cover - Windows
    import msvcrt  # noqa: F401

    def _try_lock(fd: int) -> bool:
        import portalocker

        try:
            portalocker.lock(fd, portalocker.LOCK_EX | portalocker.LOCK_NB)
            return True
        except portalocker.exceptions.LockException:
            return False

    def _unlock(fd: int) -> None:
        import portalocker

        portalocker.unlock(fd)


DEFAULT_TIMEOUT = 10.0


class LockTimeout(TimeoutError):
    """The host lock was held by another process longer than our timeout."""

    def __init__(self, path: Path, waited: float, holder: dict):
        self.path, self.waited, self.holder = path, waited, holder
        who = (
            f"pid {holder.get('pid')} on host {holder.get('host')!r} since {holder.get('since')}"
            if holder
            else "an unknown process"
        )
        super().__init__(f"lock {path} still held after {waited:.1f} s by {who}; not breaking it")


def read_holder(path: Path) -> dict:
    try:
        data = json.loads(path.read_text() or "{}")
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def probe(path: Path) -> dict | None:
    """Who holds the lock right now (their note), or None when it is free. Takes nothing."""
    if not path.exists():
        return None
    fd = os.open(path, os.O_RDWR)
    try:
        if _try_lock(fd):
            _unlock(fd)
            return None
        return read_holder(path) or {"pid": None}
    finally:
        os.close(fd)


_local = threading.local()
_thread_lock = threading.RLock()


@contextmanager
def host_lock(locks_dir: Path, host: str, timeout: float = DEFAULT_TIMEOUT) -> Iterator[None]:
    """Hold ``locks_dir/<host>.lock`` (re-entrant within a thread)."""
    path = ensure_dir(locks_dir) / f"{host}.lock"
    depth: dict = getattr(_local, "depth", None) or {}
    _local.depth = depth
    if depth.get(path, 0):
        depth[path] += 1
        try:
            yield
        finally:
            depth[path] -= 1
        return
    with _thread_lock:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
        try:
            start = time.monotonic()
            delay = 0.001
            while not _try_lock(fd):
                waited = time.monotonic() - start
                if waited >= timeout:
                    raise LockTimeout(path, waited, read_holder(path))
                time.sleep(delay)
                delay = min(delay * 2, 0.02)
            note = json.dumps(
                {"pid": os.getpid(), "host": host, "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                 "since_epoch": time.time()}
            ).encode()
            os.ftruncate(fd, 0)
            os.pwrite(fd, note, 0)
            depth[path] = 1
            try:
                yield
            finally:
                depth[path] = 0
                try:
                    os.ftruncate(fd, 0)
                finally:
                    _unlock(fd)
        finally:
            os.close(fd)
