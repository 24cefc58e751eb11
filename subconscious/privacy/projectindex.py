"""The private-text index of one project (textindex.py), read from its files and cached on this machine.

:func:`project_index` walks the session's project directory (and the directories of absolute
``SUBCONSCIOUS_PRIVATE_PATHS`` globs): regular files only, no link followed, no FIFO or device opened; the
directories :data:`SKIP_DIRS` are not entered (they hold no text a person marked private). A file over
:data:`MAX_FILE_BYTES`, or with a NUL byte in its first 8 KiB (binary; UTF-16 text has a byte order mark), is
not read. At most :data:`MAX_FILES` files and :data:`MAX_TOTAL_BYTES` bytes are read per build: past that the
index is partial, and says why (the worker logs it).

The cache (``<state dir>/private-index/<digest>.json``, mode 0600, one per project and set of globs) keeps,
for each file, its identity (size, mtime, ctime, inode, device: trusted only on a file system that keeps a real
change time, :mod:`subconscious.state.fskind`) and the digests of its private and public lines, never
their text; a file whose identity is unchanged is not read again. A cache that cannot be read is rebuilt.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
import time
from array import array
from pathlib import Path
from typing import Callable, Iterator, Sequence

from ..state.fskind import keeps_change_time
from .private import is_private_path
from .results import decode
from .textindex import Entry, PrivateLines, entries_of, file_lines, public_digest

__all__ = ["project_index", "SKIP_DIRS", "MAX_FILES", "MAX_FILE_BYTES", "MAX_TOTAL_BYTES"]

SKIP_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".tox",
                       ".mypy_cache", ".pytest_cache", ".ruff_cache"})
MAX_FILES = 20_000
MAX_FILE_BYTES = 1 << 20
MAX_TOTAL_BYTES = 64 << 20
MAX_CACHE_BYTES = 256 << 20
MAX_WALK = 200_000  # directory entries looked at per build (files, directories, links)
PAST_DAYS = 30      # how long the private lines of a changed or removed file are still withheld
MAX_PAST = 10_000
VERSION = 3
_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def _walk(top: str, limit: int, follow: "Callable[[str], bool]") -> Iterator[tuple[str, os.stat_result, bool]]:
    """``(path, stat)`` of the regular files under ``top``, links not followed but those whose own path
    ``follow`` says to (a private directory or file linked into the project: each real directory walked once),
    ``SKIP_DIRS`` not entered; the third item says the file was reached through such a link (it is private).
    At most ``limit`` entries (files, directories, links) are looked at; past that a last ``("", None, False)``
    says so."""
    stack: list[tuple[str, bool]] = [(top, False)]
    seen, walked = 0, set()
    while stack:
        d, linked = stack.pop()
        try:
            with os.scandir(d) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            seen += 1
            if seen > limit:
                yield "", None, False  # type: ignore[misc]
                return
            try:
                st = e.stat(follow_symlinks=False)
                if stat.S_ISLNK(st.st_mode) and follow(e.path):
                    st = os.stat(e.path)  # the link's target, for a private path only
                    if stat.S_ISDIR(st.st_mode):
                        if (st.st_dev, st.st_ino) not in walked:
                            walked.add((st.st_dev, st.st_ino))
                            stack.append((os.path.realpath(e.path), True))
                        continue
                    if stat.S_ISREG(st.st_mode):
                        yield os.path.realpath(e.path), st, True
                    continue
            except (OSError, ValueError):
                continue
            if stat.S_ISDIR(st.st_mode):
                if e.name not in SKIP_DIRS and (st.st_dev, st.st_ino) not in walked:
                    walked.add((st.st_dev, st.st_ino))
                    stack.append((e.path, linked))
            elif stat.S_ISREG(st.st_mode):
                yield e.path, st, linked


def _read(path: str, size: int) -> "str | None":
    """The text of a regular file (None: gone, a link or special file now, binary or too big)."""
    try:
        fd = os.open(path, _FLAGS)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
            return None
        os.set_blocking(fd, True)
        data = os.read(fd, MAX_FILE_BYTES + 1)
        while len(data) <= MAX_FILE_BYTES and (more := os.read(fd, MAX_FILE_BYTES + 1 - len(data))):
            data += more
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:
        return None
    if b"\x00" in data[:8192] and data[:2] not in (b"\xff\xfe", b"\xfe\xff"):
        return None
    return decode(data)


def _tops(root: str, globs: Sequence[str]) -> list[str]:
    """The directories to walk: the project's, and each absolute glob's directory before its first wildcard."""
    tops = [root]
    for g in globs:
        if os.path.isabs(g):
            fixed = []
            for part in g.split("/")[1:]:
                if any(c in part for c in "*?["):
                    break
                fixed.append(part)
            d = "/" + "/".join(fixed)
            if not os.path.isdir(d):
                d = os.path.dirname(d)
            if d not in ("/", "") and not any(d == t or d.startswith(t.rstrip("/") + "/") for t in tops):
                tops.append(d)
    return tops


def _pack(entries: Sequence[tuple[int, Entry]], public: Sequence[int]) -> list[str]:
    flat = array("Q", [x for line, e in entries for x in (line, *e)])
    return [base64.b64encode(flat.tobytes()).decode(), base64.b64encode(array("Q", public).tobytes()).decode()]


def _unpack_private(priv: str) -> list[tuple[int, Entry]]:
    if not priv:
        return []
    flat = array("Q")
    flat.frombytes(base64.b64decode(priv, validate=True))
    if len(flat) % 4:
        raise ValueError("torn entries")
    return [(flat[i], (flat[i + 1], flat[i + 2], flat[i + 3])) for i in range(0, len(flat), 4)]


def _unpack_public(pub: str) -> array:
    public = array("Q")
    public.frombytes(base64.b64decode(pub, validate=True))
    return public


def _cache_path(cache_dir: Path, root: str, globs: Sequence[str]) -> Path:
    key = hashlib.sha256(json.dumps([root, list(globs)]).encode("utf-8", "surrogatepass")).hexdigest()[:24]
    return Path(cache_dir) / f"{key}.json"


def _load_cache(path: Path) -> "tuple[dict, set[int] | None, list]":
    """``(files, common)`` of the cache at ``path``: each file's ``[size, mtime, ctime, inode, private, public]``
    and the digests of the private lines that were also public text of the project (None: not there), and the
    private lines of files since changed (:func:`_past`)."""
    try:
        fd = os.open(path, _FLAGS)
    except OSError:
        return {}, None, []
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_CACHE_BYTES or st.st_uid != os.getuid():
            return {}, None, []
        os.set_blocking(fd, True)
        with os.fdopen(os.dup(fd), "rb") as f:
            data = json.loads(f.read(MAX_CACHE_BYTES + 1))
    except (OSError, ValueError, RecursionError):
        return {}, None, []
    finally:
        os.close(fd)
    if not isinstance(data, dict) or data.get("v") != VERSION or not isinstance(data.get("files"), dict):
        return {}, None, []
    past = data.get("past") if isinstance(data.get("past"), list) else []
    common = data.get("common")
    if not isinstance(common, list) or not all(type(c) is int for c in common):
        return data["files"], None, past
    return data["files"], set(common), past


def _save_cache(path: Path, files: dict, common: "set[int]", past: list) -> None:
    from ..base.atomic import atomic_write, ensure_dir

    try:
        d = path.parent
        if d.is_symlink():
            return
        ensure_dir(d)
        body = {"v": VERSION, "files": files, "common": sorted(common), "past": past}
        atomic_write(path, json.dumps(body, separators=(",", ":")), durable=False)
    except (OSError, ValueError):
        pass  # a cache: the next build reads the files again


def project_index(root: "str | None", globs: Sequence[str] = (), cache_dir: "Path | None" = None, *,
                  write: bool = True, max_files: int = MAX_FILES, max_total: int = MAX_TOTAL_BYTES,
                  max_entries: int = MAX_WALK) -> PrivateLines:
    """The private lines of the project at ``root`` under ``globs`` (see the module docstring). With
    ``cache_dir``, unchanged files are taken from the cache, which is rewritten (unless not ``write``)."""
    if not root:
        return PrivateLines()
    try:
        real = os.path.realpath(root)
    except (OSError, ValueError):
        return PrivateLines()
    if not os.path.isdir(real):
        return PrivateLines()
    globs = tuple(globs)
    path = _cache_path(cache_dir, real, globs) if cache_dir is not None else None
    old, old_common, old_past = _load_cache(path) if path is not None else ({}, None, [])
    new: dict[str, list] = {}
    private: list[tuple[int, Entry]] = []  # (the digest of the line, one of its entries)
    read_bytes, private_bytes, public_files, partial = 0, 0, 0, None

    def is_private(full: str) -> bool:
        return bool(globs) and (is_private_path(full, globs) or is_private_path(os.path.relpath(full, real), globs))

    def follow(link: str) -> bool:  # a link that is a private path, or under which everything is (secrets/**)
        return is_private(link) or is_private(os.path.join(link, "x"))

    for top in _tops(real, globs):
        for full, st, linked in _walk(top, max_entries, follow):
            if st is None:
                partial = f"over {max_entries} entries"
                break
            if full in new:
                continue
            ident = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]
            hit = old.get(full)
            # a cached row is taken only where the file system keeps a real change time (fskind.py: a
            # same-size rewrite with its mtime put back looks unchanged elsewhere), asked per file's device
            if (isinstance(hit, list) and len(hit) == 7 and hit[:5] == ident and isinstance(hit[5], str)
                    and isinstance(hit[6], str) and keeps_change_time(full, st.st_dev)):
                try:
                    private += _unpack_private(hit[5])
                    new[full] = hit
                    continue
                except ValueError:
                    pass
            mine = linked or is_private(full)
            if st.st_size > MAX_FILE_BYTES:
                if mine:
                    partial = f"a private file over {MAX_FILE_BYTES} bytes ({os.path.basename(full)})"
                continue
            if mine:  # private files are read first of all: no number of public ones crowds them out
                if private_bytes + st.st_size > max_total:
                    partial = f"private files over {max_total} bytes"
                    continue
                private_bytes += st.st_size
            else:
                if public_files >= max_files or read_bytes + st.st_size > max_total:
                    partial = partial or f"over {max_files} files or {max_total} bytes"
                    continue
                public_files += 1
                read_bytes += st.st_size
            text = _read(full, st.st_size)
            if text is None:
                continue
            priv, pub = file_lines(text, mine)
            entries = [(public_digest(s), e) for s in dict.fromkeys(priv) for e in entries_of(s)]
            new[full] = ident + _pack(entries, sorted({public_digest(s) for s in pub}))
            private += entries
        if partial and partial.startswith("over") and "entries" in partial:
            break
    now = int(time.time())
    past = _past(old, new, old_past, now)
    for _, blob in past:
        try:
            private += _unpack_private(blob)
        except ValueError:
            continue
    lines = {line for line, _ in private}
    if new == old and old_common is not None and past == old_past:
        common = old_common & lines  # nothing changed: what the cache found public before
    else:
        common = _common(new, lines)
        if path is not None and write:
            _save_cache(path, new, common, past)
    return PrivateLines((e for line, e in private if line not in common), partial)


def _past(old: dict, new: dict, past: list, now: int) -> list:
    """The private lines of files that changed or went, kept for :data:`PAST_DAYS`: a line printed by a tool
    before its file changed is sent later (the next Stop, a deferred day), and must still be found."""
    out = [row for row in past if isinstance(row, list) and len(row) == 2 and type(row[0]) is int
           and isinstance(row[1], str) and now - row[0] < PAST_DAYS * 86400]
    for name, row in old.items():
        if not (isinstance(row, list) and len(row) == 7 and isinstance(row[5], str)) or not row[5]:
            continue
        if new.get(name) is None or new[name][5] != row[5]:
            out.append([now, row[5]])
    return out[-MAX_PAST:]


def _common(files: dict, lines: "set[int]") -> "set[int]":
    """Which of the private ``lines`` (digests) are also public text of ``files`` (cache rows)."""
    found: set[int] = set()
    if not lines:
        return found
    for row in files.values():
        try:
            found |= lines.intersection(_unpack_public(row[6]))
        except (ValueError, TypeError):
            continue
    return found
