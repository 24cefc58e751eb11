"""Durable, atomic file writes and private directories (the bottom layer: the store, the key ring and
the Letta package's config file all write through here).

A write goes to a temp file in the same directory (``.subconscious-tmp-*``, which every sync kit
template ignores), is fsynced, renamed over the target, and the directory is fsynced: a reader or a
sync engine sees the old file or the new one, never a torn one, even after SIGKILL or power loss.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

FILE_MODE = 0o600
DIR_MODE = 0o700
TEMP_PREFIX = ".subconscious-tmp-"


def ensure_dir(path: Path) -> Path:
    """Create ``path`` and any missing parents private to the user (0700); existing ones are left as
    they are (a user's own directories are theirs)."""
    if path.is_dir():
        return path
    missing = []
    probe = path
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=DIR_MODE)
        except FileExistsError:
            continue
        try:
            os.chmod(directory, DIR_MODE)  # mkdir's mode is filtered by the umask
        except OSError:
            pass
    return path


def _fsync_dir(directory: Path) -> None:
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


def atomic_write(path: Path, data: bytes | str, *, durable: bool = True, mode: int = FILE_MODE,
                 unchanged_since: bytes | None | object = ...) -> None:
    """Replace ``path`` with ``data`` atomically (temp file, fsync, rename, fsync dir), file ``mode``
    (0600 unless told). With ``unchanged_since`` (the bytes read earlier, or None for "did not exist"),
    nothing is written if the file no longer holds them: :class:`FileChangedError`."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    directory = path.parent
    ensure_dir(directory)
    tmp = directory / f"{TEMP_PREFIX}{path.name}-{os.getpid()}-{secrets.token_hex(4)}"
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
                now: bytes | None = path.read_bytes()
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
