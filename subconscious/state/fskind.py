"""Does the file system holding a path keep a real change time? Asked once per device, without writing.

The caches of reads (:mod:`.sessions.cache`, :mod:`.sessions.listcache`) trust a file or directory whose
(size, mtime, ctime) are unchanged: a rewrite that puts the modification time back (``rsync -a``, Unison,
``touch -d``) still moves the change time, which the kernel sets itself. Not everywhere: sshfs and rclone
mounts report the mtime as the ctime, FAT and exFAT keep none, SMB and other FUSE file systems vary, and on
Windows ``st_ctime`` is the creation time. There a same-size rewrite with its mtime put back looks unchanged,
so the caches must not be used at all (:meth:`.fs.RealFS.file_token` says "cannot be told").

The answer comes from the file system's type — Linux: the mount of the device in ``/proc/self/mountinfo``;
macOS: ``statfs``'s type name — against :data:`KEEPS`, the types known to keep one. Anything else, or a type
that cannot be found, is taken as not keeping it: the caches are off and every read reads (slower, never
wrong). Cached per device for the life of the process.
"""
from __future__ import annotations

import os
import sys

__all__ = ["KEEPS", "keeps_change_time", "fs_type", "mount_type"]

KEEPS = frozenset({
    "ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "f2fs", "jfs", "reiserfs", "nilfs2", "bcachefs",
    "tmpfs", "ramfs", "overlay", "nfs", "nfs4", "virtiofs", "ceph", "gfs2", "ocfs2",  # Linux
    "apfs", "hfs",  # macOS
})
_memo: dict[int, bool] = {}


def mount_type(mountinfo: str, major: int, minor: int) -> "str | None":
    """The file system type of device ``major:minor`` in the text of ``/proc/self/mountinfo``."""
    want = f"{major}:{minor}"
    for line in mountinfo.splitlines():
        parts = line.split()
        if len(parts) > 3 and parts[2] == want and "-" in parts[6:]:
            at = parts.index("-", 6)
            if at + 1 < len(parts):
                return parts[at + 1]
    return None


def _darwin_type(path: str) -> "str | None":
    import ctypes
    import ctypes.util

    class StatFS(ctypes.Structure):  # struct statfs with 64-bit inodes (the default since macOS 10.6)
        _fields_ = [("f_bsize", ctypes.c_uint32), ("f_iosize", ctypes.c_int32),
                    ("f_blocks", ctypes.c_uint64), ("f_bfree", ctypes.c_uint64), ("f_bavail", ctypes.c_uint64),
                    ("f_files", ctypes.c_uint64), ("f_ffree", ctypes.c_uint64), ("f_fsid", ctypes.c_int32 * 2),
                    ("f_owner", ctypes.c_uint32), ("f_type", ctypes.c_uint32), ("f_flags", ctypes.c_uint32),
                    ("f_fssubtype", ctypes.c_uint32), ("f_fstypename", ctypes.c_char * 16),
                    ("f_mntonname", ctypes.c_char * 1024), ("f_mntfromname", ctypes.c_char * 1024),
                    ("f_reserved", ctypes.c_uint32 * 8)]

    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    fn = getattr(libc, "statfs$INODE64", None) or libc.statfs
    buf = StatFS()
    if fn(os.fsencode(path), ctypes.byref(buf)) != 0:
        return None
    return buf.f_fstypename.decode("ascii", "replace") or None


def fs_type(path: "str | os.PathLike[str]", st_dev: "int | None" = None) -> "str | None":
    """The type of the file system holding ``path`` (None: cannot be told here)."""
    try:
        if sys.platform.startswith("linux"):
            dev = os.stat(path).st_dev if st_dev is None else st_dev
            with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
                return mount_type(f.read(), os.major(dev), os.minor(dev))
        if sys.platform == "darwin":
            return _darwin_type(os.fspath(path))
    except (OSError, ValueError, AttributeError):
        return None
    return None


def keeps_change_time(path: "str | os.PathLike[str]", st_dev: "int | None" = None) -> bool:
    """Whether the file system holding ``path`` keeps a real change time (see the module docstring)."""
    if os.name == "nt":
        return False  # st_ctime is the creation time
    try:
        dev = os.stat(path).st_dev if st_dev is None else st_dev
    except OSError:
        return False
    got = _memo.get(dev)
    if got is None:
        got = _memo[dev] = fs_type(path, dev) in KEEPS
    return got
