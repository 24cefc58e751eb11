"""`subconscious sync setup-git`: attributes, ignore rules and the driver config in this clone;
running it twice changes nothing; user lines are kept; the sync/ templates say the same."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from subconscious.sync.gitsetup import BEGIN, END, attributes_rules, ignore_rules, with_block

REPO = Path(__file__).resolve().parents[2]


def env_for(tmp: Path, letta_home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "LETTA_", "SUBCONSCIOUS_"))}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, LETTA_HOME=str(letta_home),
               SUBCONSCIOUS_HOST="alpha", SUBCONSCIOUS_STATE_DIR=str(tmp / "local"))
    return env


def git(cwd: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout


def setup_git(tmp: Path, letta_home: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "subconscious", "sync", "setup-git", *args], cwd=tmp,
                          env=env_for(tmp, letta_home), capture_output=True, text=True, timeout=60)


def snapshot(repo: Path) -> dict[str, bytes]:
    return {name: (repo / name).read_bytes() for name in (".gitattributes", ".gitignore", ".git/config")}


@pytest.mark.parametrize("layout", ["dotfiles", "home is the repo", "state dir is the repo", "spaces in path"])
def test_setup_writes_rules_that_git_applies_and_is_idempotent(tmp_path, layout):
    repo = tmp_path / ("my dotfiles" if layout == "spaces in path" else "dotfiles")
    letta_home = {"dotfiles": repo / "letta", "home is the repo": repo, "state dir is the repo": repo / "x",
                  "spaces in path": repo / "Letta Home [main]"}[layout]
    state = letta_home / ".letta" / "claude"
    top = state if layout == "state dir is the repo" else repo
    top.mkdir(parents=True)
    git(top, "init", "-q")
    (top / ".gitignore").write_text("node_modules/\n")  # the user's own rule stays
    r = setup_git(tmp_path, letta_home)
    assert r.returncode == 0, r.stderr
    assert "merge.subconscious.driver" in r.stdout
    first = snapshot(top)
    rel = state.relative_to(top).as_posix() if state != top else ""
    prefix = rel + "/" if rel else ""
    for name in ("conversations.json", "session-0b9c-11.json", "hosts/h1.json"):
        out = git(top, "check-attr", "merge", "--", prefix + name)
        assert out.strip().endswith(": merge: subconscious"), out
    assert git(top, "check-attr", "merge", "--", "package.json").strip().endswith("unspecified")
    ignored = git(top, "check-ignore", "--no-index", "--", prefix + ".subconscious-tmp-x", prefix + "quarantine/a",
                  prefix + "backups/2026-11-30/h/b.json", "node_modules/x").split("\n")
    assert len([x for x in ignored if x]) == 4
    for tracked in (prefix + "conversations.json", prefix + "hosts/h1.json"):
        assert subprocess.run(["git", "check-ignore", "-q", "--no-index", tracked], cwd=top,
                              env=env_for(tmp_path, letta_home)).returncode == 1
    driver = git(top, "config", "--get", "merge.subconscious.driver").strip()
    assert driver.endswith("merge-driver %O %A %B %P")

    r = setup_git(tmp_path, letta_home)  # again: nothing changes
    assert r.returncode == 0 and "already set up: nothing changed" in r.stdout
    assert snapshot(top) == first
    assert (top / ".gitignore").read_text().startswith("node_modules/\n")


def test_an_edited_block_is_restored_and_lines_around_it_are_kept(tmp_path):
    rules = attributes_rules("a/b")
    text = with_block("*.png binary\n", rules)
    assert text.startswith("*.png binary\n\n" + BEGIN) and text.endswith(END + "\n")
    edited = text.replace("eol=lf", "eol=crlf", 1) + "*.jpg binary\n"
    again = with_block(edited, rules)
    assert again == text + "*.jpg binary\n"
    assert with_block(again, rules) == again


def test_outside_a_git_worktree_is_a_usage_error(tmp_path):
    r = setup_git(tmp_path, tmp_path / "plain")
    assert r.returncode == 2 and "not inside a git worktree" in r.stderr


def test_an_explicit_repo_that_does_not_hold_the_state_dir_gets_the_generic_rules(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    r = setup_git(tmp_path, tmp_path / "elsewhere", str(repo))
    assert r.returncode == 0, r.stderr
    assert "**/.letta/claude/conversations.json merge=subconscious" in (repo / ".gitattributes").read_text()


def rule_lines(path: Path) -> list[str]:
    return [" ".join(ln.split()) for ln in path.read_text().splitlines() if ln.strip() and not ln.startswith("#")]


def test_the_sync_kit_templates_hold_the_same_rules_setup_git_writes():
    assert rule_lines(REPO / "sync" / "gitattributes") == attributes_rules(None)
    assert rule_lines(REPO / "sync" / "gitignore") == ignore_rules(None)
