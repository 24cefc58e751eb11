"""The one door between the store and the file system of the shared home.

Every file operation the store makes on ``$LETTA_HOME/.letta/claude`` (and on its machine-local clock
and lock) goes through an :class:`FS`. :class:`RealFS` is the real thing; the deterministic simulation
in ``tests/simulation`` drives another implementation that can stop the caller before any operation and
run another host's whole operation, a sync-engine delivery or an upstream write there.

The primitives are the ones whose atomicity the store's correctness argument uses, and no more:

- :meth:`read` — never follows a symlink, reads regular files only, never blocks on a FIFO or device,
  at most ``cap`` bytes (a larger file is refused, not cut);
- :meth:`put_temp` + :meth:`replace` — an atomic write is two steps: a private temp file written and
  fsynced beside the target, then a rename over it;
- :meth:`exchange` — swap two names atomically (Linux ``renameat2(RENAME_EXCHANGE)``, macOS
  ``renamex_np(RENAME_SWAP)``): the store publishes a file that other writers share this way, so the
  version it replaces is never lost, even if it appeared a microsecond earlier;
- :meth:`link` — create a name for an existing file only if the name is free (atomic), used both to
  publish where no file exists yet and, where ``exchange`` is not supported, to keep the replaced version;
- :meth:`unlink`, :meth:`rename`, :meth:`listdir`, :meth:`makedirs`, :meth:`mtime`;
- :meth:`lock` — the machine-local per-host lock (serialises the processes of one host, never hosts).
"""

from __future__ import annotations

import errno
import os
import secrets
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ..atomic import DIR_MODE, FILE_MODE, TEMP_PREFIX, _fsync_dir, ensure_dir

READ_CAP = 64 * 1024 * 1024  # a state file larger than this is refused (a 100,000-entry view is ~12 MiB)


@dataclass(frozen=True)
class Got:
    """What reading one name found.

    ``status``: ``"ok"`` (``data`` holds the bytes), ``"missing"``, ``"symlink"`` (never followed),
    ``"special"`` (a FIFO, socket, device or directory: never opened for reading), ``"too-large"``,
    ``"error"`` (``detail`` says which).
    """

    status: str
    data: bytes = b""
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class FS:
    """Interface; see the module docstring. Paths are absolute :class:`~pathlib.Path` objects."""

    def read(self, path: Path, cap: int = READ_CAP) -> Got:
        raise NotImplementedError

    def listdir(self, directory: Path) -> list[str]:
        raise NotImplementedError

    def put_temp(self, directory: Path, hint: str, data: bytes, *, durable: bool = True) -> Path:
        """Write ``data`` to a new private temp file in ``directory`` (named ``TEMP_PREFIX + hint + …``)."""
        raise NotImplementedError

    def replace(self, src: Path, dst: Path, *, durable: bool = True) -> None:
        raise NotImplementedError

    def exchange(self, a: Path, b: Path) -> bool:
        """Swap the files at ``a`` and ``b`` atomically; both must exist. False where the platform or the
        file system cannot (the caller falls back); raises FileNotFoundError if one is missing."""
        raise NotImplementedError

    def link(self, src: Path, dst: Path) -> bool:
        """Give the file at ``src`` the extra name ``dst`` if ``dst`` is free: True; False if ``dst``
        exists. Raises OSError where hard links are not supported (the caller falls back)."""
        raise NotImplementedError

    def unlink(self, path: Path) -> bool:
        """Remove a name; False if it was already gone."""
        raise NotImplementedError

    def rename(self, src: Path, dst: Path) -> bool:
        """Move ``src`` to ``dst`` (replacing it); False if ``src`` was gone."""
        raise NotImplementedError

    def makedirs(self, directory: Path) -> None:
        raise NotImplementedError

    def mtime(self, path: Path) -> float | None:
        """Modification time in seconds (not following links), None if missing."""
        raise NotImplementedError

    def now(self) -> float:
        """The wall clock in seconds, as this file system's mtimes are written."""
        raise NotImplementedError

    def lock(self, locks_dir: Path, host: str, timeout: float):
        """Context manager: the per-host lock."""
        raise NotImplementedError

    def confined(self, root: Path) -> "FS":
        """This file system, refusing to go through a symbolic link below ``root`` (a ``hosts/`` linked
        elsewhere must not let the store read, copy or write what lies there). The root itself may be a
        link: that is the user's own choice of where the home lives."""
        return self

    # ---------------------------------------------------------------- composed (not primitives)

    def write_atomic(self, path: Path, data: bytes, *, durable: bool = True) -> None:
        """Temp file + rename: for files with one writer (this host's shard, machine-local files)."""
        tmp = self.put_temp(path.parent, path.name, data, durable=durable)
        try:
            self.replace(tmp, path, durable=durable)
        except BaseException:
            self.unlink(tmp)
            raise


# --------------------------------------------------------------------------- the real one


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_BINARY = getattr(os, "O_BINARY", 0)


def _exchange_impl():
    """The platform's atomic swap of two names, or None."""
    import sys

    try:
        import ctypes
    except ImportError:  # pragma: no cover
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:  # pragma: no cover
        return None
    if sys.platform.startswith("linux") and hasattr(libc, "renameat2"):
        fn = libc.renameat2
        fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
        AT_FDCWD, RENAME_EXCHANGE = -100, 2

        def swap(a: bytes, b: bytes) -> int:
            return fn(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)

    elif sys.platform == "darwin" and hasattr(libc, "renamex_np"):
        fn = libc.renamex_np
        fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint]
        RENAME_SWAP = 0x2

        def swap(a: bytes, b: bytes) -> int:
            return fn(a, b, RENAME_SWAP)

    else:
        return None

    def call(a: Path, b: Path) -> bool:
        if swap(os.fsencode(a), os.fsencode(b)) == 0:
            return True
        err = ctypes.get_errno()
        if err == errno.ENOENT:
            raise FileNotFoundError(err, os.strerror(err), str(b))
        if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EPERM):
            return False  # this file system cannot swap: the caller falls back
        raise OSError(err, os.strerror(err), str(b))

    return call


