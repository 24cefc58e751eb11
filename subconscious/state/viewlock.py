"""A short lease on one shared view among the hosts whose processes share its directory.

:func:`~.publish.publish` never loses a version, but on its own it cannot keep a view from going back
for a moment: host A checks that the view is still what it read, host B publishes a newer version and
returns (its write is acknowledged), then A's swap puts A's older version in place; A finds B's version
displaced and redoes, but until then upstream reads a view without B's write (a cursor that went down,
a conversation that vanished). No file system we support has a compare-and-swap on a file's content, so
the hosts that share a directory take turns: a writer of ``conversations.json`` or ``session-<id>.json``
holds ``.subconscious-tmp-lock-<name>`` beside it from its read to its publish.

The lease is a file created only if its name is free (``O_CREAT | O_EXCL``, atomic on local disks,
NFSv3+ and SMB, so it works where neither swap nor hard links do) and released by removing it if it
still holds our token. It is a
guard for the view only — nothing depends on it for not losing data (every host's own files hold its
writes) — so it never blocks for long and never fails an operation:

- held by someone else: wait (at most :data:`WAIT_S`), then go on without it;
- older than :data:`STALE_S` (its holder was killed) or dated in the future: removed, then taken;
- this owner's (this host's) from another process: removed at once, then taken. Every writer of a host
  holds the host's own lock while it holds a lease, and the caller holds that lock now, so such a lease
  was left by a writer that was killed in between (a hook cut off at its timeout): without this, the
  next write on this host, and the next hook, waited :data:`STALE_S` for it;
- a lock name that is not a regular file (a symlink, a directory, a FIFO) or larger than a lock file
  ever is, a directory we cannot write: go on without it (docs/views-and-filesystems.md says what can happen then).

Sync kits ignore ``.subconscious-tmp-*``, so a lease is never carried to another replica; hosts on
different replicas cannot take turns (their views converge through the sync engine instead).
"""

from __future__ import annotations

import logging
import os
import secrets
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .fs import FS, TEMP_PREFIX

LOCK = TEMP_PREFIX + "lock-"
WAIT_S = 10.0  # at most (a store waits as long as for its host lock); a holder holds for one read and one
# publish: milliseconds, a slow NFS under load a few hundred — with six hosts waiting, seconds
STALE_S = 3.0  # a holder holds for one read and one publish (ms; a slow NFS under load, hundreds): a lease
# older than this was left by a killed writer of another host; each of that host's writes after it waited 10 s
POLL_S = 0.005
# what a store's write waits at most for a lease another holder keeps: a hook's budget is seconds, and a
# lease kept fresh (a holder that never lets go, a toucher) cost every put the whole WAIT_S. A write that
# does not get the lease in time writes this host's files only (acknowledged) and leaves the view to a
# write that gets it (:class:`~.writing.Writing`): never published without the lease, it cannot go back
LEASE_WAIT_S = 1.0
BUSY = None  # what view_lock yields when another holder kept the lease for the whole wait
BUSY_MEMORY_S = 30.0  # a store that found a lease kept that long does not wait for it again for this long
LOCK_CAP = 4096  # a lock file is one line; anything larger is not ours (never read whole, every poll)

log = logging.getLogger("subconscious")


def lock_path(view: Path) -> Path:
    return view.with_name(LOCK + view.name)


PENDING = TEMP_PREFIX + "pending-"


def pending_path(view: Path) -> Path:
    """The marker a writer that gave up waiting for the lease leaves: ``view`` is behind its host's files
    (the holder publishes it again before letting go; see :meth:`.writing.Writing._catch_up`)."""
    return view.with_name(PENDING + view.name)


@contextmanager
def view_lock(fs: FS, view: Path, owner: str, held: set[str] | None = None, *, wait_s: float | None = None,
              stale_s: float | None = None) -> Iterator[bool]:
    """Hold the lease on ``view`` (yields whether it was taken). ``held``: the leases this store holds
    already (taking one again is a no-op, so nested operations never wait for themselves). The caller holds
    ``owner``'s host lock (see the module's docstring: a lease of ``owner`` from another process is a dead one's).
    Yields True (taken), False (no lease can be had here: go on without it) or :data:`BUSY` (another holder
    kept it for the whole wait)."""
    key = str(view)
    if held is not None and key in held:
        yield True
        return
    wait_s = WAIT_S if wait_s is None else wait_s
    stale_s = STALE_S if stale_s is None else stale_s
    lock = lock_path(view)
    token = f"{owner} {os.getpid()} {secrets.token_hex(8)}\n".encode()
    taken = _acquire(fs, lock, token, wait_s, stale_s, f"{owner} ".encode(), f"{owner} {os.getpid()} ".encode())
    if taken and held is not None:
        held.add(key)
    try:
        yield taken
    finally:
        if taken:
            if held is not None:
                held.discard(key)
            got = fs.read(lock, cap=LOCK_CAP)
            if got.ok and got.data == token:
                fs.unlink(lock)


def _stale_by_its_clock(fs: FS, lock: Path, when: float, stale_s: float) -> bool:
    """Is a lease dated ``when`` (its mtime, set by the file server's clock) older than ``stale_s``, or in the
    future, by the same clock? A server whose clock is 3 s off ours made a live lease look stale: the time now
    is read from a file written in the same directory (once per suspicion; it is removed at once). Where no
    file can be written, our clock decides, as before."""
    try:
        probe = fs.put_temp(lock.parent, "clock", b"", durable=False)
    except (OSError, ValueError):
        return True
    try:
        now = fs.mtime(probe)
    finally:
        fs.unlink(probe)
    return now is None or abs(now - when) > stale_s


def _acquire(fs: FS, lock: Path, token: bytes, wait_s: float, stale_s: float, ours: bytes, this_process: bytes) -> bool:
    deadline = fs.now() + wait_s
    try:
        fs.makedirs(lock.parent)
    except OSError:
        return False  # a directory we cannot write to: the publish itself will say so
    while True:
        try:
            if fs.create_new(lock, token):
                return True
        except OSError:  # a directory we cannot write to, a link on the way: no lease
            return False
        got = fs.read(lock, cap=LOCK_CAP)
        if got.status == "missing":
            if fs.now() < deadline:
                continue  # released just now: try again at once
            return False
        if not got.ok:
            log.warning("state: %s is not a lock file of ours (%s); writing without it", lock, got.status)
            return False
        if got.data.startswith(ours) and not got.data.startswith(this_process):  # this host's, a killed writer's
            again = fs.read(lock, cap=LOCK_CAP)
            if again.ok and again.data == got.data:
                log.warning("state: removed %s, left by a writer of this host that was stopped", lock)
                fs.unlink(lock)
            continue
        when = fs.mtime(lock)
        if when is not None and abs(fs.now() - when) > stale_s and _stale_by_its_clock(fs, lock, when, stale_s):
            again = fs.read(lock, cap=LOCK_CAP)
            if again.ok and again.data == got.data:  # still the stale one (not a new holder's)
                log.warning("state: removed %s, left by a writer that stopped %.0f s ago", lock, fs.now() - when)
                fs.unlink(lock)
            continue
        left = deadline - fs.now()
        if left <= 0:
            log.warning("state: %s stayed taken for %.1f s; writing without it", lock, wait_s)
            return BUSY
        fs.wait_gone(lock, min(POLL_S, left))
