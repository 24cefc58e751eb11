"""``subconscious status`` and ``--help`` as a user runs them (real processes)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "upstream-home"
from subconscious.cli import VERBS


def run(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "subconscious", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=60)


def base_env(tmp: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_"))}
    env.update(HOME=str(tmp / "user"), SUBCONSCIOUS_STATE_DIR=str(tmp / "local"), **extra)
    return env


def test_help_lists_every_verb_and_each_verb_has_help(tmp_path):
    out = run("--help", env=base_env(tmp_path))
    assert out.returncode == 0
    for verb in VERBS:
        assert verb in out.stdout
        sub = run(verb, "--help", env=base_env(tmp_path))
        assert sub.returncode == 0 and f"usage: subconscious {verb}" in sub.stdout


def test_status_reports_an_upstream_home_found_under_letta_home(tmp_path):
    shutil.copytree(FIXTURE, tmp_path / "user" / "sync")
    env = base_env(tmp_path, LETTA_HOME="$HOME/sync", SUBCONSCIOUS_HOST="laptop", LETTA_API_KEY="sk-secret-123456789")
    out = run("status", "--json", env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["home"] == str(tmp_path / "user" / "sync" / ".letta" / "claude")
    assert info["host"]["id"] == "laptop" and info["state_dir"] == str(tmp_path / "local")
    assert info["found"] == {"sessions": 2, "conversations": 3, "legacy_entries": 3, "tombstones": 0,
                             "hosts": 0, "agents_in_use": 1, "conflict_copies": 0, "problems": 0}
    assert "sk-secret" not in out.stdout and info["api_key"] == "set"
    text = run("status", env=env, cwd=tmp_path)
    assert "2 sessions, 3 conversations (3 legacy)" in text.stdout and "laptop" in text.stdout
    # status only looks: nothing was written to the shared home
    assert not (tmp_path / "user" / "sync" / ".letta" / "claude" / "hosts").exists()


def test_status_shows_problems_without_touching_them(tmp_path):
    home = tmp_path / "proj" / ".letta" / "claude"
    home.mkdir(parents=True)
    (home / "conversations.json").write_text("<<<<<<< HEAD\n{}\n=======\n{\"s\": \"conv-1\"}\n>>>>>>> x\n")
    out = run("status", env=base_env(tmp_path, SUBCONSCIOUS_HOST="h"), cwd=tmp_path / "proj")
    assert out.returncode == 0
    assert "1 problems" in out.stdout and "git-conflict" in out.stdout
    assert not (home / "quarantine").exists()


def test_status_counts_conflict_copies(tmp_path):
    home = tmp_path / "proj" / ".letta" / "claude"
    shutil.copytree(FIXTURE / ".letta" / "claude", home)
    shutil.copyfile(home / "conversations.json", home / "conversations.sync-conflict-20261130-063049-ZV4TXD3.json")
    shutil.copyfile(home / "session-c0ffee00-1111-4222-8333-444455556666.json",
                    home / "session-c0ffee00-1111-4222-8333-444455556666 (bob's conflicted copy 2026-11-30).json")
    out = run("status", "--json", env=base_env(tmp_path, SUBCONSCIOUS_HOST="h"), cwd=tmp_path / "proj")
    found = json.loads(out.stdout)["found"]
    assert found["conflict_copies"] == 2 and found["sessions"] == 2


def test_a_stable_host_id_is_created_once(tmp_path):
    env = base_env(tmp_path)
    first = json.loads(run("status", "--json", env=env, cwd=tmp_path).stdout)["host"]["id"]
    second = json.loads(run("status", "--json", env=env, cwd=tmp_path).stdout)["host"]["id"]
    assert first == second and first.startswith("h")


@pytest.mark.parametrize("letta_home", ["$DROPBOX/state", "${ONEDRIVE}/x"])
def test_an_unexpanded_variable_in_letta_home_is_refused_and_nothing_is_created(tmp_path, letta_home):
    out = run("status", env=base_env(tmp_path, LETTA_HOME=letta_home), cwd=tmp_path)
    assert out.returncode == 2 and "was not expanded" in out.stderr
    assert not any("$" in p.name for p in tmp_path.rglob("*"))
