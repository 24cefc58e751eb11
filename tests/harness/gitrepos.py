"""Real git repos for multi-host tests: one bare remote, N clones with their own identities.

    world = GitWorld(tmp_path)
    a, b = world.clone("hostA"), world.clone("hostB")     # first clone seeds an empty main
    a.write("conversations.json", "..."); a.commit("a"); a.push()
    r = b.pull()                 # --rebase by default; r.ok, r.output, r.conflicted

Git runs with an empty global config of our own (GIT_CONFIG_GLOBAL) and no system
config, so the developer's ~/.gitconfig (drivers, hooks, signing) never leaks in.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


class GitError(RuntimeError):
    pass


@dataclass(frozen=True)
class GitResult:
    returncode: int
    output: str  # stdout + stderr
    conflicted: tuple[str, ...]  # unmerged paths after the command

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def _require_git() -> str:
    git = shutil.which("git")
    if git is None:
        raise GitError("git is not installed: `apt-get install -y git` (the multi-host tests need it)")
    return git


class GitWorld:
    """A bare remote under ``base/remote.git`` and clones under ``base/<name>``."""

    def __init__(self, base: Path, branch: str = "main"):
        self.git_bin = _require_git()
        self.base = Path(base)
        self.base.mkdir(parents=True, exist_ok=True)
        self.branch = branch
        self.gitconfig = self.base / "gitconfig"
        self.gitconfig.write_text(
            f"[init]\n\tdefaultBranch = {branch}\n[advice]\n\tdetachedHead = false\n"
            "\tskippedCherryPicks = false\n[commit]\n\tgpgsign = false\n[core]\n\tautocrlf = false\n"
        )
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
            "GIT_CONFIG_GLOBAL": str(self.gitconfig),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "LC_ALL": "C",
        }
        self.remote = self.base / "remote.git"
        self.run(["init", "--bare", "-q", "-b", branch, str(self.remote)], cwd=self.base)
        self.clones: dict[str, Clone] = {}

    def run(self, args: list[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
        r = subprocess.run([self.git_bin, *args], cwd=cwd, env=self.env, capture_output=True,
                           text=True, timeout=120)
        if check and r.returncode != 0:
            raise GitError(f"git {' '.join(args)} failed in {cwd} ({r.returncode}):\n{r.stdout}{r.stderr}")
        return r

    def remote_has_commits(self) -> bool:
        return self.run(["rev-parse", "--verify", "-q", f"refs/heads/{self.branch}"],
                        cwd=self.remote, check=False).returncode == 0

    def clone(self, name: str, *, user: str | None = None, email: str | None = None) -> Clone:
        """Clone the remote as ``name`` with its own identity; seeds the remote if empty."""
        path = self.base / name
        if path.exists():
            raise GitError(f"clone {name} exists already")
        self.run(["clone", "-q", str(self.remote), str(path)], cwd=self.base)
        c = Clone(self, name, path)
        c.git("config", "user.name", user or name)
        c.git("config", "user.email", email or f"{name}@example.invalid")
        if not self.remote_has_commits():
            c.git("checkout", "-q", "-B", self.branch)
            c.git("commit", "-q", "--allow-empty", "-m", "initial")
            c.git("push", "-q", "-u", "origin", self.branch)
        self.clones[name] = c
        return c

    def clones_of(self, *names: str) -> list[Clone]:
        return [self.clone(n) for n in names]


class Clone:
    def __init__(self, world: GitWorld, name: str, path: Path):
        self.world, self.name, self.path = world, name, path

    def __repr__(self) -> str:
        return f"Clone({self.name!r}, {str(self.path)!r})"

    def git(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return self.world.run(list(args), cwd=self.path, check=check)

    def _result(self, r: subprocess.CompletedProcess) -> GitResult:
        return GitResult(r.returncode, r.stdout + r.stderr, self.unmerged())

    # -- files ---------------------------------------------------------------

    def file(self, relpath: str) -> Path:
        return self.path / relpath

    def write(self, relpath: str, text: str) -> Path:
        p = self.path / relpath
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        return p

    def read(self, relpath: str) -> str:
        return (self.path / relpath).read_text()

    def has_conflict_markers(self, relpath: str) -> bool:
        lines = self.read(relpath).splitlines()
        return any(ln.startswith("<<<<<<< ") for ln in lines) and any(ln.startswith(">>>>>>> ") for ln in lines)

    # -- history ---------------------------------------------------------------

    def commit(self, message: str, *paths: str) -> str:
        """Stage ``paths`` (everything if none) and commit; returns the new HEAD."""
        self.git("add", "-A", "--", *(paths or (".",)))
        self.git("commit", "-q", "-m", message)
        return self.head()

    def head(self) -> str:
        return self.git("rev-parse", "HEAD").stdout.strip()

    def push(self, check: bool = True) -> GitResult:
        r = self.git("push", "-q", "origin", f"HEAD:{self.world.branch}", check=check)
        return self._result(r)

    def pull(self, rebase: bool = True) -> GitResult:
        """``git pull --rebase`` (or a merge pull); never raises -- inspect the result."""
        mode = "--rebase" if rebase else "--no-rebase"
        r = self.git("pull", "-q", mode, "origin", self.world.branch, check=False)
        return self._result(r)

    def unmerged(self) -> tuple[str, ...]:
        r = self.git("diff", "--name-only", "--diff-filter=U", check=False)
        return tuple(sorted(p for p in r.stdout.splitlines() if p))

    def rebase_in_progress(self) -> bool:
        gitdir = self.path / ".git"
        return (gitdir / "rebase-merge").exists() or (gitdir / "rebase-apply").exists()

    def abort(self) -> None:
        """Abort an unfinished rebase or merge."""
        if self.rebase_in_progress():
            self.git("rebase", "--abort")
        elif (self.path / ".git" / "MERGE_HEAD").exists():
            self.git("merge", "--abort")

    # -- merge driver (not versioned: must be configured in every clone) --------

    def set_merge_driver(self, name: str, command: str, description: str | None = None) -> None:
        self.git("config", f"merge.{name}.name", description or name)
        self.git("config", f"merge.{name}.driver", command)

    def merge_driver(self, name: str) -> str | None:
        r = self.git("config", "--get", f"merge.{name}.driver", check=False)
        return r.stdout.strip() or None
