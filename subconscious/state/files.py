"""File IO for the state directory: atomic writes, reading with recovery, setting aside.

- Writes go to a temp file in the same directory (named ``.subconscious-tmp-*``, ignored by every
  sync kit template), are fsynced, renamed over the target and the directory is fsynced: a reader or a
  sync engine sees the old file or the new one, never a torn one, even after SIGKILL or power loss.
- A file that does not parse is never overwritten blindly: its bytes are copied to ``quarantine/``
  under a name that says what was wrong (deduplicated by content hash) and reported.
- Hostile files: reading never follows a symbolic link, never opens a FIFO, socket or device, and
  refuses files over the size cap (:mod:`subconscious.state.fs`). Such a file is reported as
  ``unsafe-file`` and never copied anywhere (a link could point at an SSH key: its bytes must not
  reach the synced folder). Every way JSON can fail — deep nesting, huge integers, bad UTF-8 —
  is one "unparseable" (:mod:`subconscious.state.jsontext`); a UTF-8 byte-order mark is accepted.
- Names made from a file's name stay under NAME_MAX (255 bytes), with room for our temp-file names.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .fs import REAL
from .jsontext import BOM, Unparseable, loads_state
from .textforms import has_conflict_markers, split_conflict_sides

from ..base.atomic import DIR_MODE, FILE_MODE, atomic_write, ensure_dir  # noqa: F401 (re-exported)

QUARANTINE = "quarantine"
NAME_MAX = 255  # bytes in one file name (ext4, APFS, NTFS in UTF-16 units: no less for our names)
ASIDE_NAME_MAX = 200  # a quarantined file's name: + ".about.json" + an atomic-write temp name's extras
UNSAFE = "unsafe-file"  # a symlink, FIFO, socket, device, directory or over-large file: never read


def fit_name(name: str, limit: int = NAME_MAX) -> str:
    """``name`` if it takes at most ``limit`` bytes (UTF-8), else as much of it as fits, whole characters
    only, then ``~`` and 12 hex digits of a hash of the whole name (so different names stay different)."""
    data = name.encode("utf-8", "surrogateescape")
    if len(data) <= limit:
        return name
    tag = "~" + hashlib.sha256(data).hexdigest()[:12]
    head = data[: limit - len(tag)].decode("utf-8", "ignore")  # a character cut in two is dropped
    while len(head.encode("utf-8", "surrogateescape")) > limit - len(tag):
        head = head[:-1]
    return head + tag


@dataclass(frozen=True)
class Problem:
    """Something wrong found in the state directory (reported by status, doctor and the log)."""

    kind: str  # unparseable | git-conflict | invalid-entry | wrong-type | ...
    path: str
    message: str
    kept_at: str | None = None  # where the original bytes were set aside


@dataclass
class ReadResult:
    """The JSON values a file stands for (several for a file with git conflict markers)."""

    values: list[Any] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    exists: bool = False
    raw: bytes = b""


def set_aside(path: Path, raw: bytes, kind: str, root: Path, host: str) -> Path:
    """Copy ``raw`` (the bytes of ``path``) into ``root/quarantine`` once per distinct content."""
    digest = hashlib.sha256(raw).hexdigest()[:12]
    suffix = f".{kind}.{digest}"
    name = fit_name(path.name, ASIDE_NAME_MAX - len(suffix.encode("utf-8", "surrogateescape")))
    if (root / QUARANTINE).is_symlink():
        raise OSError(f"{root / QUARANTINE} is a symbolic link: nothing is set aside through it")
    target = ensure_dir(root / QUARANTINE) / (name + suffix)
    if not target.exists():
        atomic_write(target, raw)
        note = {
            "original": str(path.relative_to(root)) if path.is_relative_to(root) else str(path),
            "kind": kind,
            "host": host,
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        atomic_write(target.with_name(target.name + ".about.json"), json.dumps(note, indent=1) + "\n")
        logging.getLogger("subconscious").warning("state: %s could not be used (%s); its bytes are kept in %s",
                                                  path, kind, target)
    return target


def read_json(path: Path, *, root: Path, host: str, keep: bool = True, fs=None) -> ReadResult:
    """Read ``path`` as JSON, recovering what can be recovered.

    Missing → no values. A symlink, FIFO, socket, device, directory or over-large file → no values and
    an ``unsafe-file`` problem: never followed, opened for reading or copied. Otherwise
    :func:`parse_json` of its bytes. The file itself is left untouched: the caller decides whether a
    regenerated version may replace it. ``keep=False`` (read-only callers such as ``status``) reports
    without setting anything aside. ``fs``: the file system to read through (a store's, confined to the
    home: doctor reads each file once through it); the unconfined real one by default.
    """
    path, root = (p if isinstance(p, Path) else Path(p) for p in (path, root))
    # a file directly in the root has no directory on the way (doctor reads 10,000 of them)
    linked = None if os.path.dirname(os.fspath(path)) == os.fspath(root) else _linked_parent(path, root)
    if linked is not None:
        return ReadResult(problems=[Problem(UNSAFE, str(path), f"inside {linked}, a symbolic link to a directory: "
                                            "not read, never copied")], exists=True)
    got = (fs or REAL).read(path)
    if got.status == "missing":
        return ReadResult()
    if got.status in ("symlink", "special", "too-large"):
        # something is there; its bytes are never read, so none can be set aside
        return ReadResult(problems=[Problem(UNSAFE, str(path), f"{got.detail}: not read, never copied")],
                          exists=True)
    if not got.ok:
        return ReadResult(problems=[Problem("unreadable", str(path), f"cannot read: {got.detail}")])
    return parse_json(path, got.data, root=root, host=host, keep=keep)


def _linked_parent(path: Path, root: Path) -> Path | None:
    """The first directory between ``root`` and ``path`` that is a symbolic link (``hosts/`` → elsewhere
    would make every file there look like ours), or None."""
    try:
        rel = path.parent.relative_to(root)
    except ValueError:
        return None
    here = root
    for part in rel.parts:
        here = here / part
        if here.is_symlink():
            return here
    return None


def parse_json(path: Path, raw: bytes, *, root: Path, host: str, keep: bool = True) -> ReadResult:
    """The JSON values the bytes ``raw`` of the regular file ``path`` stand for.

    Git conflict markers → each side that parses (the original is set aside). Anything else that
    :func:`~subconscious.state.jsontext.loads_state` refuses → no values, the original set aside
    (``keep``), a problem reported.
    """

    def aside(kind: str) -> str | None:
        if not keep:
            return None
        try:
            return str(set_aside(path, raw, kind, root, host))
        except OSError as exc:  # a full or read-only disk, a linked quarantine/: still reported, just not kept
            logging.getLogger("subconscious").warning("state: could not set %s aside: %s", path, exc)
            return None

    result = ReadResult(exists=True, raw=raw)
    try:
        result.values.append(loads_state(raw))
        return result
    except Unparseable as exc:
        first_error = exc.reason
    try:
        text = raw[len(BOM):].decode("utf-8") if raw.startswith(BOM) else raw.decode("utf-8")
    except UnicodeDecodeError:
        text = ""
    if has_conflict_markers(text):
        kept = aside("git-conflict")
        sides = split_conflict_sides(text)
        parsed = []
        for side in sides:
            try:
                parsed.append(loads_state(side))
            except Unparseable:
                pass
        result.values.extend(parsed)
        result.problems.append(
            Problem(
                "git-conflict",
                str(path),
                f"git conflict markers: recovered {len(parsed)} of {len(sides)} sides",
                kept,
            )
        )
        return result
    result.problems.append(Problem("unparseable", str(path), f"invalid JSON: {first_error}", aside("unparseable")))
    return result
