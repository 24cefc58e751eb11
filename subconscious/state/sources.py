"""Every file that may hold state, with how much it is trusted, read through the file-system seam.

A :class:`Source` says what a file is to the merge:

=============  ===========================================================  =================
kind           what                                                         a bad file is …
=============  ===========================================================  =================
``shard``      ``hosts/<host>.json`` or ``hosts/<host>/session-<id>.json``  set aside
               (one writer: that host)
``view``       ``conversations.json`` / ``session-<id>.json`` (every host   set aside
               and upstream's plugin write it)
``displaced``  a version of a view that a publish swapped out while         set aside
               someone was writing it (see :mod:`.publish`)
``copy``       a sync engine's conflict copy with a strong name             set aside
``weak-copy``  a copy recognised by a weak name pattern                     ignored (may not
                                                                            be ours at all)
=============  ===========================================================  =================

Views and displaced versions are where upstream writes: a version there that is not what we wrote is
upstream's newer write (see :mod:`.store.plan`). Copies are folded into ``backups/`` once merged; displaced
versions are removed once merged and old enough.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .copynames import ConflictCopy
from .files import ASIDE_NAME_MAX, Problem, fit_name
from .fs import FS, TEMP_PREFIX
from .textforms import has_conflict_markers, split_conflict_sides

QUARANTINE = "quarantine"
# set-aside versions kept per file and kind (the newest): a torn view under churn is a new content at
# every write, and quarantine/ grew by one file per write between gc runs (red team, issue 24)
QUARANTINE_KEEP = 8


@dataclass(frozen=True)
class Source:
    path: Path
    kind: str  # shard | view | displaced | copy | weak-copy
    copy: ConflictCopy | None = None
    owner: str | None = None  # the host whose shard this is (or is a copy of)

    @property
    def weak(self) -> bool:
        return self.kind == "weak-copy"

    @property
    def upstream_writable(self) -> bool:
        return self.kind in ("view", "displaced")

    @property
    def foldable(self) -> bool:
        return self.kind in ("copy", "weak-copy")


def copy_source(path: Path, copy: ConflictCopy, owner: str | None = None) -> Source:
    weak = copy.weak or copy.ambiguous
    return Source(path, "weak-copy" if weak else "copy", copy, owner)


@dataclass
class Read:
    """The JSON values a source stands for (several for a file with git conflict markers)."""

    source: Source
    raw: bytes | None = None  # None: the file did not exist (or could not be read safely)
    values: list[Any] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    quick: bool = False  # ``values`` came from the cheaper reading (see Reader.read)

    @property
    def exists(self) -> bool:
        return self.raw is not None


def _loads(raw: bytes) -> Any:
    """Parse state JSON; any failure is a ValueError (the hostile-input rules live in jsontext)."""
    try:
        from .jsontext import loads_state
    except ImportError:  # pragma: no cover - until jsontext exists
        if raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        try:
            return json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, RecursionError) as exc:
            raise ValueError(str(exc)) from None
    try:
        return loads_state(raw)
    except Exception as exc:  # Unparseable and anything it lets through
        raise ValueError(str(exc)) from None


class Reader:
    """Reads sources of one home through ``fs``; ``keep`` sets bad files aside in ``quarantine/``."""

    def __init__(self, fs: FS, home: Path, host: str, keep: bool = True):
        self.fs, self.home, self.host, self.keep = fs, home, host, keep

    def read(self, source: Source, quick: Callable[[bytes], Any] | None = None) -> Read:
        """``quick``: a cheaper reading of the bytes that stands for the file's value where it can tell
        (see :mod:`.conflicts.viewlines`), None where it cannot (the file is then parsed as any other)."""
        out = Read(source)
        got = self.fs.read(source.path)
        path = source.path
        if got.status == "missing":
            return out
        if not got.ok:
            if not source.weak:
                out.problems.append(Problem(f"unsafe-file" if got.status in ("symlink", "special", "too-large") else "unreadable",
                                            str(path), f"not read: {got.detail or got.status}"))
            return out
        raw = out.raw = got.data
        if not raw or raw.isspace():
            return out  # empty: nothing there (or an in-place writer between truncate and write)
        if quick is not None and (value := quick(raw)) is not None:
            out.values.append(value)
            out.quick = True
            return out
        try:
            out.values.append(_loads(raw))
            return out
        except ValueError as exc:
            first_error = str(exc)[:200]
        if source.kind == "displaced":
            # half written: an in-place writer still writing into a version we displaced, or a writer of
            # ours killed while writing its temp; kept as it is (the sweep sets it aside once it is old)
            return out
        text = raw.decode("utf-8", "replace")
        if has_conflict_markers(text):
            sides = split_conflict_sides(text)
            for side in sides:
                try:
                    out.values.append(_loads(side.encode()))
                except ValueError:
                    pass
            out.problems.append(Problem("git-conflict", str(path),
                                        f"git conflict markers: recovered {len(out.values)} of {len(sides)} sides",
                                        self.aside(source, raw, "git-conflict")))
            return out
        out.problems.append(Problem("unparseable", str(path), f"invalid JSON: {first_error}",
                                    self.aside(source, raw, "unparseable")))
        return out

    def aside(self, source: Source, raw: bytes, kind: str) -> str | None:
        """Copy ``raw`` into ``quarantine/`` once per distinct content (never for a weak copy: it may
        not be ours; never anything that was not a regular file read without following links)."""
        if not self.keep or source.weak:
            return None
        path = source.path
        digest = hashlib.sha256(raw).hexdigest()[:12]
        qdir = self.home / QUARANTINE
        suffix = f".{kind}.{digest}"
        # a temp file's bytes keep its name without the temp prefix: sync kits ignore that prefix, and what
        # is set aside must travel like the rest of quarantine/
        base = path.name[len(TEMP_PREFIX):] if path.name.startswith(TEMP_PREFIX) else path.name
        target = qdir / (fit_name(base, ASIDE_NAME_MAX - len(suffix)) + suffix)
        if self.fs.read(target).status == "missing":
            self.fs.makedirs(qdir)
            self.fs.write_atomic(target, raw)
            try:
                original = str(path.relative_to(self.home))
            except ValueError:
                original = str(path)
            note = {"original": original, "kind": kind, "host": self.host,
                    "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            self.fs.write_atomic(target.with_name(target.name + ".about.json"),
                                 (json.dumps(note, indent=1) + "\n").encode())
            logging.getLogger("subconscious").warning(
                "state: %s could not be used (%s); its bytes are kept in %s", path, kind, target)
            self._keep_newest(qdir, target.name[: -len(digest)], target.name)
        return str(target)

    def _keep_newest(self, qdir: Path, prefix: str, just: str) -> None:
        """Keep the newest :data:`QUARANTINE_KEEP` set-aside versions named ``<prefix><digest>`` (one file and
        kind), each with its note; older ones are removed (the newest bytes of a file that keeps failing are
        kept, and gc prunes what is left by age). ``just`` (the version set aside now) always stays: the
        others' mtimes may come from another machine's clock (sync engines carry them) or a crafted file."""
        note = ".about.json"
        names = [n for n in self.fs.listdir(qdir) if n.startswith(prefix) and not n.endswith(note)
                 and len(n) == len(prefix) + 12 and n != just]
        if len(names) < QUARANTINE_KEEP:
            return
        dated = sorted(((self.fs.mtime(qdir / n) or 0.0, n) for n in names), reverse=True)
        for _, name in dated[QUARANTINE_KEEP - 1:]:
            self.fs.unlink(qdir / name)
            self.fs.unlink(qdir / (name + note))

    def wrong(self, read: Read, kind: str, message: str) -> None:
        """Report a value in ``read`` that is not of our format (set aside unless weak)."""
        kept = self.aside(read.source, read.raw, kind) if read.raw else None
        read.problems.append(Problem(kind, str(read.source.path), message, kept))
