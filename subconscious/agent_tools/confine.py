"""Confinement: the tools see the session's project directory and nothing else.

- The project directory is fixed once per session (:func:`project_root`: Claude Code's project directory at
  SessionStart, widened to the git working tree above it) and refused when it is too wide to be a project
  (:func:`root_refusal`: ``/``, the home directory or a directory above it, a temp root, a config directory).
- A path (relative to the project, or absolute inside it) is checked twice: lexically (``..`` may not
  climb out) and after resolving symbolic links (a link may not lead out).
- ``.git`` internals, files that look like credentials by their name (names.py, case-insensitive) and
  whatever the user's ignore rules exclude (ignore.py, read from the repository's top down) are refused or
  skipped.
- Files are opened component by component with ``O_NOFOLLOW`` from the project directory, so a link
  swapped in after the check is refused too; only regular files are read (no FIFOs or devices).
- Searches walk by directory file descriptors: each directory is opened relative to its parent's fd with
  ``O_NOFOLLOW | O_DIRECTORY``, listed through that fd, and its files are opened relative to it; a
  directory swapped for a link while the walk runs is not entered. Links to directories are not followed;
  a linked file is searched only if it points at a visible file inside the project.
"""
from __future__ import annotations

import os
import stat
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Iterator, Mapping

from .ignore import MAX_RULES_FILE_BYTES, RuleSet, global_excludes_path, load_rules_file, parse_lines
from .names import SECRET_DIRS, SECRET_NAMES, hidden_part, is_git_name, is_secret_dir, is_secret_name

__all__ = ["Refused", "ToolError", "ToolTimeout", "Root", "Target", "SECRET_NAMES", "SECRET_DIRS", "is_secret_name",
           "within", "project_root", "root_refusal", "git_toplevel", "hooks_dir"]

_HAS_DIR_FD = os.open in os.supports_dir_fd and hasattr(os, "O_NOFOLLOW") and os.scandir in os.supports_fd
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _NONBLOCK | _CLOEXEC
_FILE_FLAGS = os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC | getattr(os, "O_BINARY", 0)
# filesystems that ignore case (and, on Windows, trailing dots and spaces): ignore rules match that way too
LENIENT_NAMES = sys.platform in ("darwin", "win32")
MAX_DEPTH = 256  # directories deeper than this below the walk's start are not entered


class ToolError(Exception):
    """A tool could not do what was asked; the message is what the agent is told."""


class Refused(ToolError):
    """The path is outside what the tools may see."""


class ToolTimeout(ToolError):
    """The call ran out of time."""


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


# ---------------------------------------------------------------------- the project directory

def _key(path: str) -> str:
    """A path as compared for refusals (case-insensitively everywhere: refusing one more is harmless)."""
    return os.path.normcase(path).rstrip(os.sep).casefold() or os.sep


def _below_or_same(path: str, base: str) -> bool:
    p, b = _key(path), _key(base)
    return p == b or p.startswith(b if b.endswith(os.sep) else b + os.sep)


def git_toplevel(path: str) -> str | None:
    """The nearest directory at or above ``path`` holding ``.git`` (a directory, or a file for worktrees and
    submodules), as git finds its working tree; None outside any repository."""
    d = os.path.realpath(path)
    while True:
        if os.path.lexists(os.path.join(d, ".git")):
            return d
        up = os.path.dirname(d)
        if up == d:
            return None
        d = up


def _home(env: Mapping[str, str]) -> str | None:
    home = env.get("HOME") or env.get("USERPROFILE") or os.path.expanduser("~")
    return os.path.realpath(home) if home and home != "~" else None


def _temp_roots(env: Mapping[str, str]) -> list[str]:
    roots = ["/tmp", "/var/tmp", "/private/tmp", "/private/var/tmp", "/dev/shm", tempfile.gettempdir()]
    roots += [env[k] for k in ("TMPDIR", "TEMP", "TMP") if env.get(k)]
    return [os.path.realpath(r) for r in roots]