class RealFS(FS):
    def __init__(self, root: Path | None = None) -> None:
        self._swap = ...  # resolved on first use (ctypes costs an import)
        self.root = None if root is None else Path(root)

    def confined(self, root: Path) -> "RealFS":
        import copy

        clone = copy.copy(self)  # keeps a subclass (tests wrap the real file system to count or delay)
        clone.root = Path(root)
        return clone

    def _linked(self, path: Path) -> bool:
        """Is a directory between the root and ``path`` (its parents below the root) a symbolic link?"""
        if self.root is None:
            return False
        try:
            rel = Path(path).parent.relative_to(self.root)
        except ValueError:
            return False
        probe = self.root
        for part in rel.parts:
            probe = probe / part
            try:
                if os.path.islink(probe):
                    return True
            except OSError:
                return False
        return False

    def _refuse(self, *paths: Path) -> None:
        for path in paths:
            if self._linked(path):
                raise OSError(errno.ELOOP, "a directory on the way is a symbolic link; not written through it",
                              str(path))

    def read(self, path: Path, cap: int = READ_CAP) -> Got:
        import stat

        if self._linked(path):
            return Got("symlink", detail="behind a symbolic link to a directory (never followed)")
        try:
            fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC | _BINARY)
        except FileNotFoundError:
            return Got("missing")
        except OSError as exc:
            if exc.errno == errno.ELOOP or (exc.errno == errno.EMLINK and _NOFOLLOW):
                return Got("symlink", detail="a symbolic link (never followed)")
            try:
                st = os.lstat(path)
            except OSError:
                st = None
            if st is not None and stat.S_ISLNK(st.st_mode):
                return Got("symlink", detail="a symbolic link (never followed)")
            if exc.errno in (errno.ENXIO, errno.EISDIR):
                return Got("special", detail="not a regular file")
            return Got("error", detail=exc.strerror or str(exc))
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return Got("special", detail="not a regular file")
            if st.st_size > cap:
                return Got("too-large", detail=f"{st.st_size} bytes (the limit is {cap})")
            chunks, total = [], 0
            while True:
                chunk = os.read(fd, min(1 << 20, cap + 1 - total))
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
                if total > cap:
                    return Got("too-large", detail=f"over {cap} bytes")
            return Got("ok", b"".join(chunks))
        except OSError as exc:
            return Got("error", detail=exc.strerror or str(exc))
        finally:
            os.close(fd)

    def listdir(self, directory: Path) -> list[str]:
        if self._linked(Path(directory) / "x"):
            return []  # a linked directory below the root lists as empty: nothing behind it is ours
        try:
            return os.listdir(directory)
        except (FileNotFoundError, NotADirectoryError):
            return []

    def put_temp(self, directory: Path, hint: str, data: bytes, *, durable: bool = True) -> Path:
        self._refuse(Path(directory) / "x")
        ensure_dir(directory)
        name = f"{TEMP_PREFIX}{hint[:200]}-{os.getpid()}-{secrets.token_hex(4)}"  # <= 255 bytes
        tmp = directory / name
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC | _BINARY, FILE_MODE)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if durable:
                os.fsync(fd)
        except BaseException:
            os.close(fd)
            self.unlink(tmp)
            raise
        os.close(fd)
        return tmp

    def replace(self, src: Path, dst: Path, *, durable: bool = True) -> None:
        self._refuse(dst)
        os.replace(src, dst)
        if durable:
            _fsync_dir(dst.parent)

    def exchange(self, a: Path, b: Path) -> bool:
        if self._swap is ...:
            self._swap = _exchange_impl()
        if self._swap is None:
            return False
        self._refuse(a, b)
        done = self._swap(a, b)
        if done:
            _fsync_dir(b.parent)
        return done

    def link(self, src: Path, dst: Path) -> bool:
        self._refuse(src, dst)
        try:
            os.link(src, dst, follow_symlinks=False)
        except FileExistsError:
            return False
        _fsync_dir(dst.parent)
        return True

    def unlink(self, path: Path) -> bool:
        try:
            os.unlink(path)
            return True
        except FileNotFoundError:
            return False

    def rename(self, src: Path, dst: Path) -> bool:
        self._refuse(src, dst)
        try:
            os.replace(src, dst)
            return True
        except FileNotFoundError:
            return False

    def makedirs(self, directory: Path) -> None:
        self._refuse(Path(directory) / "x")
        ensure_dir(directory)

    def mtime(self, path: Path) -> float | None:
        try:
            return os.lstat(path).st_mtime
        except FileNotFoundError:
            return None

    def now(self) -> float:
        import time

        return time.time()

    def lock(self, locks_dir: Path, host: str, timeout: float):
        from .locks import host_lock

        return host_lock(locks_dir, host, timeout)


REAL = RealFS()

__all__ = ["FS", "Got", "REAL", "READ_CAP", "RealFS", "DIR_MODE", "FILE_MODE", "TEMP_PREFIX"]


@contextmanager
def _no_lock() -> Iterator[None]:  # pragma: no cover - used by read-only stores
    yield
