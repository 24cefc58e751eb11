"""The names of a large session directory a hook's read needs, without listing it on every hook.

A hook reads one session: its view, each host's version, and their displaced versions and conflict
copies. The last two are found by name, which takes a listing of the directory: 100,000 session files
made that 280 ms per hook (issue 24), against 0.2 ms in a small home. Only a few names in such a listing
can be a displaced version or a copy of some session: the ones that are not plain names of ours
(:func:`.copies.plain`: copies, displaced versions, temp files, floor.json) and plain-looking names one
of whose prefixes is another session's file (OneDrive's ``session-<id>-LAPTOP.json`` beside
``session-<id>.json``). This module keeps those *unusual* names of each directory in one machine-local
file, with the directory's identity and modification time when it was listed.

A directory's modification time changes whenever a name in it is created, removed or renamed, which is
the only way a copy or displaced version appears or goes; its change time too, and that one also when the
modification time is put back (``rsync -a``, Unison ``times = true``, ``touch -d``). So while the
directory's (device, inode, mtime, ctime) are those recorded, the recorded names are the names: no listing. A listing taken less than
:data:`RACY_NS` after the directory last changed (the later of its mtime and ctime: under a modification
time put back, only the change time tells) is not trusted (a second change in the same tick of a coarse
clock, FAT's 2 s, would leave the time as it was): it is taken again on the next read. A file
system whose directory times lag (an NFS client's attribute cache) can hide a copy from a hook's read for
that long; every *write* (and ``status``, ``doctor``, ``watch``, gc) lists the directory itself, so what
such a copy holds is merged by the next write, never lost.

The home changes at every Stop (the worker publishes the cursor into it), so the hook after one would
pay for the listing: the worker after its last write and ``watch`` after a change call :meth:`refresh`,
which lists a stale directory again once it has been quiet for :data:`RACY_NS`, off Claude Code's clock.
A refresh is trusted by the same rule as a hook's listing, and a hook still lists what is stale. A hook's
listing that would not be trusted is not saved (no later read could use it).

The cache lives beside the machine's clocks (never in the synced home), 0600 in a 0700 directory, never
read or written through a link (the file or its directory); a cache file that cannot be read is simply
rebuilt. Only a file system that can say what a directory's identity is (:meth:`.fs.FS.listing_token`)
uses it; the simulation's does not, and lists every time.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import stat
import time
from pathlib import Path

from ..conflicts import copies

RACY_NS = 3_000_000_000  # FAT's 2 s tick, and a little for a file server's clock ahead of ours
FORMAT = 1


# compiled on first use: a hook whose cache is fresh needs none of them (compiling is a hook's millisecond)
_PATTERNS = {
    "session-line": (r"^(session-[A-Za-z0-9][A-Za-z0-9_-]{0,127})\.json$", re.M),  # group 1: the stem
    "session-name": (r"session-[A-Za-z0-9][A-Za-z0-9_-]{0,127}\.json", 0),
    "plain-line": (r"^(?:session-[A-Za-z0-9][A-Za-z0-9_-]{0,127}\.json|conversations\.json|hosts|quarantine|backups)$",
                   re.M),
    # plain-looking strong copies (OneDrive's Linux client, Nextcloud's legacy form): copies.plain says no
    "plain-copy-line": (r"^[^\n]*(?:-safeBackup-\d{4,}|_conflict-\d{8}-\d{6})\.json$", re.M),
}
_PLAIN_COPY_MARKS = ("-safeBackup-", "_conflict-")


@functools.lru_cache(maxsize=None)
def _re(name: str) -> re.Pattern:
    return re.compile(*_PATTERNS[name])


_LOOK_FOR_SIZE = 100  # names looked at for a session file's name length


@functools.lru_cache(maxsize=4)
def _plain_lines(size: int | None) -> re.Pattern:
    """A plain name's line with its newline (a session file's only when its name is ``size`` long), to be
    removed from the joined listing so that what is left are the other lines (a few, out of 100,000).
    Anchored at a line's start and spanning exactly one line, a match resumes at the next line's start (a
    negative look-ahead for the lines that are not plain tried the rest of every line at each of its
    characters: three times as slow)."""
    ids = "{0,127}" if size is None else "{%d}" % (size - 14)
    return re.compile(r"^(?:session-[A-Za-z0-9][A-Za-z0-9_-]%s\.json|conversations\.json|hosts|quarantine|backups)\n"
                      % ids, re.M)


def unusual(names: list[str]) -> list[str]:
    """The names of a session directory that may be a displaced version or a copy of a session file.

    Run on every listing after a change (every Stop publishes a view), so done in C as far as it goes
    (100,000 names: a hook's first read after a change). The lines of the joined listing that are plain
    names are removed by one regular-expression pass; those left are not plain or a session file's whose
    name has another length than the first one's, and a plain session name counts when it extends another's
    stem after a - or _ (:func:`.copies.extending`). Session ids of one length (Claude Code's UUIDs) leave
    no session name at all, and then no stem extends another: the 100,000 stems are not even made. A stem
    longer than the common one (OneDrive's ``session-<id>-LAPTOP``) can only extend a shorter stem: one of
    its own kind, or a common one cut from its start (a set look-up); a stem shorter than the common one
    could be extended by any of them, and then every stem is looked at."""
    joined = "\n".join(names)
    if joined.count("\n") != max(len(names) - 1, 0):  # a newline in a name: one name at a time
        out = [n for n in names if not copies.plain(n) or "\n" in n]
        stems = [n[:-5] for n in names if "\n" not in n and _re("session-line").fullmatch(n)]
    else:
        session_name = _re("session-name").fullmatch
        size = next((len(n) for n in names[:_LOOK_FOR_SIZE] if session_name(n)), None)
        left = [n for n in _plain_lines(size).sub("", joined + "\n").split("\n") if n]  # (and the last line's end)
        if size is None:
            out, stems = left, _re("session-line").findall(joined)
        else:
            out, others = [], []  # others: the stems of session names of another length
            for n in left:
                if session_name(n):
                    others.append(n[:-5])
                else:
                    out.append(n)
            common = size - 5
            if any(len(stem) < common for stem in others):
                stems = _re("session-line").findall(joined)
            elif others:
                present = frozenset(names)
                stems = list({*others, *(s[:common] for s in others if s[common] in "-_" and s[:common] + ".json" in present)})
            else:
                stems = []
        if any(mark in joined for mark in _PLAIN_COPY_MARKS):
            out += [n for n in _re("plain-copy-line").findall(joined) if _re("plain-line").fullmatch(n)]
    out += [stem + ".json" for stem in copies.extending(stems)]
    return sorted(set(out))


CAP = 64 << 20  # a larger listing cache is not ours (100,000 names with copies: a few MB)


def _own_dir(path: Path) -> None:
    """OSError unless the cache file's directory is a directory, not a link to one (someone else's
    directory: a listing planted there would hide a copy from every hook's read)."""
    if not stat.S_ISDIR(os.lstat(path.parent).st_mode):
        raise OSError(f"{path.parent}: not a cache directory of ours")


def _read_own(path: Path) -> bytes:
    """The cache file's bytes, never through a link (the file or its directory), never a FIFO or device (a
    hook would wait on it for good), never more than :data:`CAP`; OSError otherwise (the read lists the
    directories instead)."""
    _own_dir(path)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
                 | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > CAP:
            raise OSError(f"{path}: not a cache file of ours")
        chunks, left = [], st.st_size + 1
        while left > 0 and (chunk := os.read(fd, left)):
            chunks.append(chunk)
            left -= len(chunk)
        if left <= 0:
            raise OSError(f"{path}: grew while read")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _changed(token: tuple[int, ...]) -> int:
    """When a directory last changed, by its listing token (:meth:`.fs.FS.listing_token`), in ns."""
    return max(token[2], token[3])


class ListingCache:
    def __init__(self, fs, home: Path, cache_dir: Path):
        self.fs = fs
        self.home = Path(home)
        digest = hashlib.sha256(str(self.home).encode("utf-8", "surrogateescape")).hexdigest()[:16]
        self.path = Path(cache_dir) / f"listings-{digest}.json"
        self._data: dict | None = None
        self._dirty = False

    def _load(self) -> dict:
        if self._data is None:
            data: dict = {}
            try:
                raw = json.loads(_read_own(self.path))
                if isinstance(raw, dict) and raw.get("format") == FORMAT and isinstance(raw.get("dirs"), dict):
                    data = raw["dirs"]
            except (OSError, ValueError, RecursionError):
                pass
            self._data = data
        return self._data

    def _key(self, directory: Path) -> str:
        return str(Path(directory).relative_to(self.home)) if Path(directory) != self.home else "."

    def _fresh(self, key: str, token: tuple[int, ...]) -> list[str] | None:
        """The recorded unusual names if the listing recorded for ``key`` is trusted and still current."""
        entry = self._load().get(key)
        if (isinstance(entry, dict) and entry.get("token") == list(token) and isinstance(entry.get("names"), list)
                and entry.get("trusted") is True
                and all(isinstance(n, str) and n and "/" not in n and "\x00" not in n and n not in (".", "..")
                        for n in entry["names"])):
            return entry["names"]
        return None

    def _list(self, directory: Path, key: str, token: tuple[int, ...], *, keep_untrusted: bool = True) -> list[str]:
        listed_at = time.time_ns()
        names = self.fs.listdir(directory)
        after = self.fs.listing_token(directory)
        found = unusual(names)
        # the later of its modification and change time: a sync engine that puts the modification time back
        # (rsync -a, Unison times = true) leaves only the change time saying when the directory last changed,
        # and a second change in that tick of a coarse clock keeps the whole token
        trusted = after == token and _changed(token) + RACY_NS < listed_at
        if trusted or keep_untrusted:
            self._load()[key] = {"token": list(token), "trusted": trusted, "names": found, "count": len(names)}
            self._dirty = True
        return found

    def names(self, directory: Path) -> list[str] | None:
        """The unusual names of ``directory`` (None: list it, the file system cannot tell if it changed)."""
        token = self.fs.listing_token(directory)
        if token is None:
            return None
        key = self._key(directory)
        found = self._fresh(key, token)
        # (a listing the cache would not trust is not saved from a hook's read: no later read could use it)
        return found if found is not None else self._list(directory, key, token, keep_untrusted=False)

    def refresh(self, directory: Path) -> int | None:
        """Off the hook path (the worker after its writes, ``watch`` after a change): list ``directory``
        into the cache if what it holds for it is not a trusted listing of the directory as it is now, and
        the directory has not changed for :data:`RACY_NS` — the same rule :meth:`names` trusts a listing by,
        so a refresh is never trusted where a hook's own listing would not be. None: nothing left to do (the
        cache is fresh, or the file system cannot tell); else the wall time (ns) after which a listing would
        be trusted: call again then. A directory changed too recently that the cache knows nothing of is
        listed anyway (untrusted), for its size (:meth:`size`)."""
        token = self.fs.listing_token(directory)
        if token is None:
            return None
        key = self._key(directory)
        if self._fresh(key, token) is not None:
            return None
        due = _changed(token) + RACY_NS
        if time.time_ns() <= due:
            if self.size(directory) is None:
                self._list(directory, key, token)
            return due
        self._list(directory, key, token)
        if self._load()[key]["trusted"]:
            return None
        now = self.fs.listing_token(directory)  # it changed while listed: trusted once unchanged for RACY_NS
        return max(_changed(now or token) + RACY_NS, time.time_ns())

    def size(self, directory: Path) -> int | None:
        """How many names ``directory`` had when last listed into the cache (None: not known)."""
        entry = self._load().get(self._key(directory))
        count = entry.get("count") if isinstance(entry, dict) else None
        return count if isinstance(count, int) and not isinstance(count, bool) else None

    def save(self) -> None:
        if not self._dirty:
            return
        from ...base.atomic import atomic_write, ensure_dir

        try:
            ensure_dir(self.path.parent)
            _own_dir(self.path)  # (a link where the cache directory should be: not written through)
            atomic_write(self.path, json.dumps({"format": FORMAT, "dirs": self._data},
                                               separators=(",", ":")).encode(), durable=False)
        except OSError:
            pass  # a cache: the next read lists again
        self._dirty = False
