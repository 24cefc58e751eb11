"""The Claude Code harness itself: isolation, scripting of the fake API, what a run returns."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.harness.claude_code import REPO_ROOT, read_recordings, write_recording_double

pytestmark = pytest.mark.claude


def test_run_is_isolated_and_scripted(claude_sandbox, fake_anthropic):
    real_claude_dir = Path(os.path.expanduser("~/.claude"))
    before = sorted(p.name for p in real_claude_dir.rglob("*")) if real_claude_dir.exists() else None
    f = claude_sandbox.project_dir / "a.txt"
    f.write_text("KIWI\n")
    run = claude_sandbox.run("[[thinking:plan]] [[tool:Read %s]] [[tool:Bash echo MELON]] [[text:All done.]] go" % f,
                             plugin_dirs=())
    assert run.returncode == 0, run.describe()
    assert run.result == "All done."
    # three model calls: tool_use Read, tool_use Bash, final text; each tool result went back to the model
    replies = [[b["type"] for b in r.reply] for r in run.message_requests()]
    assert replies == [["thinking", "text", "tool_use"], ["text", "tool_use"], ["text"]]
    assert run.seen_by_model("1\\tKIWI") and run.seen_by_model("MELON")
    assert all(r.path.startswith("/v1/messages") for r in run.message_requests())
    # the transcript lives in the sandbox config dir and names this session
    assert run.transcript_path.is_relative_to(claude_sandbox.config_dir)
    entries = run.transcript_entries()
    assert {e.get("sessionId") for e in entries if e.get("sessionId")} == {run.session_id}
    assert any(e.get("type") == "assistant" and e["message"]["content"][0].get("type") == "thinking"
               for e in entries)
    after = sorted(p.name for p in real_claude_dir.rglob("*")) if real_claude_dir.exists() else None
    assert before == after  # nothing written to the real ~/.claude
    assert fake_anthropic.requests[-1] is run.requests[-1]


def test_unmarked_prompt_gets_default_text(claude_sandbox):
    run = claude_sandbox.run("just chat", plugin_dirs=())
    assert run.returncode == 0 and run.result == "Done (fake model)."
    assert len(run.message_requests()) == 1


def test_installed_from_the_repo_as_a_marketplace(claude_sandbox, tmp_path):
    # the way users install it: add this repo as a marketplace, install, then plain `claude -p`
    added = claude_sandbox.command("plugin", "marketplace", "add", str(REPO_ROOT))
    assert added.returncode == 0, added.stdout + added.stderr
    installed = claude_sandbox.command("plugin", "install", "subconscious@subconscious")
    assert installed.returncode == 0, installed.stdout + installed.stderr
    listed = claude_sandbox.command("plugin", "list")
    assert "subconscious@subconscious" in listed.stdout
    write_recording_double(claude_sandbox.bin_dir, tmp_path / "rec")
    run = claude_sandbox.run("[[text:ok]] hi", plugin_dirs=())
    assert run.returncode == 0, run.describe()
    recs = read_recordings(tmp_path / "rec")
    assert [r["argv"] for r in recs] == [["hook", "session-start"], ["hook", "user-prompt-submit"], ["hook", "stop"],
                                         ["hook", "session-end"]]  # every -p run ends with SessionEnd
    assert recs[0]["stdin"]["source"] == "startup" and recs[0]["stdin"]["session_id"] == run.session_id
