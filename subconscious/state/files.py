"""File IO for the state directory: atomic writes, reading with recovery, setting aside.

- Writes go to a temp file in the same directory (named ``.subconscious-tmp-*``, ignored by every
  sync kit template), are fsynced, renamed over the target and the directory is fsynced: a reader or a
  sync engine sees the old file or the new one, never a torn one, even after SIGKILL or power loss.
- A file that does not parse is never overwritten blindly: its bytes are copied to ``quarantine/``
  under a name that says what was wrong (deduplicated by content hash) and reported.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .textforms import has_conflict_markers, split_conflict_sides

from ..atomic import DIR_MODE, FILE_MODE, atomic_write, ensure_dir  # noqa: F401 (re-exported)

QUARANTINE = "quarantine"


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
    target = ensure_dir(root / QUARANTINE) / f"{path.name}.{kind}.{digest}"
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


def read_json(path: Path, *, root: Path, host: str, keep: bool = True) -> ReadResult:
    """Read ``path`` as JSON, recovering what can be recovered.

    Missing → no values. Git conflict markers → each side that parses (the original is set aside).
    Anything else unparseable → no values, the original set aside, a problem reported. The file
    itself is left untouched: the caller decides whether a regenerated version may replace it.
    ``keep=False`` (read-only callers such as ``status``) reports without setting anything aside.
    """

    def aside(kind: str) -> str | None:
        return str(set_aside(path, raw, kind, root, host)) if keep else None

    result = ReadResult()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return result
    except OSError as exc:
        result.problems.append(Problem("unreadable", str(path), f"cannot read: {exc.strerror}"))
        return result
    result.exists, result.raw = True, raw
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        result.problems.append(Problem("unparseable", str(path), "not UTF-8 text", aside("unparseable")))
        return result
    try:
        result.values.append(json.loads(text))
        return result
    except json.JSONDecodeError as exc:
        first_error = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    if has_conflict_markers(text):
        kept = aside("git-conflict")
        sides = split_conflict_sides(text)
        parsed = []
        for side in sides:
            try:
                parsed.append(json.loads(side))
            except json.JSONDecodeError:
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
