"""`subconscious install` / `uninstall` with the real Claude Code CLI: after install, a plain `claude -p`
(no --plugin-dir, no plugin) runs our hooks; after uninstall it does not; another tool's hook in the same
file runs throughout. Our hooks are played by the recording `subconscious` double (first on PATH), the
install command is the real pip-installed one."""

from __future__ import annotations

import json
import subprocess
import sysconfig
from pathlib import Path

import pytest

from tests.harness.claude_code import BASE_PATH, REPO_ROOT

pytestmark = pytest.mark.claude

OTHER_TOOL = {"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "echo OTHER_TOOL_SAYS_HELLO"}]}]},
              "env": {"OTHER_TOOL_SETTING": "kept"}}
# what one `claude -p` run with a tool call fires (SessionEnd ends every run)
ALL = [["hook", "session-start"], ["hook", "user-prompt-submit"], ["hook", "pre-tool-use"], ["hook", "stop"],
       ["hook", "session-end"]]


def subconscious(sandbox, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The real installed command, with the sandbox's HOME and CLAUDE_CONFIG_DIR."""
    exe = Path(sysconfig.get_path("scripts")) / "subconscious"
    assert exe.exists(), f"no {exe}: run `pip install -e .` first"
    p = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=60, cwd=cwd,
                       env={"PATH": BASE_PATH, "HOME": str(sandbox.home), "CLAUDE_CONFIG_DIR": str(sandbox.config_dir)})
    assert "Traceback" not in p.stdout + p.stderr
    return p


def turn(sandbox, **kw):
    target = sandbox.project_dir / "hello.txt"
    target.write_text("PAPAYA\n")
    run = sandbox.run(f"[[tool:Read {target}]] [[text:It says PAPAYA.]] read it", plugin_dirs=(), **kw)
    assert run.returncode == 0, run.describe()
    assert run.result == "It says PAPAYA."
    return run


def test_install_into_user_settings_fires_our_hooks_without_the_plugin(claude_sandbox, recording_subconscious):
    user_settings = claude_sandbox.config_dir / "settings.json"
    user_settings.write_text(json.dumps(OTHER_TOOL, indent=2) + "\n")
    original = user_settings.read_bytes()

    before = turn(claude_sandbox)
    assert recording_subconscious.records() == []  # nothing of ours yet
    assert before.seen_by_model("OTHER_TOOL_SAYS_HELLO")

    p = subconscious(claude_sandbox, "install")  # default target: $CLAUDE_CONFIG_DIR/settings.json
    assert p.returncode == 0 and f"added subconscious hooks to {user_settings}" in p.stdout, p.stdout + p.stderr
    run = turn(claude_sandbox)
    recs = recording_subconscious.records()
    assert [r["argv"] for r in recs] == ALL
    assert all(r["stdin"]["session_id"] == run.session_id for r in recs)
    assert run.seen_by_model("RECORDED_DOUBLE_PROMPT_CONTEXT for %s" % run.session_id)  # UserPromptSubmit stdout
    assert run.seen_by_model("RECORDED_DOUBLE_TOOL_CONTEXT Read")                     # PreToolUse additionalContext
    assert run.seen_by_model("OTHER_TOOL_SAYS_HELLO")                                 # the other tool still runs

    p = subconscious(claude_sandbox, "uninstall")
    handled = len(json.loads((REPO_ROOT / "hooks" / "hooks.json").read_text())["hooks"])  # one handler per event
    assert p.returncode == 0 and "removed %d subconscious hooks" % handled in p.stdout, p.stdout + p.stderr
    assert user_settings.read_bytes() == original
    after = turn(claude_sandbox)
    assert len(recording_subconscious.records()) == len(ALL)  # no new calls
    assert after.seen_by_model("OTHER_TOOL_SAYS_HELLO")


def test_install_into_project_settings(claude_sandbox, recording_subconscious):
    p = subconscious(claude_sandbox, "install", "--project", str(claude_sandbox.project_dir))
    assert p.returncode == 0, p.stdout + p.stderr
    assert (claude_sandbox.project_dir / ".claude" / "settings.json").is_file()
    turn(claude_sandbox)
    assert [r["argv"] for r in recording_subconscious.records()] == ALL


def test_install_warns_when_the_plugin_is_enabled_too_because_every_hook_would_run_twice(claude_sandbox):
    # both copies of a hook run in parallel: this double appends one line per call (O_APPEND), race-free
    calls = claude_sandbox.root / "calls.log"
    double = claude_sandbox.bin_dir / "subconscious"
    double.write_text(f"#!/bin/sh\ncat >/dev/null\necho \"$2\" >> '{calls}'\n")
    double.chmod(0o755)
    for args in (("plugin", "marketplace", "add", str(REPO_ROOT)), ("plugin", "install", "subconscious@subconscious")):
        done = claude_sandbox.command(*args)
        assert done.returncode == 0, done.stdout + done.stderr
    p = subconscious(claude_sandbox, "install")
    assert p.returncode == 0, p.stderr
    assert "subconscious@subconscious is enabled in" in p.stdout and "every hook runs twice" in p.stdout
    turn(claude_sandbox)
    # what the note warns about, as Claude Code 2.1.x does it: plugin and settings hooks both run
    events = calls.read_text().split()
    assert sorted(events) == sorted(a[1] for a in ALL for _ in (0, 1)), events
