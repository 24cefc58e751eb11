"""Confinement: the tools see the session's project directory and nothing else.

- A path (relative to the project, or absolute inside it) is checked twice: lexically (``..`` may not
  climb out) and after resolving symbolic links (a link may not lead out).
- ``.git`` internals, files that look like credentials by their name (``SECRET_NAMES``) and whatever the
  user's ignore rules exclude (see ignore.py) are refused or skipped.
- Files are opened component by component with ``O_NOFOLLOW`` from the project directory, so a link
  swapped in after the check is refused too; only regular files are read (no FIFOs or devices).
- Searches do not follow links to directories; a linked file is searched only if it points at a visible
  file inside the project.
"""
from __future__ import annotations

import fnmatch
import os
import stat
import time
from dataclasses import dataclass
from typing import Iterator, Mapping

from .ignore import RuleSet, global_excludes_path, load_rules_file

__all__ = ["Refused", "ToolError", "ToolTimeout", "Root", "Target", "SECRET_NAMES", "SECRET_DIRS", "is_secret_name", "within"]

# file names never shown (credentials by convention); *.example / *.sample / *.template env files are fine
SECRET_NAMES = (".env", ".env.*", "*.pem", "*.key", "*.p12", "*.pfx", "*.jks", "*.keystore", "*.kdbx",
                "id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", "id_rsa.*", "id_ecdsa.*", "id_ed25519.*",
                ".netrc", "_netrc", ".npmrc", ".pypirc", ".git-credentials", ".pgpass", "credentials", "credentials.json",
                "*.tfstate", "*.tfstate.*")
SECRET_DIRS = frozenset({".ssh", ".gnupg", ".aws", ".kube", ".password-store"})  # never entered
_SECRET_OK = (".env.example", ".env.sample", ".env.template", ".env.dist", "*.pub")
_HAS_DIR_FD = os.open in os.supports_dir_fd and hasattr(os, "O_NOFOLLOW")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class ToolError(Exception):
    """A tool could not do what was asked; the message is what the agent is told."""


class Refused(ToolError):
    """The path is outside what the tools may see."""


class ToolTimeout(ToolError):
    """The call ran out of time."""


def is_secret_name(name: str) -> bool:
    if any(fnmatch.fnmatchcase(name, ok) for ok in _SECRET_OK):
        return False
    return any(fnmatch.fnmatchcase(name, pat) for pat in SECRET_NAMES)


def within(path: str, base: str) -> bool:
    """Is the normalised absolute ``path`` ``base`` or below it?"""
    if path == base:
        return True
    prefix = base if base.endswith(os.sep) else base + os.sep
    return path.startswith(prefix)


@dataclass(frozen=True)
class Target:
    real: str        # absolute path, links resolved
    rel: str         # relative to the project, '/'-separated ("" = the project itself)
    exists: bool
    is_dir: bool

    @property
    def shown(self) -> str:
        return self.rel or "."