def _config_dirs(home: str | None, env: Mapping[str, str]) -> list[str]:
    dirs = [env[k] for k in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME",
                             "APPDATA", "LOCALAPPDATA") if env.get(k)]
    if home:
        dirs += [os.path.join(home, d) for d in (".config", ".local", ".cache", "Library", "AppData", ".claude",
                                                 ".ssh", ".gnupg", ".aws", ".kube", ".docker", ".azure")]
    return [os.path.realpath(d) for d in dirs]


# the operating system's own directories: never a project, nor anything below them (root with /etc as its
# project read /etc/shadow) — except the few below which people do keep projects (SYSTEM_PROJECT_PARENTS)
SYSTEM_DIRS = ("/etc", "/proc", "/sys", "/dev", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
               "/boot", "/var", "/run", "/root", "/snap", "/lost+found", "/System", "/Library", "/private",
               "/Applications", "/cores")
# refused themselves, projects below them accepted (Docker's WORKDIR /usr/src/app, /var/www/site, /opt/app)
SYSTEM_PROJECT_PARENTS = ("/usr/src", "/usr/local/src", "/var/www", "/opt", "/srv", "/home", "/Users", "/mnt",
                          "/media", "/Volumes")


def _system_refusal(real: str, home: str | None, env: Mapping[str, str]) -> str | None:
    if home and _below_or_same(real, home) and _key(real) != _key(home):
        return None  # inside the user's own home (root's is /root): an ordinary project
    if any(_below_or_same(real, t) and _key(real) != _key(t) for t in _temp_roots(env)):
        return None  # a scratch project below the temp dir (macOS keeps it in /private/var/folders)
    for p in SYSTEM_PROJECT_PARENTS:
        if _key(real) == _key(p):
            return "a directory that holds projects (or homes), not one project"
        if _below_or_same(real, p):
            return None
    for d in SYSTEM_DIRS:
        if _below_or_same(real, d) or _below_or_same(real, os.path.realpath(d)):
            return f"the system directory {d} or one inside it (other programs' files, configuration and secrets)"
    return None


def root_refusal(path: str, env: Mapping[str, str] | None = None) -> str | None:
    """Why the directory ``path`` is too wide (or too private) to be a project the tools may see; None if
    it may be one. Refused: ``/`` (or a drive root), the system directories and what is below them
    (``SYSTEM_DIRS``: /etc, /proc, /usr…, /root unless it is the user's home), the home directory and every
    directory above it, a
    temp root (``/tmp``, ``/var/tmp``, the temp dir), a config directory (``~/.config``, ``~/.local``,
    ``~/Library``, ``%APPDATA%``…) and, unless it is a git working tree of its own (a dotfiles repo such as
    ``~/.config/nvim``, a CI checkout holding its TMPDIR), any directory inside a config directory or above
    a temp root or config directory."""
    env = os.environ if env is None else env
    real = os.path.realpath(path)
    shown = os.path.abspath(path)
    if real == os.path.dirname(real):
        return f"the session's project directory is {shown}, the root of the filesystem, not a project"
    home = _home(env)
    if home and _below_or_same(home, real):
        what = "your home directory" if _key(home) == _key(real) else "a directory above your home directory"
        return f"the session's project directory is {shown}, {what}, not a project"
    system = _system_refusal(real, home, env)
    if system:
        return f"the session's project directory is {shown}: {system}"
    is_repo = os.path.lexists(os.path.join(real, ".git"))  # a working tree of its own
    for t in _temp_roots(env):
        if _key(t) == _key(real) or (_below_or_same(t, real) and not is_repo):
            return f"the session's project directory is {shown}, a temporary-files directory shared by every program"
    for c in _config_dirs(home, env):
        if _key(c) == _key(real) or (_below_or_same(c, real) != _below_or_same(real, c) and not is_repo):
            return (f"the session's project directory is {shown}, the configuration directory {c} or one in or "
                    "above it (it holds other programs' settings and credentials)")
    return None


def project_root(start: str, env: Mapping[str, str] | None = None) -> str:
    """The one project directory of a session that starts in ``start`` (Claude Code's project directory):
    the git working tree above it if there is one the tools may see, else ``start`` itself."""
    real = os.path.realpath(start)
    top = git_toplevel(real)
    if top and top != real and root_refusal(top, env) is None:
        return top
    return real


