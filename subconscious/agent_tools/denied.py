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

__all__ = ["fold", "RUNS_LATER_DIRS", "RUNS_LATER_FILES", "ENV_FILES", "STATE_DIRS", "GITDIR_MARKERS", "runs_later",
           "unreachable", "secret_name", "write_denied", "is_masked_name", "masked_in", "repo_layout", "reason",
           "is_ignore_file", "ignore_edit_refusal"]

# Every place in a project whose contents a host program runs (or obeys to decide what it runs) later,
# outside any sandbox, without the user asking for a build: on ``cd``, on opening the folder, on ``git
# status``, at an agent's next start. One table, the reason beside each name. Matched case-folded, anywhere
# in the project. Not listed on purpose: build files (Makefile, package.json scripts, setup.py, build.rs…):
# they run only when the user runs a build, and editing them is ordinary coding work.
_DIR_REASONS = {
    ".git": "git's repository: hooks and config (core.fsmonitor, core.hooksPath) run on any git command",
    ".hg": "Mercurial's repository: .hg/hgrc [hooks] run on hg commands (a prompt showing hg status runs them)",
    ".sl": "Sapling's repository: .sl/config hooks run on sl commands",
    ".jj": "Jujutsu's repository: .jj/repo/config.toml sets the programs jj runs (fsmonitor, diff tools)",
    ".claude": "Claude Code's project settings: hooks and env run at its next start",
    ".letta": "the subconscious's own state: a forged shard turns encryption off or points the agent elsewhere",
    ".vscode": "VS Code: tasks.json tasks run on folder open, settings.json picks interpreters and terminals",
    ".idea": "JetBrains IDEs: run configurations and startup tasks",
    ".zed": "Zed: tasks and language-server settings",
    ".fleet": "Fleet: run configurations",
    ".cursor": "Cursor: mcp.json starts MCP servers (commands) when the project opens",
    ".gemini": "Gemini CLI: settings.json starts MCP servers",
    # other coding agents' project settings: each starts the MCP servers (commands) or plugins named there
    ".codex": "Codex CLI: .codex/config.toml [mcp_servers] commands start with it in the project",
    ".amazonq": "Amazon Q Developer: .amazonq/mcp.json starts MCP servers in the workspace",
    ".roo": "Roo Code: .roo/mcp.json starts MCP servers when the project opens",
    ".kiro": "Kiro: .kiro/settings/mcp.json starts MCP servers, .kiro/hooks run on file events",
    ".continue": "Continue: .continue/mcpServers/ start MCP servers in the workspace",
    ".opencode": "opencode: .opencode/plugin/ modules run at its start",
    ".windsurf": "Windsurf: workspace workflows and rules its agent runs",
    ".devcontainer": "dev containers: initializeCommand runs on the host before the container starts",
    ".husky": "husky git hooks run on commit",
    ".githooks": "a hooks directory projects point core.hooksPath at: run on commit",
    ".git-hooks": "a hooks directory projects point core.hooksPath at: run on commit",
    ".github": "CI workflows run with the repository's secrets on the next push",
    ".gitlab": "GitLab CI includes",
    ".circleci": "CI configuration",
    ".buildkite": "CI configuration",
    ".direnv": "direnv's layout directory: sourced on cd",
    ".mise": "mise: .mise/config.toml tasks, env and hooks run on cd",
}
_FILE_REASONS = {
    ".git": "a gitdir: file makes any directory a git worktree (its config then runs code)",
    ".gitmodules": "submodule URLs and paths git fetches and checks out",
    ".envrc": "direnv: run by the shell on cd",
    ".mcp.json": "Claude Code's project MCP servers: commands started at its next start",
    "opencode.json": "opencode: its mcp commands start with it in the project",
    "opencode.jsonc": "opencode: its mcp commands start with it in the project",
    ".aider.conf.yml": "aider: lint-cmd / test-cmd run after each of its edits",
    ".gitconfig": "projects include it from .git/config (include.path = ../.gitconfig): its core.fsmonitor runs on git status",
    ".pdbrc": "pdb runs its commands (! python statements) whenever a debugger starts in this directory",
    ".envrc.local": "direnv templates source it from .envrc (source_env_if_exists): run on cd",
    ".devcontainer.json": "dev containers: initializeCommand runs on the host",
    ".lfsconfig": "git-lfs: sets the LFS endpoint and the programs git-lfs runs",
    ".yarnrc.yml": "yarn: yarnPath names the JavaScript file every yarn command runs",
    ".yarnrc": "yarn 1: yarn-path names the program every yarn command runs",
    ".mise.toml": "mise: tasks, env and hooks run on cd", "mise.toml": "mise: tasks, env and hooks run on cd",
    ".mise.local.toml": "mise: run on cd", "mise.local.toml": "mise: run on cd",
    ".pre-commit-config.yaml": "pre-commit hooks run on commit", ".pre-commit-config.yml": "pre-commit hooks run on commit",
    "lefthook.yml": "lefthook git hooks", ".lefthook.yml": "lefthook git hooks", "lefthook.yaml": "lefthook git hooks",
    ".lefthook.yaml": "lefthook git hooks",
    ".exrc": "vim/neovim with 'exrc' set source it on start", ".nvimrc": "neovim with 'exrc' set sources it",
    ".nvim.lua": "neovim with 'exrc' set runs it",
    ".gitlab-ci.yml": "CI configuration", ".travis.yml": "CI configuration", "bitbucket-pipelines.yml": "CI configuration",
    "azure-pipelines.yml": "CI configuration", "jenkinsfile": "CI configuration", ".gitpod.yml": "Gitpod tasks run on open",
}
# names that run later only below a certain directory: (parent, name)
_PAIR_REASONS = {
    (".config", "mise"): "mise: .config/mise/config.toml tasks, env and hooks run on cd",
    (".config", "mise.toml"): "mise: run on cd",
    ("mise", "config.toml"): "mise: mise/config.toml runs on cd",
}
# directories whose contents host programs run or obey (anywhere in the project)
RUNS_LATER_DIRS = frozenset(_DIR_REASONS)
# files that do the same (anywhere in the project)
RUNS_LATER_FILES = frozenset(_FILE_REASONS)
# A directory is a git repository by its contents, whatever its name (git's is_git_directory: a HEAD plus
# objects/ and refs/, or a HEAD plus a commondir file naming where they are): a host git run inside it, or
# below it, obeys its config (core.fsmonitor runs a program on ``git status``). The tools treat a directory
# holding HEAD together with any one of these as a repository (a superset of git's rule: HEAD is always
# required, so refusing the second of the pair closes it).
GITDIR_MARKERS = frozenset({"objects", "refs", "commondir"})
# the ignore files the readers obey (ignore.py): what the agent writes there may only hide more
IGNORE_FILES = frozenset({".gitignore"})
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


