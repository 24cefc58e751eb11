"""Which project a session belongs to, the same on every machine.

One repository is checked out at different paths on different machines (``~/src/app`` here,
``/Users/me/work/app`` there); the agent should see one project. Its identity does not depend on the path:

1. ``SUBCONSCIOUS_PROJECT`` when set (any text, trimmed);
2. else the repository's remote (``origin``, else the only or first remote), normalised to
   ``host/owner/repo`` — scheme, user, password or token, port and ``.git`` dropped, the host lower-cased —
   so ``git@github.com:Me/App.git`` and ``https://tok@github.com/Me/App`` are both ``github.com/Me/App``;
3. else the name of the repository's root directory (or of the project directory outside git).

With it the branch (``None`` on a detached HEAD or outside git) and the machine's readable name.

:func:`normalize_remote` and :func:`parse_git_config` are pure; :func:`identify` reads at most three small
files under the project's ``.git`` (``HEAD``, ``config``, and for a worktree its ``gitdir``/``commondir``
pointers) — no ``git`` process, nothing run from the repository, nothing written.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Project", "normalize_remote", "parse_git_config", "identify"]

READ_CAP = 256 * 1024  # a .git/config larger than this is not read (the name is used instead)
MAX_ID = 200


@dataclass(frozen=True, slots=True)
class Project:
    id: str  # the identity shared by every machine: "github.com/owner/repo", or a name
    name: str  # short, readable: the repository's name
    source: str  # "env" | "remote" | "directory"
    branch: str | None = None
    machine: str | None = None

    def attrs(self) -> dict[str, str]:
        """The identity as name → value pairs for messages (no empty values)."""
        out = {"id": self.id, "name": self.name}
        if self.branch:
            out["branch"] = self.branch
        if self.machine:
            out["machine"] = self.machine
        return out


_SCP = re.compile(r"^(?:[^@/:\s]+@)?(?P<host>\[[^\]]+\]|[^:/\s]+):(?!//)(?P<path>.*)$")  # git@host:owner/repo
_URL = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<rest>.*)$")
_HELPER = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*::")
_CTRL = re.compile(r"[\x00-\x1f\x7f]")


def _clean_path(path: str) -> str | None:
    path = path.split("?", 1)[0].split("#", 1)[0]
    parts = [p for p in path.replace("\\", "/").split("/") if p and p not in (".", "..")]
    if not parts:
        return None
    last = parts[-1]
    if last.lower().endswith(".git"):
        last = last[:-4]
    parts[-1] = last
    parts = [p for p in parts if p]
    return "/".join(parts) if parts else None


def normalize_remote(url: str) -> str | None:
    """``host/owner/repo`` for a git remote URL, without credentials; None for a local path or an URL with
    no host (a ``file://`` remote, ``../other``), which says nothing shared across machines."""
    if not isinstance(url, str):
        return None
    url = url.strip()
    if not url or _CTRL.search(url):
        return None
    m = _URL.match(url)
    if m:
        scheme = m.group("scheme").lower()
        if scheme == "file":
            return None
        rest = m.group("rest")
        authority, _, path = rest.partition("/")
        host = authority.rpartition("@")[2]  # drop user:password@ (or a token)
        if host.startswith("["):  # [::1]:22
            host = host.split("]", 1)[0] + "]"
        else:
            host = host.split(":", 1)[0]
    else:
        helper = _HELPER.match(url)
        if helper:  # ``helper::address`` (remote helpers): look at the address
            return normalize_remote(url[helper.end():])
        m = _SCP.match(url)
        if not m or len(m.group("host")) == 1 or "\\" in url:  # C:\repo, C:/repo: a Windows path
            return None
        host, path = m.group("host"), m.group("path")
    host = host.lower().rstrip(".")
    if not host:
        return None
    clean = _clean_path(path)
    if clean is None:
        return None
    out = f"{host}/{clean}"
    return out[:MAX_ID]


_SECTION = re.compile(r'^\s*\[\s*([A-Za-z0-9.-]+)(?:\s+"((?:[^"\\]|\\.)*)")?\s*\]\s*(.*)$')
_KEYVAL = re.compile(r"^\s*([A-Za-z][A-Za-z0-9-]*)\s*(?:=\s*(.*?))?\s*$")


def _value(raw: str) -> str:
    """A git config value: quotes removed, escapes read, a comment (``#``/``;`` outside quotes) dropped."""
    out, quoted, i = [], False, 0
    while i < len(raw):
        c = raw[i]
        if c == '"':
            quoted = not quoted
        elif c == "\\" and i + 1 < len(raw):
            i += 1
            out.append({"n": "\n", "t": "\t", "b": "\b"}.get(raw[i], raw[i]))
        elif c in "#;" and not quoted:
            break
        else:
            out.append(c)
        i += 1
    return "".join(out).strip()


def parse_git_config(text: str) -> dict[str, str]:
    """``remote.<name>.url`` values of a git config text (the first of each), in file order."""
    remotes: dict[str, str] = {}
    section = sub = None
    for line in text.splitlines():
        m = _SECTION.match(line)
        if m:
            section, sub = m.group(1).lower(), m.group(2)
            line = m.group(3)
            if not line.strip():
                continue
        if section != "remote" or sub is None:
            continue
        kv = _KEYVAL.match(line)
        if kv and kv.group(1).lower() == "url" and kv.group(2) is not None and sub not in remotes:
            remotes[sub] = _value(kv.group(2))
    return remotes


def _read_small(path: Path) -> str | None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        import stat

        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, READ_CAP + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > READ_CAP:
        return None
    return data.decode("utf-8", "replace")


def _git_dirs(root: Path) -> tuple[Path, Path, Path] | None:
    """(the repository's root, the worktree's git dir, the common dir holding ``config``) of the repository
    at or above ``root``."""
    for d in (root, *root.parents):
        dot = d / ".git"
        if dot.is_dir() and not dot.is_symlink():
            return d, dot, dot
        if dot.is_file():  # a worktree or submodule: "gitdir: <path>"
            text = _read_small(dot) or ""
            if not text.startswith("gitdir:"):
                return None
            gitdir = Path(text[len("gitdir:"):].strip())
            gitdir = gitdir if gitdir.is_absolute() else (d / gitdir)
            common = gitdir
            rel = (_read_small(gitdir / "commondir") or "").strip()
            if rel:
                common = Path(rel) if Path(rel).is_absolute() else gitdir / rel
            return d, gitdir, common
    return None


def _branch(gitdir: Path) -> str | None:
    head = (_read_small(gitdir / "HEAD") or "").strip()
    if head.startswith("ref: refs/heads/"):
        name = head[len("ref: refs/heads/"):]
        return name if name and not _CTRL.search(name) else None
    return None


def identify(project_dir: str | os.PathLike, *, env=os.environ, machine: str | None = None) -> Project:
    """The project of a session whose project directory is ``project_dir``."""
    start = Path(project_dir)
    override = (env.get("SUBCONSCIOUS_PROJECT") or "").strip()
    dirs = _git_dirs(start)
    branch = remote_id = None
    root = start
    if dirs is not None:
        root, gitdir, common = dirs
        branch = _branch(gitdir)
        remotes = parse_git_config(_read_small(common / "config") or "")
        for name in ("origin", *remotes):
            if name in remotes:
                remote_id = normalize_remote(remotes[name])
                if remote_id:
                    break
    if override:
        override = _CTRL.sub("", override)[:MAX_ID]
        return Project(override, override.rstrip("/").rsplit("/", 1)[-1] or override, "env", branch, machine)
    if remote_id:
        return Project(remote_id, remote_id.rsplit("/", 1)[-1], "remote", branch, machine)
    name = root.name or str(root)
    return Project(name, name, "directory", branch, machine)