class Root:
    """The project directory of a session, with its ignore rules."""

    def __init__(self, cwd: str, env: Mapping[str, str] | None = None):
        env = os.environ if env is None else env
        self.given = os.path.abspath(cwd)
        self.path = os.path.realpath(cwd)
        if not os.path.isdir(self.path):
            raise ToolError(f"the session's project directory {cwd!r} does not exist on this machine")
        home = env.get("HOME") or os.path.expanduser("~")
        if self.path == os.path.dirname(self.path) or (home and self.path == os.path.realpath(home)):
            raise ToolError(f"the session runs in {self.given}, the home or root directory, not a project: "
                            "the tools work only inside a project directory")
        outer = []
        g = global_excludes_path(env)
        if g:
            outer.extend(load_rules_file(g))
        outer.extend(load_rules_file(os.path.join(self.path, ".git", "info", "exclude")))
        self.rules = RuleSet(outer, loader=self._load_dir_rules)

    def _load_dir_rules(self, d: str):
        path = os.path.join(self.path, *d.split("/"), ".gitignore") if d else os.path.join(self.path, ".gitignore")
        try:
            st = os.lstat(path)
        except OSError:
            return ()
        if not stat.S_ISREG(st.st_mode):  # a linked .gitignore is not followed
            return ()
        return load_rules_file(path, d)

    # ------------------------------------------------------------------ paths

    def rel_of(self, real: str) -> str | None:
        """Project-relative '/'-path of an absolute resolved path (None if outside)."""
        if not within(real, self.path):
            return None
        rel = os.path.relpath(real, self.path)
        return "" if rel == "." else rel.replace(os.sep, "/")

    def why_hidden(self, rel: str, is_dir: bool) -> str | None:
        """Why ``rel`` may not be shown (None: it may)."""
        if not rel:
            return None
        parts = rel.split("/")
        if ".git" in parts:
            return "files inside .git are not shown"
        if SECRET_DIRS.intersection(parts):
            return "directories that hold credentials (%s) are never shown" % ", ".join(sorted(SECRET_DIRS & set(parts)))
        if not is_dir and is_secret_name(parts[-1]):
            return "files named like credentials (%s) are never shown" % parts[-1]
        if self.rules.ignored(rel, is_dir):
            return "excluded by the project's ignore rules (.gitignore)"
        return None

    def resolve(self, raw, *, what: str = "path", default: str | None = None) -> Target:
        """Check a path the agent gave; raises Refused with the reason."""
        if raw is None or raw == "":
            if default is None:
                raise ToolError(f"{what} is required")
            raw = default
        if not isinstance(raw, str):
            raise ToolError(f"{what} must be a string")
        if "\x00" in raw or len(raw) > 4096:
            raise Refused(f"{what} is not a usable path")
        joined = os.path.normpath(os.path.join(self.path, os.path.expanduser(raw) if raw.startswith("~/") else raw))
        if self.given != self.path and within(joined, self.given):
            joined = os.path.normpath(os.path.join(self.path, os.path.relpath(joined, self.given)))
        if not within(joined, self.path):
            raise Refused(f"{raw!r} is outside the project directory {self.given}; the tools see only that")
        real = os.path.realpath(joined)
        rel = self.rel_of(real)
        if rel is None:
            raise Refused(f"{raw!r} leads outside the project directory through a symbolic link")
        exists = os.path.exists(real)
        is_dir = exists and os.path.isdir(real)
        reason = self.why_hidden(rel, is_dir)
        if reason:
            raise Refused(f"{raw!r}: {reason}")
        return Target(real, rel, exists, is_dir)

    # ------------------------------------------------------------------ opening

    def _open_parent(self, rel: str) -> tuple[int, str]:
        """(fd of the directory holding ``rel``, last component), walking down without following links."""
        parts = rel.split("/")
        fd = os.open(self.path, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
        try:
            for part in parts[:-1]:
                nxt = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
                os.close(fd)
                fd = nxt
        except OSError:
            os.close(fd)
            raise Refused(f"{rel!r} changed while it was being opened (a link appeared); not read") from None
        return fd, parts[-1]

    def open_file(self, target: Target) -> int:
        """A read-only fd of a regular file; raises Refused for anything else."""
        if not target.rel:
            raise ToolError("the project directory is not a file")
        if _HAS_DIR_FD:
            dfd, name = self._open_parent(target.rel)
            try:
                fd = os.open(name, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC, dir_fd=dfd)
            except OSError as e:
                raise ToolError(f"{target.rel}: cannot open ({e.strerror})") from None
            finally:
                os.close(dfd)
        else:  # no dir_fd (Windows): open, then check that it is still the resolved file
            try:
                fd = os.open(target.real, os.O_RDONLY | getattr(os, "O_BINARY", 0))
            except OSError as e:
                raise ToolError(f"{target.rel}: cannot open ({e.strerror})") from None
            if os.path.realpath(target.real) != target.real:
                os.close(fd)
                raise Refused(f"{target.rel!r} changed while it was being opened; not read")
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise Refused(f"{target.rel}: not a regular file")
        if _NONBLOCK and _HAS_DIR_FD:
            os.set_blocking(fd, True)
        return fd

    def open_walked(self, abspath: str) -> int:
        """A read-only fd of a file :meth:`walk` yielded (links already resolved): regular files only."""
        fd = os.open(abspath, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC | getattr(os, "O_BINARY", 0))
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise Refused("not a regular file")
        if _NONBLOCK:
            os.set_blocking(fd, True)
        return fd

    # ------------------------------------------------------------------ walking

    def walk(self, start: Target, *, deadline: float, max_entries: int, stats: dict) -> Iterator[tuple[str, str, os.stat_result]]:
        """Visible regular files below ``start`` as (rel, absolute path, stat), in name order.

        ``stats`` gets ``entries`` (looked at) and ``stopped`` ("time" | "entries") if the walk was cut short.
        """
        stats.setdefault("entries", 0)
        if not start.is_dir:
            yield start.rel, start.real, os.stat(start.real)
            return
        stack = [start.rel]
        while stack:
            d = stack.pop()
            absd = os.path.join(self.path, *d.split("/")) if d else self.path
            try:
                with os.scandir(absd) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError:
                continue
            subdirs = []
            for e in entries:
                stats["entries"] += 1
                if stats["entries"] > max_entries:
                    stats["stopped"] = "entries"
                    return
                if time.monotonic() > deadline:
                    stats["stopped"] = "time"
                    return
                if e.name == ".git":
                    continue
                rel = f"{d}/{e.name}" if d else e.name
                try:
                    if e.is_symlink():
                        real = os.path.realpath(e.path)
                        trel = self.rel_of(real)
                        if trel is None or not os.path.isfile(real) or self.why_hidden(trel, False):
                            continue  # outside, a directory (not followed), or a hidden file
                        if self.why_hidden(rel, False):
                            continue
                        yield rel, real, os.stat(real)
                        continue
                    if e.is_dir(follow_symlinks=False):
                        if e.name not in SECRET_DIRS and not self.rules.ignored_here(rel, True):
                            subdirs.append(rel)
                        continue
                    if not e.is_file(follow_symlinks=False):
                        continue  # FIFOs, sockets, devices
                    if is_secret_name(e.name) or self.rules.ignored_here(rel, False):
                        continue
                    yield rel, e.path, e.stat(follow_symlinks=False)
                except OSError:
                    continue
            stack.extend(reversed(subdirs))
