"""A git repo that holds LETTA_HOME: our attributes, ignore rules and merge-driver config.

- ``.gitattributes``: our JSON files → ``merge=subconscious`` (versioned, so every clone gets it);
- ``.gitignore``: temp files, set-aside files and other engines' leftovers;
- ``git config merge.subconscious.driver`` in the clone: NOT versioned, so it must be set in every
  clone (``subconscious doctor`` reports a clone without it).

The rules live in a managed block between marker lines; running the setup again rewrites only that
block, and only when it changed (idempotent). Rule text is pure (:func:`attributes_rules`,
:func:`ignore_rules`); the sync/ templates hold the same rules for the usual ``.letta/claude`` layout.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

DRIVER = "subconscious"
DRIVER_NAME = "subconscious JSON state merge"
BEGIN = "# >>> subconscious (managed by `subconscious sync setup-git`; edit outside this block) >>>"
END = "# <<< subconscious <<<"
GENERIC = "**/.letta/claude"  # the pattern prefix when the state dir's place in the repo is not known


class GitSetupError(RuntimeError):
    """Not a git worktree, git missing, or git refused."""


# --------------------------------------------------------------------------- pure rule text


def glob_escape(rel: str) -> str:
    """A path as a literal gitignore/gitattributes pattern: glob characters escaped, spaces as
    ``[[:space:]]`` (gitattributes splits a line on whitespace)."""
    out = []
    for ch in rel:
        if ch in "*?[\\":
            out.append("\\" + ch)
        elif ch == " ":
            out.append("[[:space:]]")
        else:
            out.append(ch)
    return "".join(out)


def prefix_for(rel: str | None) -> str:
    """Pattern prefix for the state dir at ``rel`` (posix, relative to the repo root; '' = the root)."""
    if rel is None:
        return GENERIC + "/"
    return "/" + (glob_escape(rel) + "/" if rel else "")


def attributes_rules(rel: str | None) -> list[str]:
    p = prefix_for(rel)
    return [
        f"{p}conversations.json merge={DRIVER} text eol=lf",
        f"{p}session-*.json merge={DRIVER} text eol=lf",
        f"{p}hosts/*.json merge={DRIVER} text eol=lf",
    ]


def ignore_rules(rel: str | None) -> list[str]:
    p = prefix_for(rel)
    return [
        ".subconscious-tmp-*",
        f"{p}quarantine/",
        f"{p}backups/",
        f"{p}**/*.lock",
        ".syncthing.*.tmp",
        "~syncthing~*.tmp",
        ".unison.*.unison.tmp",
        f"{p}**/*.sync-conflict-*",
    ]


def block(rules: list[str]) -> str:
    return "\n".join([BEGIN, *rules, END]) + "\n"


def with_block(text: str, rules: list[str]) -> str:
    """``text`` with our managed block set to ``rules`` (replaced in place, or appended)."""
    new = block(rules)
    lines = text.splitlines(keepends=True)
    starts = [i for i, ln in enumerate(lines) if ln.rstrip("\r\n") == BEGIN]
    if starts:
        i = starts[0]
        ends = [j for j in range(i + 1, len(lines)) if lines[j].rstrip("\r\n") == END]
        j = ends[0] if ends else len(lines) - 1
        return "".join(lines[:i]) + new + "".join(lines[j + 1 :])
    if text and not text.endswith("\n"):
        text += "\n"
    return text + ("\n" if text.strip() else "") + new


def driver_command(executable: str | None = None) -> str:
    """The command git should run: this installation's ``subconscious`` (an absolute path, so a git
    started without the venv on PATH still finds it), else this Python with ``-m subconscious``."""
    exe = executable or shutil.which("subconscious")
    base = shlex.quote(exe) if exe else f"{shlex.quote(sys.executable)} -m subconscious"
    return f"{base} merge-driver %O %A %B %P"


# --------------------------------------------------------------------------- git


def git(args: list[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    exe = shutil.which("git")
    if exe is None:
        raise GitSetupError("git is not installed")
    r = subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if check and r.returncode != 0:
        raise GitSetupError(f"git {' '.join(args)} failed in {cwd}: {(r.stderr or r.stdout).strip()}")
    return r


def existing_ancestor(path: Path) -> Path:
    path = Path(path).absolute()
    while not path.is_dir() and path != path.parent:
        path = path.parent
    return path


def worktree_of(path: Path) -> Path | None:
    """The top of the git worktree holding ``path`` (or its nearest existing parent), or None."""
    if shutil.which("git") is None:
        return None
    start = existing_ancestor(path)
    r = git(["rev-parse", "--show-toplevel"], start, check=False)
    if r.returncode != 0 or not r.stdout.strip():
        return None
    return Path(r.stdout.strip())


def rel_in(top: Path, state_home: Path) -> str | None:
    """The state dir relative to the worktree (posix), or None when it lies outside."""
    try:
        rel = Path(os.path.realpath(state_home)).relative_to(os.path.realpath(top))
    except ValueError:
        return None
    return "" if str(rel) == "." else rel.as_posix()


def configured_driver(top: Path) -> str | None:
    r = git(["config", "--get", f"merge.{DRIVER}.driver"], top, check=False)
    return r.stdout.strip() or None


def driver_works(command: str) -> bool:
    """Does the first word of the configured command name something that can run?"""
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    if not words or "merge-driver" not in words:
        return False
    exe = words[0]
    return bool(shutil.which(exe)) if "/" not in exe else os.access(exe, os.X_OK)


def merge_attr(top: Path, relpath: str) -> str:
    r = git(["check-attr", "merge", "--", relpath], top, check=False)
    return r.stdout.strip().rsplit(": ", 1)[-1] if r.returncode == 0 else "unspecified"


def sample_paths(rel: str | None) -> list[str]:
    base = (rel + "/") if rel else ""
    return [f"{base}conversations.json", f"{base}session-x.json", f"{base}hosts/x.json"]


# --------------------------------------------------------------------------- setup


@dataclass(frozen=True)
class Change:
    what: str  # ".gitattributes" | ".gitignore" | "merge.subconscious.driver" | "merge.subconscious.name"
    detail: str


def _write_keeping_mode(path: Path, text: str) -> None:
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    tmp = path.with_name(f".subconscious-tmp-{path.name}-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _update_file(path: Path, rules: list[str]) -> bool:
    from ..state.fs import REAL

    got = REAL.read(path, 8 << 20)  # never follows a link (a write would replace it) nor opens a FIFO
    if got.status == "missing":
        old = ""
    elif not got.ok:
        raise GitSetupError(f"{path}: {got.detail}; not changed (add the rules yourself: docs/sync-engines.md)")
    else:
        try:
            old = got.data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")  # as text mode reads
        except UnicodeDecodeError as exc:
            raise GitSetupError(f"{path} is not UTF-8 text; not changed") from exc
    new = with_block(old, rules)
    if new == old:
        return False
    _write_keeping_mode(path, new)
    return True


def setup_config(top: Path, command: str | None = None) -> list[Change]:
    """Set the driver config in this clone (only what differs)."""
    changes = []
    wanted = {f"merge.{DRIVER}.name": DRIVER_NAME, f"merge.{DRIVER}.driver": command or driver_command()}
    for key, value in wanted.items():
        have = git(["config", "--get", key], top, check=False).stdout.rstrip("\n")
        if have != value:
            git(["config", key, value], top)
            changes.append(Change(key, value))
    return changes


def setup_files(top: Path, rel: str | None) -> list[Change]:
    changes = []
    if _update_file(top / ".gitattributes", attributes_rules(rel)):
        changes.append(Change(".gitattributes", f"our files under {prefix_for(rel)} merge={DRIVER}"))
    if _update_file(top / ".gitignore", ignore_rules(rel)):
        changes.append(Change(".gitignore", "temp, set-aside and other engines' files"))
    return changes


def setup(repo: Path, state_home: Path, command: str | None = None) -> tuple[Path, str | None, list[Change]]:
    """Everything ``subconscious sync setup-git`` does; returns (worktree top, rel, changes)."""
    top = worktree_of(repo)
    if top is None:
        raise GitSetupError(f"{repo} is not inside a git worktree")
    rel = rel_in(top, state_home)
    return top, rel, setup_files(top, rel) + setup_config(top, command)
