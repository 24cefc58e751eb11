"""Paths the agent's tools must never write: places whose content runs code (or changes what runs) later,
outside any sandbox, when a host program picks them up — and the subconscious's own state.

- ``.git`` anywhere (hooks, ``core.fsmonitor``/``core.hooksPath`` in a config: a host ``git status`` runs them),
- ``.claude/`` (Claude Code's settings: hooks and env run at the next start) and ``.mcp.json``,
- ``.letta/`` (the subconscious's state: a forged shard can turn encryption off or point the agent elsewhere),
- env files (``.env``, ``.env.*``: loaded into what direnv, docker compose or dotenv run),
- direnv / mise (``.envrc``, ``mise.toml``…: run on ``cd``), editor config (``.vscode/``, ``.idea/``, ``.zed/``,
  ``.fleet/``: tasks run on folder open, interpreter paths), dev containers, git-hook managers
  (``.husky/``, ``.pre-commit-config.yaml``, lefthook) and CI config (``.github/``, ``.gitlab-ci.yml``…).

Names are compared the way a case-insensitive, normalising file system would (macOS, Windows): Unicode
NFC and case folded, characters HFS+ ignores dropped, trailing dots and spaces stripped (Windows) — so
``.GIT/hooks``, ``.Envrc.`` and ``.g\\u200cit`` are the names they are on those systems.

Used by Write/Edit (refused) and by the Bash sandbox (masked read-only, or removed after the command when
it created one where no mask could be placed). Pure: no file system access here.
"""
from __future__ import annotations

import fnmatch
import unicodedata

from .confine import SECRET_DIRS, SECRET_NAMES

__all__ = ["fold", "RUNS_LATER_DIRS", "RUNS_LATER_FILES", "ENV_FILES", "STATE_DIRS", "runs_later", "unreachable",
           "secret_name", "write_denied", "is_masked_name"]

# directories whose contents host programs run or obey (anywhere in the project)
RUNS_LATER_DIRS = frozenset({
    ".git", ".claude", ".letta", ".vscode", ".idea", ".zed", ".fleet", ".devcontainer", ".husky",
    ".github", ".gitlab", ".circleci", ".buildkite", ".direnv", ".mise",
})
# files that do the same (anywhere in the project)
RUNS_LATER_FILES = frozenset({
    ".envrc", ".mcp.json", ".mise.toml", "mise.toml", ".mise.local.toml", "mise.local.toml",
    ".pre-commit-config.yaml", ".pre-commit-config.yml", "lefthook.yml", ".lefthook.yml", "lefthook.yaml",
    ".lefthook.yaml", ".gitlab-ci.yml", ".travis.yml", "bitbucket-pipelines.yml", "azure-pipelines.yml",
    "jenkinsfile", ".gitpod.yml", ".git", ".gitmodules",
})
# env files that tools load into the environment of what they run (direnv's dotenv, docker compose, dotenv)
ENV_FILES = (".env", ".env.*")
# the subconscious's own state: not even readable through Bash
STATE_DIRS = frozenset({".letta"})

# code points HFS+ ignores in names (the list git checks for .git, CVE-2014-9390)
_IGNORABLE = dict.fromkeys([0x200C, 0x200D, 0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E,
                            0x206A, 0x206B, 0x206C, 0x206D, 0x206E, 0x206F, 0xFEFF])
_SECRET_OK = (".env.example", ".env.sample", ".env.template", ".env.dist", "*.pub")
_SECRET_PATS = tuple(p.lower() for p in SECRET_NAMES)
_SECRET_DIRS = frozenset(d.lower() for d in SECRET_DIRS)


def fold(name: str) -> str:
    """The name as a case-insensitive, normalising file system compares it."""
    name = unicodedata.normalize("NFC", name).translate(_IGNORABLE).casefold()
    stripped = name.rstrip(". ")
    return stripped if stripped else name  # "." and ".." stay what they are


def _parts(rel: str) -> list[str]:
    return [fold(p) for p in rel.replace("\\", "/").split("/") if p and p != "."]


def secret_name(name: str) -> bool:
    """Named like a credential (confine.SECRET_NAMES), compared case-insensitively."""
    n = fold(name)
    if any(fnmatch.fnmatchcase(n, ok) for ok in _SECRET_OK):
        return False
    return any(fnmatch.fnmatchcase(n, pat) for pat in _SECRET_PATS)


def is_masked_name(name: str) -> bool:
    """Is one path component a name that runs code later (a directory, a file or an env file)?"""
    n = fold(name)
    if n in RUNS_LATER_DIRS or n in RUNS_LATER_FILES:
        return True
    return any(fnmatch.fnmatchcase(n, p) for p in ENV_FILES) and not any(fnmatch.fnmatchcase(n, ok) for ok in _SECRET_OK)


def runs_later(rel: str) -> str | None:
    """Why writing ``rel`` (project-relative) could run code outside the sandbox later; None if it can't."""
    raw = [p for p in rel.replace("\\", "/").split("/") if p and p != "."]
    for p in raw:
        if is_masked_name(p):
            return (f"{p!r} is a place whose contents run later outside the sandbox (git hooks and config, Claude "
                    "Code or editor settings, direnv, CI, the subconscious's own state); the tools never write there")
    return None


def unreachable(rel: str) -> bool:
    """The subconscious's own state (``.letta`` anywhere): no tool may read or write it."""
    return any(p in STATE_DIRS for p in _parts(rel))


def write_denied(rel: str) -> str | None:
    """Why Write/Edit (or a file Bash made) may not be at ``rel``; None if it may."""
    why = runs_later(rel)
    if why:
        return why
    parts = _parts(rel)
    if _SECRET_DIRS.intersection(parts):
        return "directories that hold credentials are never written"
    if parts and secret_name(parts[-1]):
        return f"files named like credentials ({rel.rsplit('/', 1)[-1]}) are never written"
    return None