def _open_below(base: str, parts: list[str]) -> int:
    """fd of the directory ``base``/``parts``…, each component opened from its parent's fd without following
    links (raises OSError if one is a link, is missing, or is not a directory)."""
    fd = os.open(base, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    try:
        for part in parts:
            nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_rules_at(dfd: int, base: str, icase: bool):
    """The patterns of the ``.gitignore`` in the directory ``dfd`` (not followed if it is a link)."""
    try:
        fd = os.open(".gitignore", _FILE_FLAGS, dir_fd=dfd)
    except OSError:
        return ()
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ()
        os.set_blocking(fd, True)
        chunks, left = [], MAX_RULES_FILE_BYTES
        while left > 0:
            b = os.read(fd, min(left, 65536))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
    finally:
        os.close(fd)
    return parse_lines(b"".join(chunks).decode("utf-8", errors="replace").split("\n"), base, ignore_case=icase)


def hooks_dir(repo: str) -> str | None:
    """The directory the repository at ``repo`` runs its hooks from when its config sets ``core.hooksPath``
    (resolved; relative paths are relative to the working tree, as git runs hooks there); None if unset."""
    import re

    cfg = os.path.join(os.path.dirname(_info_exclude(repo)), "..", "config")
    try:
        with open(cfg, "rb") as fh:
            text = fh.read(MAX_RULES_FILE_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None
    section, found = "", None
    for line in text.splitlines():
        line = line.strip()
        m = re.match(r"\[\s*([A-Za-z0-9.-]+)", line)
        if m:
            section = m.group(1).lower()
            line = line[line.find("]") + 1:].strip()
        m = re.match(r"(?i)hookspath\s*=\s*(.*)$", line)
        if section == "core" and m:
            found = m.group(1).split(" #")[0].split(" ;")[0].strip().strip('"')
    if not found:
        return None
    return os.path.realpath(os.path.join(repo, os.path.expanduser(found)))


def _info_exclude(repo: str) -> str:
    """``info/exclude`` of the repository whose working tree is ``repo`` (``.git`` may be a gitdir file)."""
    dotgit = os.path.join(repo, ".git")
    if os.path.isfile(dotgit):
        try:
            with open(dotgit, encoding="utf-8", errors="replace") as fh:
                line = fh.read(4096).strip()
            if line.startswith("gitdir:"):
                gitdir = os.path.join(repo, line[len("gitdir:"):].strip())
                common = os.path.join(gitdir, "commondir")
                if os.path.isfile(common):
                    with open(common, encoding="utf-8", errors="replace") as fh:
                        gitdir = os.path.join(gitdir, fh.read(4096).strip())
                return os.path.join(gitdir, "info", "exclude")
        except OSError:
            pass
    return os.path.join(dotgit, "info", "exclude")


class _Dir:
    """A directory fd of a walk, valid while the walk is inside it."""
    __slots__ = ("fd", "open")

    def __init__(self, fd: int):
        self.fd, self.open = fd, True


@dataclass(frozen=True)
class Walked:
    """A regular file a walk found: its name in a directory the walk holds open."""
    dir: _Dir
    name: str


class Root:
    """The project directory of a session, with its ignore rules.

    ``path`` is what the tools see; ``repo`` is the git working tree it is in (``path`` itself, or the
    directory above it whose ``.git`` git would use): ignore rules are read from ``repo`` down, so a
    ``.gitignore`` above ``path`` applies too. Raises ToolError when ``path`` may not be a project
    (:func:`root_refusal`) or the repository's rules exclude it entirely.
    """

    def __init__(self, cwd: str, env: Mapping[str, str] | None = None, *, lenient: bool = LENIENT_NAMES):
        env = os.environ if env is None else env
        self.given = os.path.abspath(cwd)
        self.path = os.path.realpath(cwd)
        if not os.path.isdir(self.path):
            raise ToolError(f"the session's project directory {cwd!r} does not exist on this machine")
        why = root_refusal(self.path, env)
        if why:
            raise ToolError(why + ": the tools work only inside a project directory")
        self.lenient = lenient
        self.repo = git_toplevel(self.path) or self.path
        rel = os.path.relpath(self.path, self.repo)
        self.prefix = "" if rel == "." else rel.replace(os.sep, "/")
        outer = []
        g = global_excludes_path(env)
        if g:
            outer.extend(load_rules_file(g, ignore_case=lenient))
        outer.extend(load_rules_file(_info_exclude(self.repo), ignore_case=lenient))
        self.rules = RuleSet(outer, loader=self._load_dir_rules)
        if self.prefix and self.rules.ignored(self.prefix, True):
            raise ToolError(f"the session's project directory {self.given} is excluded by the ignore rules of "
                            f"the repository at {self.repo}: the tools show nothing the ignore rules exclude")

    def _load_dir_rules(self, d: str):
        """Patterns of the .gitignore of ``d`` (relative to the repository), reached without following links."""
        try:
            fd = _open_below(self.repo, d.split("/") if d else [])
        except OSError:
            return ()
        try:
            return _read_rules_at(fd, d, self.lenient)
        finally:
            os.close(fd)

    # ------------------------------------------------------------------ paths

    def rel_of(self, real: str) -> str | None:
        """Project-relative '/'-path of an absolute resolved path (None if outside)."""
        if not within(real, self.path):
            return None
        rel = os.path.relpath(real, self.path)
        return "" if rel == "." else rel.replace(os.sep, "/")

    def _repo_rel(self, rel: str) -> str:
        """``rel`` (project-relative) as the ignore rules see it: relative to the repository."""
        if self.lenient:  # Windows opens "a. " as "a": match the rules against what is opened
            rel = "/".join(p.rstrip(". ") or p for p in rel.split("/"))
        return f"{self.prefix}/{rel}" if self.prefix else rel

    def ignored(self, rel: str, is_dir: bool, *, parents_checked: bool = False) -> bool:
        rr = self._repo_rel(rel)
        return self.rules.ignored_here(rr, is_dir) if parents_checked else self.rules.ignored(rr, is_dir)

    def why_hidden(self, rel: str, is_dir: bool) -> str | None:
        """Why ``rel`` may not be shown (None: it may)."""
        if not rel:
            return None
        parts = rel.split("/")
        for k, part in enumerate(parts):
            reason = hidden_part(part, is_dir=is_dir or k < len(parts) - 1)
            if reason:
                return reason
        if self.ignored(rel, is_dir):
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
        try:
            return _open_below(self.path, parts[:-1]), parts[-1]
        except OSError:
            raise Refused(f"{rel!r} changed while it was being opened (a link appeared); not read") from None

    def _open_dir(self, rel: str) -> int:
        try:
            return _open_below(self.path, rel.split("/") if rel else [])
        except OSError:
            raise Refused(f"{rel or '.'!r} changed while it was being opened (a link appeared); not searched") from None

    @staticmethod
    def _regular(fd: int, rel: str) -> int:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise Refused(f"{rel}: not a regular file")
        if _NONBLOCK and _HAS_DIR_FD:
            os.set_blocking(fd, True)
        return fd

    def open_file(self, target: Target) -> int:
        """A read-only fd of a regular file; raises Refused for anything else."""
        if not target.rel:
            raise ToolError("the project directory is not a file")
        if _HAS_DIR_FD:
            dfd, name = self._open_parent(target.rel)
            try:
                fd = os.open(name, _FILE_FLAGS, dir_fd=dfd)
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
        return self._regular(fd, target.rel)

    def open_walked(self, item: "Walked | Target") -> int:
        """A read-only fd of a file :meth:`walk` yielded: opened relative to the directory fd the walk
        holds (never by path), without following a link; regular files only."""
        if isinstance(item, Target):
            return self.open_file(item)
        if not item.dir.open:
            raise Refused(f"{item.name}: the walk has left its directory; not read")
        fd = os.open(item.name, _FILE_FLAGS, dir_fd=item.dir.fd)
        return self._regular(fd, item.name)

    # ------------------------------------------------------------------ walking

    def walk(self, start: Target, *, deadline: float, max_entries: int,
             stats: dict) -> Iterator[tuple[str, "Walked | Target", os.stat_result]]:
        """Visible regular files below ``start`` as (rel, handle for :meth:`open_walked`, stat), in name
        order. A handle is valid only until the walk goes on (open it before asking for the next file).

        ``stats`` gets ``entries`` (looked at) and ``stopped`` ("time" | "entries") if the walk was cut short.
        """
        stats.setdefault("entries", 0)
        if not start.is_dir:
            yield start.rel, start, os.stat(start.real)
            return
        if not _HAS_DIR_FD:
            yield from self._walk_paths(start, deadline, max_entries, stats)
            return
        fd = self._open_dir(start.rel)
        try:
            yield from self._walk_fd(fd, start.rel, 0, deadline, max_entries, stats)
        finally:
            os.close(fd)

    def _entry_limits(self, stats: dict, deadline: float, max_entries: int) -> bool:
        stats["entries"] += 1
        if stats["entries"] > max_entries:
            stats["stopped"] = "entries"
        elif time.monotonic() > deadline:
            stats["stopped"] = "time"
        return "stopped" in stats

    def _linked_file(self, link_rel: str, link_path: str) -> Target | None:
        """A link the walk met, as the visible project file it points at (None: outside, a directory, or
        hidden). Opened later component by component from the project, so a swap cannot lead out."""
        real = os.path.realpath(link_path)
        trel = self.rel_of(real)
        if not trel or not os.path.isfile(real) or self.why_hidden(trel, False) or self.why_hidden(link_rel, False):
            return None
        return Target(real, trel, True, False)

    def _walk_fd(self, dfd: int, d: str, depth: int, deadline: float, max_entries: int, stats: dict):
        rr = self._repo_rel(d) if d else self.prefix
        if rr not in self.rules.by_dir:  # this directory's .gitignore, read through the fd being walked
            self.rules.by_dir[rr] = _read_rules_at(dfd, rr, self.lenient)
        try:
            with os.scandir(dfd) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            return
        here = _Dir(dfd)
        subdirs = []
        try:
            for e in entries:
                if self._entry_limits(stats, deadline, max_entries):
                    return
                name = e.name
                if hidden_part(name, is_dir=True):
                    continue
                rel = f"{d}/{name}" if d else name
                try:
                    if e.is_symlink():
                        t = self._linked_file(rel, os.path.join(self.path, *rel.split("/")))
                        if t is not None:
                            yield rel, t, os.stat(t.real)
                    elif e.is_dir(follow_symlinks=False):
                        if not self.ignored(rel, True, parents_checked=True):
                            subdirs.append((name, rel))
                    elif e.is_file(follow_symlinks=False):  # not FIFOs, sockets, devices
                        if not is_secret_name(name) and not self.ignored(rel, False, parents_checked=True):
                            yield rel, Walked(here, name), e.stat(follow_symlinks=False)
                except OSError:
                    continue
        finally:
            here.open = False
        if depth >= MAX_DEPTH:
            return
        for name, rel in subdirs:
            try:  # a directory swapped for a link since it was listed is not entered
                sub = os.open(name, _DIR_FLAGS, dir_fd=dfd)
            except OSError:
                continue
            try:
                yield from self._walk_fd(sub, rel, depth + 1, deadline, max_entries, stats)
            finally:
                os.close(sub)
            if "stopped" in stats:
                return

    def _walk_paths(self, start: Target, deadline: float, max_entries: int, stats: dict):
        """The walk where there are no directory fds (Windows): by path, each file checked again when opened."""
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
                if self._entry_limits(stats, deadline, max_entries):
                    return
                if hidden_part(e.name, is_dir=True):
                    continue
                rel = f"{d}/{e.name}" if d else e.name
                try:
                    if e.is_symlink():
                        t = self._linked_file(rel, e.path)
                        if t is not None:
                            yield rel, t, os.stat(t.real)
                    elif e.is_dir(follow_symlinks=False):
                        if not self.ignored(rel, True, parents_checked=True):
                            subdirs.append(rel)
                    elif e.is_file(follow_symlinks=False):
                        if not is_secret_name(e.name) and not self.ignored(rel, False, parents_checked=True):
                            real = os.path.realpath(e.path)
                            if self.rel_of(real) is not None:  # open_file checks it again when opening
                                yield rel, Target(real, rel, True, False), e.stat(follow_symlinks=False)
                except OSError:
                    continue
            stack.extend(reversed(subdirs))