def masked_in(parent: str, name: str) -> bool:
    """Is ``name``, inside a directory named ``parent``, a place that runs code later (by itself or as a pair)?"""
    return is_masked_name(name) or (fold(parent), fold(name)) in _PAIR_REASONS


def reason(parent: str, name: str) -> str:
    n = fold(name)
    return (_DIR_REASONS.get(n) or _FILE_REASONS.get(n) or _PAIR_REASONS.get((fold(parent), n))
            or "an env file: loaded into what direnv, docker compose or dotenv run")


def repo_layout(names) -> bool:
    """Do these entries of one directory make it a git repository (HEAD with objects, refs or commondir)?"""
    folded = {fold(n) for n in names}
    return "head" in folded and bool(folded & GITDIR_MARKERS)


def runs_later(rel: str) -> str | None:
    """Why writing ``rel`` (project-relative) could run code outside the sandbox later; None if it can't."""
    raw = [p for p in rel.replace("\\", "/").split("/") if p and p != "."]
    for k, p in enumerate(raw):
        parent = raw[k - 1] if k else ""
        if masked_in(parent, p):
            return (f"{p!r} is a place whose contents run later outside the sandbox ({reason(parent, p)}); "
                    "the tools never write there")
    return None


def is_ignore_file(name: str) -> bool:
    return fold(name) in IGNORE_FILES


def _rule_lines(text: str) -> list[str]:
    return [line.rstrip("\r") for line in text.split("\n")]


def ignore_edit_refusal(old: str | None, new: str) -> str | None:
    """Why the agent may not change an ignore file from ``old`` (None: a new file) to ``new``; None if it may.
    The readers hide what the ignore rules exclude, so an agent that could remove a pattern, or add a ``!``
    pattern, would un-hide files: only added patterns that exclude more are allowed (every old line kept, in
    order; no new line starting with ``!``). Adding a pattern never shows a file git's last-match rule hid."""
    want = [o for o in (_rule_lines(old) if old else []) if o.strip()]
    added, k = [], 0
    for line in _rule_lines(new):  # the old lines, in order, as a subsequence; every other line is added
        if k < len(want) and line == want[k]:
            k += 1
        else:
            added.append(line)
    if k < len(want):
        return ("the ignore rules decide what the tools may read: the agent may add patterns to an ignore file, "
                "never remove or change one")
    if any(line.lstrip().startswith("!") for line in added):
        return "the ignore rules decide what the tools may read: the agent may not add '!' (re-include) patterns"
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
