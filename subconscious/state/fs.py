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
- :meth:`lock` — the machine-local per-host lock (serialises the processes of one host, never hosts);
- :meth:`wait_gone` — a short wait for a name to go away (a view's lease, :mod:`.viewlock`);
  :meth:`wait_changed` — one for a torn view to be written on (:mod:`.store.writing`).
"""

from __future__ import annotations

import errno
import os
import secrets
from _thread import get_ident
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ..base.atomic import DIR_MODE, FILE_MODE, TEMP_PREFIX, _fsync_dir, ensure_dir

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

    def holding(self, remember: bool = False) -> "Held":
        """For a bulk read (every session): ``with held:`` around each part of it, ``held.close()`` at
        the end. Where the file system can, each directory read from is then opened once (safely, as every
        read opens it) and its files are read relative to it, instead of opening the directories from the
        root again for every file. ``remember``: a file read again inside the holding gets the bytes read
        the first time (for a read-only report: one snapshot, each file read once). Reads outside a
        ``with`` (or on another thread) are not affected."""
        return Held(None)

    def listing_token(self, directory: Path) -> tuple[int, ...] | None:
        """(device, inode, modification time in ns, change time in ns) of ``directory``, which change
        whenever a name in it does (the change time also when the modification time is put back, as
        ``rsync -a``, Unison and ``touch -d`` do); None where that cannot be told (then a reader lists the
        directory every time)."""
        return None

    FILE_TOKENS = False  # does file_token tell? (the simulation's file system does not: nothing is cached)

    def file_token(self, path: "Path | str") -> tuple[int, ...] | None:
        """(device, inode, size, modification time in ns, change time in ns) of the regular file at
        ``path``, not following a link; ``()`` if there is no such name; None where it cannot be told (a
        link, a directory, a FIFO, a link on the way: a reader then reads the file). Inside a holding, the
        file's directory is the one the holding opened."""
        return None

    def file_identity(self, path: "Path | str") -> tuple[int, tuple[int, ...] | None]:
        """(the time in ns taken just before, :meth:`file_token`): the identity of the bytes a read of
        ``path`` *after* this call gives. Inside a holding that remembers (:meth:`holding`), the bytes a
        read gives may have been read before: there, the identity is the one taken before they were read
        (the time too), so that a cache never pairs bytes with an identity taken after them."""
        return int(self.now() * 1e9), self.file_token(path)

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

    def create_new(self, path: Path, data: bytes) -> bool:
        """Create ``path`` holding ``data`` only if the name is free (``O_CREAT | O_EXCL``: atomic on local
        disks, NFSv3+ and SMB): True; False if it exists (a lease on a view, :mod:`.viewlock`)."""
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

    def wait_gone(self, path: Path, seconds: float) -> None:
        """Wait up to ``seconds`` for ``path`` to go away (another host's lease on a view: see
        :mod:`.viewlock`); returns early or late, the caller looks again."""
        import time

        time.sleep(seconds)

    def wait_changed(self, path: Path, seconds: float) -> None:
        """Wait up to ``seconds`` for ``path`` to be written (an in-place writer finishing a torn view: see
        :mod:`.store.writing`); returns early or late, the caller looks again."""
        import time

        time.sleep(seconds)

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


class Held:
    """See :meth:`FS.holding`: the directory fds a bulk read holds open (``fs`` None: nothing held) and,
    with ``remember``, the bytes of the files it read (a read-only report that reads a file several times,
    doctor, reads it once). A holding made while another is entered on the same thread is that one."""

    __slots__ = ("fs", "fds", "memo", "_was", "_owner")

    MEMO_FILE_MAX = 1 << 20  # larger files are read again when asked for again
    MEMO_MAX = 256 << 20  # bytes remembered in all

    def __init__(self, fs: "RealFS | None", fds: dict | None = None, memo: dict | None = None, owner: bool = True):
        self.fs = fs
        self.fds: dict[str, int | None] = {} if fds is None else fds
        self.memo = memo  # path -> Got (ok), and "" -> bytes remembered so far
        self._was = None
        self._owner = owner

    def __enter__(self) -> "Held":
        if self.fs is not None:
            self._was = self.fs._held
            self.fs._held = (get_ident(), self.fds, self.memo)
        return self

    def __exit__(self, *exc) -> None:
        if self.fs is not None:
            self.fs._held = self._was
            self._was = None

    def close(self) -> None:
        if not self._owner:
            return
        fds, self.fds = self.fds, {}
        self.memo = None
        for fd in fds.values():
            if fd is not None:
                os.close(fd)


# --------------------------------------------------------------------------- the real one


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_BINARY = getattr(os, "O_BINARY", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
# opening each directory below the root with O_NOFOLLOW, and the file relative to the last one, closes
# the window between "is a directory on the way a link?" and the open by path (POSIX; not Windows)
_AT = bool(_DIRECTORY and _NOFOLLOW) and os.open in os.supports_dir_fd and os.rename in os.supports_dir_fd
_LINKED = "a directory on the way is a symbolic link; not written through it"


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

        def swap(a: bytes, b: bytes, afd: int | None = None, bfd: int | None = None) -> int:
            return fn(AT_FDCWD if afd is None else afd, a, AT_FDCWD if bfd is None else bfd, b, RENAME_EXCHANGE)

    elif sys.platform == "darwin" and hasattr(libc, "renamex_np"):
        fn = libc.renamex_np
        fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint]
        RENAME_SWAP = 0x2

        def swap(a: bytes, b: bytes, afd: int | None = None, bfd: int | None = None) -> int:
            if afd is not None or bfd is not None:  # renamex_np takes paths only: the check is all there is
                raise ValueError("no directory fds here")
            return fn(a, b, RENAME_SWAP)

    else:
        return None

    call_at = sys.platform.startswith("linux")

    def call(a, b, afd: int | None = None, bfd: int | None = None) -> bool:
        if swap(os.fsencode(a), os.fsencode(b), afd, bfd) == 0:
            return True
        err = ctypes.get_errno()
        if err == errno.ENOENT:
            raise FileNotFoundError(err, os.strerror(err), str(b))
        if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EPERM):
            return False  # this file system cannot swap: the caller falls back
        raise OSError(err, os.strerror(err), str(b))

    call.at = call_at  # takes directory fds (renameat2): see RealFS.exchange
    return call


