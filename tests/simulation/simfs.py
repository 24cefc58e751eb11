"""An in-memory :class:`~subconscious.state.fs.FS` whose every primitive is a preemption point.

Names map to inodes per directory, as in POSIX: ``replace``/``rename`` move an inode over a name
(atomically), ``exchange`` swaps two names, ``link`` adds a name for an inode only if the name is free,
``unlink`` removes a name (an open handle keeps writing into the inode). An inode is bytes + mtime.

Besides the store's primitives there are the operations of actors that are not the store, each one
step: upstream's Node ``fs.writeFileSync`` in place (:meth:`upstream_open_trunc` then
:meth:`upstream_write` — a reader between them sees an empty file), and a sync engine's delivery
(:meth:`deliver`: temp file + rename, Syncthing's way) and :meth:`conflict_copy`.

Paths are absolute; machine-local directories (locks, clocks) live in the same tree (they are simply
never synced). The tree is deterministic: listings are sorted, temp names are numbered.
"""

from __future__ import annotations

import errno
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from subconscious.state.fs import FS, READ_CAP, TEMP_PREFIX, Got

from .sched import Scheduler


@dataclass(eq=False)
class Inode:
    data: bytes
    mtime: float
    ino: int
    origin: str = "store"  # who wrote these bytes: "store", "upstream", "sync", "copy", "setup" (view oracles)


class _Dir:
    __slots__ = ("files", "subdirs")

    def __init__(self) -> None:
        self.files: dict[str, Inode] = {}
        self.subdirs: set[str] = set()


def _split(path: Path | str) -> tuple[str, str]:
    p = str(path)
    parent, _, name = p.rpartition("/")
    return parent or "/", name


