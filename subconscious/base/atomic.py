"""Durable, atomic file writes and private directories (the bottom layer: the store, the key ring and
the Letta package's config file all write through here).

A write goes to a temp file in the same directory (``.subconscious-tmp-*``, which every sync kit
template ignores), is fsynced, renamed over the target, and the directory is fsynced: a reader or a
sync engine sees the old file or the new one, never a torn one, even after SIGKILL or power loss.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~4 ms on a hook)

if TYPE_CHECKING:  # paths are str or Path alike; pathlib (and the re it imports) stays off the hook path
    from pathlib import Path

FILE_MODE = 0o600
DIR_MODE = 0o700
TEMP_PREFIX = ".subconscious-tmp-"


def ensure_dir(path: "Path | str") -> "Path | str":
    """Create ``path`` and any missing parents private to the user (0700); existing ones are left as
    they are (a user's own directories are theirs). Returns ``path``."""
    if os.path.isdir(path):
        return path
    missing = []
    probe = os.fspath(path)
    while not os.path.exists(probe) and probe != os.path.dirname(probe):
        missing.append(probe)
        probe = os.path.dirname(probe)
    for directory in reversed(missing):
        try:
            os.mkdir(directory, DIR_MODE)
        except FileExistsError:
            continue
        try:
            os.chmod(directory, DIR_MODE)  # mkdir's mode is filtered by the umask
        except OSError:
            pass
    return path


def _fsync_dir(directory: "Path | str") -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # Windows has no directory fds
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class FileChangedError(OSError):
    """The target changed between reading it and replacing it (``unchanged_since``)."""


def atomic_write(path: "Path | str", data: bytes | str, *, durable: bool = True, mode: int = FILE_MODE,
                 unchanged_since: bytes | None | object = ...) -> None:
    """Replace ``path`` with ``data`` atomically (temp file, fsync, rename, fsync dir), file ``mode``
    (0600 unless told). With ``unchanged_since`` (the bytes read earlier, or None for "did not exist"),
    nothing is written if the file no longer holds them: :class:`FileChangedError`."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    directory, name = os.path.split(os.fspath(path))
    ensure_dir(directory)
    tmp = os.path.join(directory, f"{TEMP_PREFIX}{name}-{os.getpid()}-{os.urandom(4).hex()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            if mode != FILE_MODE:
                os.fchmod(fd, mode)  # os.open's mode is filtered by the umask
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        if unchanged_since is not ...:
            try:
                with open(path, "rb") as f:
                    now: bytes | None = f.read()
            except FileNotFoundError:
                now = None
            if now != unchanged_since:
                raise FileChangedError(f"{path} changed while it was being rewritten; nothing was written")
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if durable:
        _fsync_dir(directory)
