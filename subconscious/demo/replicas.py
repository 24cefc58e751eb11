"""A small simulated sync engine: replica directories linked pairwise, conflicts left as copies named
exactly as the real engines name them (used by ``subconscious demo`` and the randomized test).

Each link remembers what both sides held at its last sync (content digests). Syncing a link:
- a file changed on one side only is copied to the other (temp file + rename, mtime kept) or deleted;
- a file changed on both sides is a conflict: as Syncthing does, the version with the older mtime
  loses and is kept beside the original under the engine's copy name, on both sides; a delete against
  a modification lets the modification win (Syncthing 1.19, Dropbox). rclone bisync (1.60) has no
  winner: both versions are renamed (``<name>..path1`` from side a, ``..path2`` from side b) and no
  ``<name>`` is left on either side.

Temp files (ours, Syncthing's, Unison's) never travel. ``only`` syncs a subset of paths, so a caller
can delay some files and not others.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..state.copynames import Engine, is_temporary, make_copy_name


def device_id(name: str) -> str:
    """A Syncthing-like 7-character short device id for a machine name."""
    return base64.b32encode(hashlib.sha256(name.encode()).digest()).decode()[:7]


_DIGESTS: dict[str, tuple[tuple[int, int, int, int], str]] = {}
RACY_NS = 2_000_000_000  # a file changed this recently is hashed again on every look (see digest)


def digest(path: Path | str) -> str | None:
    """The content digest of ``path`` (None when missing).

    Cached by (inode, size, mtime, ctime), but only once the file has been quiet for ``RACY_NS``: a
    kernel with coarse timestamps (a jiffy, or a second on some file systems) gives two writes in one
    tick the same mtime, and a file system reuses a freed inode at once, so a rewrite of the same size
    can look unchanged -- the sync then skips it (a change lost) or keeps a stale base (a conflict made
    up). git calls such an entry "racily clean" and rehashes it; so does this."""
    path = str(path)
    try:
        st = os.stat(path)
        key = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        hit = _DIGESTS.get(path)
        if hit is not None and hit[0] == key:
            return hit[1]
        with open(path, "rb") as f:
            value = hashlib.sha256(f.read()).hexdigest()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > RACY_NS:
        _DIGESTS[path] = (key, value)
    else:
        _DIGESTS.pop(path, None)
    return value


def listing(root: Path) -> dict[str, str]:
    """relative posix path → file, skipping temp files and Syncthing's own files."""
    out: dict[str, str] = {}
    base = str(root)

    def walk(directory: str, prefix: str) -> None:
        try:
            entries = list(os.scandir(directory))
        except (FileNotFoundError, NotADirectoryError):
            return
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                if not e.name.startswith(".st"):
                    walk(e.path, prefix + e.name + "/")
            elif is_temporary(e.name) is None and not e.name.startswith(".stignore"):
                out[prefix + e.name] = e.path

    walk(base, "")
    return out


def _copy_file(src: Path | str, dst: Path | str) -> None:
    src, dst = Path(src), Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = dst.with_name(f".syncthing.{dst.name}.tmp")
    data = src.read_bytes()
    st = src.stat()
    with open(tmp, "wb") as f:
        f.write(data)
    os.chmod(tmp, 0o600)
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(tmp, dst)