def _keeps(path, dev: int) -> bool:
    """Does the file system of ``dev`` keep a real change time (:mod:`.fskind`)? Tokens are told only there."""
    from .fskind import keeps_change_time

    return keeps_change_time(path, dev)


class RealFS(FS):
    _held: tuple[int, dict, dict | None] | None = None  # (thread, directory fds, memo) of a bulk read: holding

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
        # on strings, not Paths: this runs before every read (tens of thousands when every session is read)
        root = os.fspath(self.root).rstrip(os.sep) or os.sep
        parent = os.path.dirname(os.fspath(path))
        if parent == root:
            return False
        if not parent.startswith(root + os.sep if root != os.sep else root):
            return False
        probe = root if root != os.sep else ""
        for part in parent[len(probe):].split(os.sep):
            if not part:
                continue
            probe = probe + os.sep + part
            try:
                if os.path.islink(probe):
                    return True
            except OSError:
                return False
        return False

    def _at(self, path: Path) -> tuple[int | None, str | Path]:
        """``(fd of path's directory, name)`` with the directory opened from the root one component at a
        time, never following a link; ``(None, path)`` outside a root or where the platform cannot. The
        caller closes the fd. Raises OSError(ELOOP) at a link on the way (swapped in after any check)."""
        path = Path(path)
        if self.root is None or not _AT:
            return None, path
        try:
            rel = path.parent.relative_to(self.root)
        except ValueError:
            return None, path
        fd = os.open(self.root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)  # the root may be a link: the user's choice
        try:
            for part in rel.parts:
                nxt = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
                os.close(fd)
                fd = nxt
        except OSError as exc:
            linked = exc.errno == errno.ELOOP
            if exc.errno == errno.ENOTDIR:  # some systems say so for O_DIRECTORY on a link
                try:
                    import stat

                    linked = stat.S_ISLNK(os.lstat(part, dir_fd=fd).st_mode)
                except OSError:
                    pass
            os.close(fd)
            if linked:
                raise OSError(errno.ELOOP, _LINKED, str(path)) from None
            raise
        return fd, path.name

    @staticmethod
    def _close(*fds: int | None) -> None:
        for fd in fds:
            if fd is not None:
                os.close(fd)

    def _refuse(self, *paths: Path) -> None:
        for path in paths:
            if self._linked(path):
                raise OSError(errno.ELOOP, _LINKED, str(path))

    def holding(self, remember: bool = False) -> Held:
        if self.root is None or not _AT:
            return Held(None)
        held = self._held
        if held is not None and held[0] == get_ident():
            return Held(self, held[1], held[2], owner=False)  # inside another: that one
        return Held(self, memo={"": 0} if remember else None)

    def read(self, path: Path, cap: int = READ_CAP) -> Got:
        held = self._held
        if held is not None and held[0] == get_ident():
            # a bulk read: the file's directory opened once (the way _at opens it, from the root and never
            # through a link), the file read relative to it; anything unusual takes the ordinary way below
            text = os.fspath(path)
            memo = held[2]
            if memo is not None:
                got = memo.get(text)
                if got is not None and len(got.data) <= cap:
                    return got
                if ("id", text) not in memo:  # the identity of the bytes about to be read (see file_identity)
                    memo[("id", text)] = (int(self.now() * 1e9), self.file_token(text))
            dfd, name = self._held_dir(held, text)
            if dfd is not None and name:
                got = self._read_at(dfd, name, cap)
                if memo is not None and got.ok and len(got.data) <= Held.MEMO_FILE_MAX \
                        and memo[""] + len(got.data) <= Held.MEMO_MAX:
                    memo[text] = got
                    memo[""] += len(got.data)
                return got
        if self._linked(path):
            return Got("symlink", detail="behind a symbolic link to a directory (never followed)")
        try:
            dfd, name = self._at(path)
        except FileNotFoundError:
            return Got("missing")
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return Got("symlink", detail="behind a symbolic link to a directory (never followed)")
            return Got("error", detail=exc.strerror or str(exc))
        try:
            return self._read_at(dfd, name, cap)
        finally:
            self._close(dfd)

    def _read_at(self, dfd: int | None, path, cap: int) -> Got:
        import stat

        try:
            fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC | _BINARY, dir_fd=dfd)
        except FileNotFoundError:
            return Got("missing")
        except OSError as exc:
            if exc.errno == errno.ELOOP or (exc.errno == errno.EMLINK and _NOFOLLOW):
                return Got("symlink", detail="a symbolic link (never followed)")
            try:
                st = os.lstat(path, dir_fd=dfd)
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
            # the first read asks for the size it has (and one byte more, to see it grew): a 1 MiB buffer
            # for a 300-byte file costs more than the read itself (it is allocated, then shrunk)
            chunks, total, want = [], 0, min(st.st_size + 1, cap + 1)
            while True:
                chunk = os.read(fd, want)
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
                if total > cap:
                    return Got("too-large", detail=f"over {cap} bytes")
                if total == st.st_size:
                    break  # all it held when it was opened (a read more would only say so)
                want = min(1 << 20, cap + 1 - total)
            return Got("ok", chunks[0] if len(chunks) == 1 else b"".join(chunks))
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

    def listing_token(self, directory: Path) -> tuple[int, ...] | None:
        if self._linked(Path(directory) / "x"):
            return None
        try:
            st = os.lstat(directory)
        except OSError:
            return None
        import stat

        if not stat.S_ISDIR(st.st_mode) or not _keeps(directory, st.st_dev):
            return None  # (a file system without a real change time: a rewrite may keep every time; fskind.py)
        return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)

    FILE_TOKENS = True

    def file_identity(self, path: "Path | str") -> tuple[int, tuple[int, ...] | None]:
        held = self._held
        memo = held[2] if held is not None and held[0] == get_ident() else None
        if memo is None:
            return int(self.now() * 1e9), self.file_token(path)
        text = os.fspath(path)
        got = memo.get(("id", text))
        if got is None:
            got = memo[("id", text)] = (int(self.now() * 1e9), self.file_token(text))
        return got

    def _held_dir(self, held: tuple, text: str) -> tuple[int | None, str]:
        """(the bulk read's fd of ``text``'s directory, opened once and never through a link, or None; the
        file's name in it)."""
        parent, _, name = text.rpartition(os.sep)
        fds = held[1]
        if parent in fds:
            return fds[parent], name
        try:
            dfd = self._at(Path(text))[0]
        except OSError:
            dfd = None
        fds[parent] = dfd
        return dfd, name

    def file_token(self, path: "Path | str") -> tuple[int, ...] | None:
        import stat

        text = os.fspath(path)
        held = self._held
        try:
            if held is not None and held[0] == get_ident():
                dfd, name = self._held_dir(held, text)
                if dfd is None or not name:
                    return None
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            else:
                if self._linked(Path(text)):
                    return None
                st = os.lstat(text)
        except FileNotFoundError:
            return ()
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode) or not _keeps(text, st.st_dev):
            return None
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    def put_temp(self, directory: Path, hint: str, data: bytes, *, durable: bool = True) -> Path:
        self._refuse(Path(directory) / "x")
        ensure_dir(directory)
        name = f"{TEMP_PREFIX}{hint[:200]}-{os.getpid()}-{secrets.token_hex(4)}"  # <= 255 bytes
        tmp = directory / name
        dfd, at = self._at(tmp)
        try:
            fd = os.open(at, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC | _BINARY, FILE_MODE,
                         dir_fd=dfd)
        finally:
            self._close(dfd)
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
        self._move(src, dst)
        if durable:
            _fsync_dir(dst.parent)

    def exchange(self, a: Path, b: Path) -> bool:
        if self._swap is ...:
            self._swap = _exchange_impl()
        if self._swap is None:
            return False
        self._refuse(a, b)
        if not getattr(self._swap, "at", False):
            done = self._swap(a, b)
        else:
            afd, an = self._at(a)
            try:
                bfd, bn = self._at(b)
                try:
                    done = self._swap(an, bn, afd, bfd)
                finally:
                    self._close(bfd)
            finally:
                self._close(afd)
        if done:
            _fsync_dir(b.parent)
        return done

    def link(self, src: Path, dst: Path) -> bool:
        self._refuse(src, dst)
        sfd, s = self._at(src)
        try:
            dfd, d = self._at(dst)
            try:
                os.link(s, d, src_dir_fd=sfd, dst_dir_fd=dfd, follow_symlinks=False)
            finally:
                self._close(dfd)
        except FileExistsError:
            return False
        finally:
            self._close(sfd)
        _fsync_dir(dst.parent)
        return True

    def create_new(self, path: Path, data: bytes) -> bool:
        self._refuse(path)
        dfd, at = self._at(path)
        try:
            fd = os.open(at, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC | _BINARY, FILE_MODE,
                         dir_fd=dfd)
        except FileExistsError:
            return False
        finally:
            self._close(dfd)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        return True

    def unlink(self, path: Path) -> bool:
        try:
            dfd, at = self._at(path)
        except FileNotFoundError:
            return False
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return False  # behind a link: nothing there is ours to remove
            raise
        try:
            os.unlink(at, dir_fd=dfd)
            return True
        except FileNotFoundError:
            return False
        finally:
            self._close(dfd)

    def rename(self, src: Path, dst: Path) -> bool:
        self._refuse(src, dst)
        try:
            self._move(src, dst)
            return True
        except FileNotFoundError:
            return False

    def _move(self, src: Path, dst: Path) -> None:
        sfd, s = self._at(src)
        try:
            dfd, d = self._at(dst)
            try:
                os.replace(s, d, src_dir_fd=sfd, dst_dir_fd=dfd)
            finally:
                self._close(dfd)
        finally:
            self._close(sfd)

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

__all__ = ["FS", "Got", "Held", "REAL", "READ_CAP", "RealFS", "DIR_MODE", "FILE_MODE", "TEMP_PREFIX"]


@contextmanager
def _no_lock() -> Iterator[None]:  # pragma: no cover - used by read-only stores
    yield