class SimFS(FS):
    """``exchange_ok=False`` makes :meth:`exchange` answer False (a file system that cannot swap);
    ``link_ok=False`` makes :meth:`link` raise (no hard links) — the store must then fall back."""

    def __init__(self, sched: Scheduler | None = None, *, exchange_ok: bool = True, link_ok: bool = True,
                 start_time: float = 1_790_000_000.0, pid: int = 4242):
        self.sched = sched
        self.dirs: dict[str, _Dir] = {"/": _Dir()}
        self.exchange_ok, self.link_ok = exchange_ok, link_ok
        self.start_time = start_time
        self.pid = pid
        self._ino = 0
        self._tmp = 0
        self.ops = 0  # primitives performed

    # ------------------------------------------------------------------ time and points

    def now(self) -> float:
        """Simulated wall clock: 1 ms per scheduler step."""
        return self.start_time + (self.sched.step if self.sched else 0) / 1000.0

    def _point(self, op: str, path) -> None:
        self.ops += 1
        if self.sched is not None:
            self.sched.point(f"{op} {path}")

    def _new(self, data: bytes, origin: str = "store") -> Inode:
        self._ino += 1
        return Inode(bytes(data), self.now(), self._ino, origin)

    # ------------------------------------------------------------------ tree helpers (no points)

    def _dir(self, directory: str, create: bool = False) -> _Dir | None:
        d = self.dirs.get(directory)
        if d is None and create:
            parent, name = _split(directory)
            if directory != "/":
                self._dir(parent, create=True).subdirs.add(name)
            d = self.dirs[directory] = _Dir()
        return d

    def _lookup(self, path) -> Inode | None:
        parent, name = _split(path)
        d = self.dirs.get(parent)
        return None if d is None else d.files.get(name)

    def peek(self, path) -> bytes | None:
        """The bytes at ``path`` now, outside any schedule (oracles, setup)."""
        ino = self._lookup(path)
        return None if ino is None else ino.data

    def names(self, directory) -> list[str]:
        d = self.dirs.get(str(directory))
        return [] if d is None else sorted(d.files.keys() | d.subdirs)

    def files(self, directory) -> dict[str, bytes]:
        d = self.dirs.get(str(directory))
        return {} if d is None else {n: i.data for n, i in sorted(d.files.items())}

    def put(self, path, data: bytes | str) -> None:
        """Setup: write a file without a point."""
        if isinstance(data, str):
            data = data.encode()
        parent, name = _split(path)
        self._dir(parent, create=True).files[name] = self._new(data, "setup")

    def remove(self, path) -> None:
        parent, name = _split(path)
        d = self.dirs.get(parent)
        if d is not None:
            d.files.pop(name, None)

    def _need_dir(self, directory: str, path) -> _Dir:
        d = self.dirs.get(directory)
        if d is None:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(path))
        return d

    # ------------------------------------------------------------------ FS primitives

    def read(self, path: Path, cap: int = READ_CAP) -> Got:
        self._point("read", path)
        p = str(path)
        if p in self.dirs:
            return Got("special", detail="not a regular file")
        ino = self._lookup(p)
        if ino is None:
            return Got("missing")
        if len(ino.data) > cap:
            return Got("too-large", detail=f"{len(ino.data)} bytes (the limit is {cap})")
        return Got("ok", ino.data)

    def listdir(self, directory: Path) -> list[str]:
        self._point("listdir", directory)
        return self.names(directory)

    def put_temp(self, directory: Path, hint: str, data: bytes, *, durable: bool = True) -> Path:
        self._point("put_temp", Path(directory) / hint)
        d = self._dir(str(directory), create=True)
        self._tmp += 1
        name = f"{TEMP_PREFIX}{hint[:120]}-{self.pid}-{self._tmp:08x}"
        d.files[name] = self._new(data)
        return Path(directory) / name

    def replace(self, src: Path, dst: Path, *, durable: bool = True) -> None:
        self._point("replace", dst)
        if not self._move(src, dst):
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(src))

    def rename(self, src: Path, dst: Path) -> bool:
        self._point("rename", dst)
        return self._move(src, dst)

    def _move(self, src, dst) -> bool:
        sp, sn = _split(src)
        dp, dn = _split(dst)
        sd = self.dirs.get(sp)
        if sd is None or sn not in sd.files:
            return False
        dd = self._need_dir(dp, dst)
        if str(dst) in self.dirs:
            raise IsADirectoryError(errno.EISDIR, "Is a directory", str(dst))
        ino = sd.files.pop(sn)
        dd.files[dn] = ino
        self._gone(src)
        return True

    def exchange(self, a: Path, b: Path) -> bool:
        self._point("exchange", b)
        if not self.exchange_ok:
            return False
        ap, an = _split(a)
        bp, bn = _split(b)
        ad, bd = self.dirs.get(ap), self.dirs.get(bp)
        if ad is None or an not in ad.files:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(a))
        if bd is None or bn not in bd.files:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(b))
        ad.files[an], bd.files[bn] = bd.files[bn], ad.files[an]
        return True

    def link(self, src: Path, dst: Path) -> bool:
        self._point("link", dst)
        if not self.link_ok:
            raise OSError(errno.EPERM, "Operation not permitted (no hard links here)", str(dst))
        ino = self._lookup(src)
        if ino is None:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(src))
        dp, dn = _split(dst)
        dd = self._need_dir(dp, dst)
        if dn in dd.files or str(dst) in self.dirs:
            return False
        dd.files[dn] = ino
        return True

    def create_new(self, path: Path, data: bytes) -> bool:
        self._point("create_new", path)
        parent, name = _split(path)
        d = self._dir(parent, create=True)
        if name in d.files or str(path) in self.dirs:
            return False
        d.files[name] = self._new(data)
        return True

    def unlink(self, path: Path) -> bool:
        self._point("unlink", path)
        parent, name = _split(path)
        d = self.dirs.get(parent)
        if d is None or name not in d.files:
            return False
        del d.files[name]
        self._gone(path)
        return True

    def makedirs(self, directory: Path) -> None:
        self._point("makedirs", directory)
        self._dir(str(directory), create=True)

    def mtime(self, path: Path) -> float | None:
        self._point("mtime", path)
        ino = self._lookup(path)
        return None if ino is None else ino.mtime

    def wait_gone(self, path: Path, seconds: float) -> None:
        """Blocks the actor until ``path`` is unlinked or renamed away (or nobody else can run)."""
        self._point("wait", path)
        if self.sched is not None and self._lookup(path) is not None:
            self.sched.wait_on(str(path))

    def wait_changed(self, path: Path, seconds: float) -> None:
        """Blocks the actor until upstream or a sync engine writes something (or nobody else can run)."""
        self._point("wait", path)
        if self.sched is not None:
            self.sched.wait_on("written")

    def _written(self) -> None:
        if self.sched is not None:
            self.sched.wake("written")

    def _gone(self, path) -> None:
        if self.sched is not None:
            self.sched.wake(str(path))

    @contextmanager
    def lock(self, locks_dir: Path, host: str, timeout: float) -> Iterator[None]:
        self._point("lock", Path(locks_dir) / host)
        key = (str(locks_dir), host)
        if self.sched is not None:
            self.sched.acquire(key)
        try:
            yield
        finally:
            if self.sched is not None:
                self.sched.release(key)

    # ------------------------------------------------------------------ actors that are not the store

    def upstream_open_trunc(self, path) -> Inode:
        """Node's ``fs.writeFileSync`` opens with O_TRUNC: creates the file or empties the inode now there."""
        self._point("open-trunc", path)
        ino = self._lookup(path)
        if ino is None:
            parent, name = _split(path)
            ino = self._new(b"", "upstream")
            self._dir(parent, create=True).files[name] = ino
        else:
            ino.data, ino.mtime, ino.origin = b"", self.now(), "upstream"
        self._written()
        return ino

    def upstream_write(self, handle: Inode, data: bytes) -> bool:
        """...then writes into that inode, wherever its name has gone meanwhile. Returns whether the inode
        still has a name: False when someone replaced the file by a rename between upstream's open and its
        write (a sync engine delivering a newer version), so the write went into a file nobody can see."""
        self._point("write-in-place", handle.ino)
        handle.data, handle.mtime, handle.origin = bytes(data), self.now(), "upstream"
        self._written()
        return self.named(handle)

    def upstream_write_parts(self, handle: Inode, data: bytes, parts: int = 3) -> bool:
        """Node's write in several ``write(2)`` calls (a large file, a slow or network file system): after
        each part a reader sees a longer prefix — a torn file — until the last one. Returns whether the
        inode still has a name at the end (see :meth:`upstream_write`)."""
        data = bytes(data)
        cuts = sorted({max(1, len(data) * k // parts) for k in range(1, parts)} | {len(data)})
        for cut in cuts:
            self._point("write-in-place-part", f"{handle.ino} [:{cut}]")
            handle.data, handle.mtime, handle.origin = data[:cut], self.now(), "upstream"
            self._written()
        return self.named(handle)

    def named(self, handle: Inode) -> bool:
        return any(ino is handle for d in self.dirs.values() for ino in d.files.values())

    def deliver(self, path, data: bytes) -> None:
        """A sync engine brings a newer version: its temp file, then a rename over the name (2 steps)."""
        parent, name = _split(path)
        tmp = f"{parent}/.syncthing.{name}.tmp"
        self._point("sync-temp", tmp)
        self._dir(parent, create=True).files[f".syncthing.{name}.tmp"] = self._new(data, "sync")
        self._point("sync-rename", path)
        self._move(tmp, path)

    def conflict_copy(self, path, data: bytes) -> None:
        """A conflict copy (or a restored backup) appears under ``path`` (one step)."""
        self._point("conflict-copy", path)
        parent, name = _split(path)
        self._dir(parent, create=True).files[name] = self._new(data, "copy")
