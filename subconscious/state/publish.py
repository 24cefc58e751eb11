"""Publishing a file that other writers share, without ever discarding a version nobody merged.

``conversations.json`` and ``session-<id>.json`` are written by every host of ours, by sync engines
(a newer version renamed in) and by upstream's plugin (in place: open with truncate, then write). No
lock spans them. A plain rename over the file would throw away whatever landed between our read and
our rename, so :func:`publish` works like this:

1. compare the file with the bytes the caller based its write on; if it changed, publish nothing and
   tell the caller to redo its operation (the cheap check that settles almost every race);
2. put the new bytes in a temp file and swap it with the file atomically (``FS.exchange``), or, where
   no file exists, give the temp file the name only if it is still free (``FS.link``);
3. read what was displaced: if it is exactly what the caller based its write on, it is removed;
   otherwise (someone wrote in between, or an in-place writer truncated it and is still writing) it
   is kept as a *displaced* file (``.subconscious-tmp-displaced-<name>-<token>``), a source that every
   read of that file merges, and the caller redoes its operation.

Where the file system cannot swap (NFS, SMB, Windows), the displaced version is kept with a hard link
taken before the rename; where it has no hard links either, step 1 alone remains (documented limit).

A displaced file is removed by the next operation that merged its bytes whole and adopted what they
added (an in-place writer truncates when it opens, so a file that parsed whole holds no write still
in progress; an empty or partial one is kept).
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from .fs import FS, TEMP_PREFIX

DISPLACED = TEMP_PREFIX + "displaced-"


def displaced_prefix(name: str) -> str:
    return f"{DISPLACED}{name}-"


_TAIL = re.compile(r"(?:[0-9]+-)?[0-9a-f]{8}")


def displaced_names(names: list[str], name: str) -> list[str]:
    """The displaced versions of ``name`` among a directory listing, in name order."""
    prefix = displaced_prefix(name)
    return sorted(n for n in names if n.startswith(prefix) and _TAIL.fullmatch(n, len(prefix)))


def displaced_original(name: str) -> str | None:
    """The name whose displaced version ``name`` is, or None."""
    if not name.startswith(DISPLACED):
        return None
    rest = name[len(DISPLACED):]
    for cut in range(1, len(rest) - 8):
        if rest[cut] == "-" and _TAIL.fullmatch(rest, cut + 1):
            return rest[:cut]
    return None


def _keep_name(path: Path) -> Path:
    return path.with_name(displaced_prefix(path.name) + secrets.token_hex(4))


def _new(fs: FS, path: Path, data: bytes, durable: bool, shared: bool) -> Path:
    """Our new bytes in a temp file beside ``path``.

    For a file others write too (``shared``: a view), the temp is already named as a displaced version:
    after the swap it holds the version we displaced, so a crash at any point leaves a source, not an
    orphan; before the swap it holds our new view, whose content is durable in our own files already, so
    a reader that merges it early sees nothing that could vanish again. A file only we write (a shard, a
    host's session version) gets a plain temp: there the new bytes are the only copy of a write that has
    not returned yet, and a reader must not see them before they are in place."""
    return fs.put_temp(path.parent, f"displaced-{path.name}" if shared else path.name, data, durable=durable)


@dataclass(frozen=True)
class Outcome:
    """``done``: our bytes are at the path. ``redo``: someone else's version was there that we did not
    base our write on; it is kept (displaced or still in place) and the operation must be redone."""

    done: bool
    redo: bool


DONE = Outcome(True, False)


def publish(fs: FS, path: Path, data: bytes, expected: bytes | None, *, durable: bool = True,
            shared: bool = True) -> Outcome:
    """Put ``data`` at ``path`` if it still holds ``expected`` (None: did not exist), never losing a
    version that was put there meanwhile. See the module docstring."""
    now = fs.read(path)
    current = now.data if now.ok else None
    if now.status not in ("ok", "missing"):
        # a symlink, FIFO, directory … named like our file: never replaced blindly, never followed
        return Outcome(False, False)
    if current != expected:
        return Outcome(False, True)
    if current == data:
        return DONE
    tmp = _new(fs, path, data, durable, shared)
    if current is None:
        try:
            created = fs.link(tmp, path)
        except FileNotFoundError:  # our temp was settled by a reader that merged it: start again
            return Outcome(False, True)
        except OSError:  # no hard links here: a rename is the best this file system offers
            if fs.read(path).status != "missing":
                fs.unlink(tmp)
                return Outcome(False, True)
            return _rename_in(fs, tmp, path, durable)
        if created:
            fs.unlink(tmp)
            return DONE
        fs.unlink(tmp)  # someone created it meanwhile: merge theirs first
        return Outcome(False, True)
    try:
        swapped = fs.exchange(tmp, path)
    except FileNotFoundError:  # the file went away meanwhile (a sync engine moving it): start again
        fs.unlink(tmp)
        return Outcome(False, True)
    if swapped:
        return _settle(fs, tmp, path, expected)
    return _publish_by_link(fs, path, tmp, expected, durable)


def _settle(fs: FS, held: Path, path: Path, expected: bytes | None) -> Outcome:
    """``held`` holds the version we displaced: drop it if it is exactly what we merged (an empty file
    may be an in-place writer's truncation, so it is kept), else leave it there as a displaced source."""
    if _drop_if(fs, held, expected):
        return DONE
    if displaced_original(held.name) is None:  # a plain temp (a file only we write): make it a source
        fs.rename(held, _keep_name(path))
    return Outcome(True, True)


def _publish_by_link(fs: FS, path: Path, tmp: Path, expected: bytes | None, durable: bool) -> Outcome:
    """No atomic swap here: keep the current version under a second name, then rename over it."""
    aside = _keep_name(path)
    try:
        if not fs.link(path, aside):  # pragma: no cover - the name is random
            raise OSError("displaced name taken")
    except FileNotFoundError:
        fs.unlink(tmp)
        return Outcome(False, True)
    except OSError:
        aside = None  # no hard links: the pre-check is all we have
    if aside is not None:
        got = fs.read(aside)
        if not (got.ok and got.data == expected):
            fs.unlink(tmp)
            return Outcome(False, True)  # changed between the check and the link: aside keeps it
    out = _rename_in(fs, tmp, path, durable)
    if aside is None or not out.done:
        if aside is not None:
            _drop_if(fs, aside, expected)
        return out
    if _drop_if(fs, aside, expected):
        return DONE
    return Outcome(True, True)  # written in place meanwhile: aside keeps it


def _rename_in(fs: FS, tmp: Path, path: Path, durable: bool) -> Outcome:
    """Rename our temp over ``path``. Our temp is named as a displaced version (a source every read
    merges), so another host may already have merged it and settled it away: its bytes are in that
    host's shard and view then, and ours are in our own files — the operation is redone, nothing raised."""
    try:
        fs.replace(tmp, path, durable=durable)
    except FileNotFoundError:
        return Outcome(False, True)
    return DONE


def whole(data: bytes | None) -> bool:
    """Do these bytes parse as one whole JSON object? A view upstream is half-way through writing in
    place (truncated, then written in parts) is a prefix that never does."""
    if not data:
        return False
    import json

    try:
        return isinstance(json.loads(data.decode("utf-8-sig")), dict)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return False


def _drop_if(fs: FS, held: Path, expected: bytes | None) -> bool:
    """Remove ``held`` if it holds exactly ``expected`` and that was a whole version (a torn one is an
    in-place write still going on into this very inode: removing its name would lose the rest)."""
    got = fs.read(held)
    if got.ok and got.data == expected and whole(got.data):
        return fs.unlink(held) or True
    return False


def settle_displaced(fs: FS, directory: Path, names: list[str], merged: dict[str, bytes]) -> list[str]:
    """Remove displaced files whose bytes (as read, in ``merged``: name → bytes, only versions that parsed
    whole) are part of what was just durably written. Returns the names removed.

    No grace period is needed: an in-place writer that opened the file before it was displaced truncated
    it when it opened it, so a file read whole and unchanged since holds no write still in progress (an
    empty or partial one never parses, and is kept). Removed at once, a displaced version cannot outlive
    its adoption and count again later (upstream's unstamped version counts as newer than what it
    replaced only while it is new)."""
    removed = []
    for name in names:
        path = directory / name
        got = fs.read(path)
        if got.ok and got.data == merged.get(name) and fs.unlink(path):
            removed.append(name)
    return removed