def _write_copy(data: bytes, mtime_ns: int, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = dst.with_name(f".syncthing.{dst.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
    os.chmod(tmp, 0o600)
    os.utime(tmp, ns=(mtime_ns, mtime_ns))
    os.replace(tmp, dst)


@dataclass
class Link:
    a: str
    b: str
    engine: Engine
    base: dict[str, str | None] = field(default_factory=dict)
    up: bool = True


@dataclass
class Network:
    roots: dict[str, Path]  # machine name → replica directory
    links: list[Link] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)  # relative paths of every copy made

    def connect(self, a: str, b: str, engine: Engine) -> Link:
        link = Link(a, b, engine)
        self.links.append(link)
        return link

    def link(self, a: str, b: str) -> Link:
        for link in self.links:
            if {link.a, link.b} == {a, b}:
                return link
        raise KeyError((a, b))

    def cut(self) -> None:
        for link in self.links:
            link.up = False

    def restore(self) -> None:
        for link in self.links:
            link.up = True

    # ---------------------------------------------------------------- one link

    def _copy_name(self, link: Link, rel: str, loser: str, winner: str, mtime_ns: int, taken: set[str]) -> str:
        """The name ``link.engine`` gives the losing version (numbered or re-timed if taken)."""
        parent, _, name = rel.rpartition("/")
        when = dt.datetime.fromtimestamp(mtime_ns / 1e9).replace(microsecond=0)
        e = link.engine
        for n in range(200):
            number = {
                Engine.ICLOUD: n + 2, Engine.GOOGLE_DRIVE: n + 1, Engine.ONEDRIVE_LINUX: n + 1,
                Engine.ONEDRIVE: n + 1 if n else None, Engine.DROPBOX: n or None, Engine.UNISON: n or None,
            }.get(e)
            shift = dt.timedelta(seconds=n if e in (Engine.SYNCTHING, Engine.NEXTCLOUD) else 0)
            copy = make_copy_name(e, name, when=when + shift, device=device_id(winner),
                                  host=loser.upper() if e is Engine.ONEDRIVE else loser, user=loser, number=number)
            path = f"{parent}/{copy}" if parent else copy
            if path not in taken:
                return path
        raise RuntimeError(f"no free copy name for {rel}")

    def sync(self, a: str, b: str, only: set[str] | None = None) -> list[str]:
        """Sync one link (if up); returns the copies made."""
        link = self.link(a, b)
        if not link.up:
            return []
        ra, rb = str(self.roots[link.a]), str(self.roots[link.b])
        la, lb = listing(ra), listing(rb)
        made = []
        for rel in sorted(set(la) | set(lb) | set(link.base)):
            if only is not None and rel not in only:
                continue
            pa, pb = la.get(rel) or os.path.join(ra, rel), lb.get(rel) or os.path.join(rb, rel)
            da, db = digest(pa), digest(pb)
            base = link.base.get(rel)
            if da == db:
                link.base[rel] = da
                continue
            a_changed, b_changed = da != base, db != base
            if a_changed and not b_changed:
                self._apply(pa, pb, da)
            elif b_changed and not a_changed:
                self._apply(pb, pa, db)
            elif da is None:  # deleted on a, modified on b: the modification wins
                self._apply(pb, pa, db)
            elif db is None:
                self._apply(pa, pb, da)
            elif link.engine is Engine.RCLONE:
                made += self._rename_both(link, rel, pa, pb, la, set(la) | set(lb) | set(link.base))
                continue
            else:
                ma, mb = os.stat(pa).st_mtime_ns, os.stat(pb).st_mtime_ns
                a_loses = (ma, link.a) < (mb, link.b)
                win, lose = (pb, pa) if a_loses else (pa, pb)
                winner, loser = (link.b, link.a) if a_loses else (link.a, link.b)
                data, mtime = Path(lose).read_bytes(), os.stat(lose).st_mtime_ns
                copy = self._copy_name(link, rel, loser, winner, mtime, set(la) | set(lb) | set(link.base))
                _copy_file(win, lose)
                for root in (ra, rb):
                    _write_copy(data, mtime, Path(root) / copy)
                link.base[copy] = hashlib.sha256(data).hexdigest()
                la[copy] = os.path.join(ra, copy)
                made.append(copy)
            link.base[rel] = digest(pa)
        self.conflicts += made
        return made

    def _rename_both(self, link: Link, rel: str, pa: str, pb: str, la: dict, taken: set[str]) -> list[str]:
        """rclone bisync 1.60 on a file changed on both sides: each version renamed, on both sides."""
        made = []
        ra, rb = str(self.roots[link.a]), str(self.roots[link.b])
        for side, src in ((1, pa), (2, pb)):
            copy = make_copy_name(Engine.RCLONE, rel, number=side, variant="legacy")
            while copy in taken:  # an unfolded copy from before: keep it (a copy of the copy)
                longer = make_copy_name(Engine.RCLONE, copy, number=side, variant="legacy")
                if len(longer.encode()) > 200:  # a real file system refuses names past 255 bytes:
                    n = 1  # number the copy instead (what 1.66+ does) rather than crash the run
                    while (longer := make_copy_name(Engine.RCLONE, rel, number=n)) in taken:
                        n += 1
                copy = longer
            data, mtime = Path(src).read_bytes(), os.stat(src).st_mtime_ns
            for root in (ra, rb):
                _write_copy(data, mtime, Path(root) / copy)
            link.base[copy] = hashlib.sha256(data).hexdigest()
            la[copy] = os.path.join(ra, copy)
            taken.add(copy)
            made.append(copy)
        for path in (pa, pb):
            self._apply(path, path, None)
        link.base[rel] = None
        return made

    @staticmethod
    def _apply(src: Path | str, dst: Path | str, want: str | None) -> None:
        if want is None:
            try:
                os.unlink(dst)
            except FileNotFoundError:
                pass
        else:
            _copy_file(src, dst)

    # ---------------------------------------------------------------- everything

    def sync_all(self, rounds: int = 10) -> list[str]:
        """Sync every link that is up, round after round, until nothing changes."""
        made: list[str] = []
        for _ in range(rounds):
            before = self.fingerprint()
            for link in self.links:
                made += self.sync(link.a, link.b)
            if self.fingerprint() == before:
                break
        return made

    def sync_some(self, rng: random.Random, share: float = 0.5) -> list[str]:
        """One random link, carrying a random share of the paths (the rest stay delayed)."""
        link = rng.choice([link for link in self.links if link.up] or [None])  # type: ignore[list-item]
        if link is None:
            return []
        paths = set(listing(self.roots[link.a])) | set(listing(self.roots[link.b])) | set(link.base)
        only = {p for p in paths if rng.random() < share}
        return self.sync(link.a, link.b, only)

    def fingerprint(self) -> dict[str, dict[str, str | None]]:
        return {m: {rel: digest(p) for rel, p in listing(root).items()} for m, root in self.roots.items()}

    def identical(self) -> bool:
        prints = list(self.fingerprint().values())
        return all(p == prints[0] for p in prints[1:])
