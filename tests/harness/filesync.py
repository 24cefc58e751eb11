"""Real run-on-demand sync engines between two local directories: rclone bisync and Unison.

Each ``sync()`` is one run of the real binary (Debian's rclone 1.60, Unison 2.52), with the
settings sync/README.md recommends; state (rclone's listings, Unison's archives) lives in a work
dir outside both replicas. The binaries are installed by ``.ci/run``; if one is missing the test
fails with the command to run -- it never skips.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RCLONE_FILTERS = REPO / "sync" / "rclone-filters.txt"  # the kit's file, as docs/sync-rclone.md says
# the kit's file before it kept the views out (temp files only): what a home set up earlier still uses
LEGACY_RCLONE_FILTERS = ("# our atomic-write temp files: they exist only between write and rename\n"
                         "- .subconscious-tmp-*\n")
TEMP_RULES = (".subconscious-tmp-*",)  # our atomic-write temps: never synced (Unison's -ignore)


def require(binary: str) -> str:
    """The engine's binary, installed from Debian on first use (the test fails, never skips, without it)."""
    from .debian import MissingBinary, ensure_binary

    try:
        return ensure_binary(binary)
    except MissingBinary as exc:
        pytest.fail(str(exc), pytrace=False)


class SyncRun:
    name = ""

    def __init__(self, a: Path, b: Path, work: Path):
        self.a, self.b, self.work = Path(a), Path(b), Path(work)
        self.work.mkdir(parents=True, exist_ok=True)
        self.binary = require(self.name)  # the engine's binary is named like it
        self.runs = 0
        self.seconds = 0.0
        self.log: list[str] = []

    def _run(self, cmd: list[str], env: dict | None = None, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess:
        t0 = time.monotonic()
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
        self.seconds += time.monotonic() - t0
        self.runs += 1
        self.log.append(f"$ {' '.join(cmd)}\n{r.stdout}{r.stderr}")
        if r.returncode not in ok:
            raise AssertionError(f"{self.name} exited {r.returncode}:\n{r.stdout}{r.stderr}")
        return r

    def sync(self) -> subprocess.CompletedProcess:
        raise NotImplementedError


class RcloneBisync(SyncRun):
    """``rclone bisync A B``; the first run is ``--resync``. ``filters``: the filters file's text (the
    kit's ``sync/rclone-filters.txt`` by default)."""

    name = "rclone"

    first = True

    def __init__(self, a: Path, b: Path, work: Path, filters: str | None = None):
        super().__init__(a, b, work)
        self.filters = RCLONE_FILTERS.read_text() if filters is None else filters

    def sync(self) -> subprocess.CompletedProcess:
        filters = self.work / RCLONE_FILTERS.name  # a copy: rclone writes <filters>.md5 beside the file it reads
        if not filters.exists():
            filters.write_text(self.filters)
        cmd = [self.binary, "bisync", str(self.a), str(self.b), "--config", os.devnull,
               "--workdir", str(self.work / "bisync"), "--filters-file", str(filters),
               # a test home holds a handful of files, all of which a write changes: bisync's
               # "all files were changed" and --max-delete guards would abort; a real home is larger
               "--force", "-v"]
        if self.first:
            cmd.append("--resync")
        r = self._run(cmd)
        self.first = False
        return r


class Unison(SyncRun):
    """``unison A B -batch`` with ``copyonconflict`` and ``prefer newer``."""

    name = "unison"

    def sync(self) -> subprocess.CompletedProcess:
        cmd = [self.binary, str(self.a), str(self.b), "-batch", "-auto", "-times", "-fastcheck", "false",
               "-prefer", "newer", "-copyonconflict", "-confirmbigdel=false"]
        for rule in TEMP_RULES:
            cmd += ["-ignore", f"Name {rule}"]
        return self._run(cmd, env=dict(os.environ, UNISON=str(self.work / "unison")))


ENGINES = {"rclone": RcloneBisync, "unison": Unison}


def tree(root: Path) -> dict[str, bytes]:
    """relative path -> bytes of every file under ``root``."""
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            p = Path(dirpath) / name
            out[p.relative_to(root).as_posix()] = p.read_bytes()
    return out
