"""The plugin (.claude-plugin/ + hooks/hooks.json) loaded by the real Claude Code CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from subconscious.delivery.transcript import build_update, complete_lines
from tests.harness.claude_code import REPO_ROOT, read_recordings, write_recording_double

pytestmark = pytest.mark.claude

EVENTS = {"SessionStart": "session-start", "UserPromptSubmit": "user-prompt-submit",
          "PreToolUse": "pre-tool-use", "Stop": "stop"}
# every event hooks.json handles; a `claude -p` run with one tool call fires EVENTS, then SessionEnd
PLUGIN_EVENTS = {**EVENTS, "StopFailure": "stop-failure", "PreCompact": "pre-compact", "PostCompact": "post-compact",
                 "SubagentStart": "subagent-start", "SubagentStop": "subagent-stop", "SessionEnd": "session-end"}
RUN = [*EVENTS.values(), "session-end"]
NO_SUBCONSCIOUS_PATH = "/usr/bin:/bin"


def test_plugin_validates(claude_code, tmp_path):
    for target in (REPO_ROOT, REPO_ROOT / ".claude-plugin" / "marketplace.json"):
        p = claude_code.run_plain("plugin", "validate", str(target), cwd=tmp_path,
                                  env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                                       "CLAUDE_CONFIG_DIR": str(tmp_path / "cfg")})
        assert p.returncode == 0, p.stdout + p.stderr
        assert "Validation passed" in p.stdout + p.stderr


def test_hooks_config_shape():
    hooks = json.loads((REPO_ROOT / "hooks" / "hooks.json").read_text())["hooks"]
    assert set(hooks) == set(PLUGIN_EVENTS)
    for event, arg in PLUGIN_EVENTS.items():
        (group,) = hooks[event]
        (hook,) = group["hooks"]
        # exec form (no shell string): the launcher, which finds the command and maps exit 2 to 1
        assert (hook["type"], hook["command"], hook["args"]) == ("command", "/bin/sh",
                                                                 ["${CLAUDE_PLUGIN_ROOT}/hooks/run", arg])
        assert "async" not in hook  # an async Stop is cancelled when `claude -p` exits (2.1.332)
    assert hooks["PreToolUse"][0]["matcher"] == "*"
    assert {e: hooks[e][0]["hooks"][0]["timeout"] for e in EVENTS} == {  # the lifecycle's own: their tests
        "SessionStart": 15, "UserPromptSubmit": 10, "PreToolUse": 5, "Stop": 120}


def _hook_responses(run):
    return [e for e in run.output if isinstance(e, dict) and e.get("subtype") == "hook_response"]


def _path_without_python(sandbox) -> str:
    """A PATH with the tools the launcher uses but no `subconscious`, python3 or uv."""
    tools = sandbox.root / "tools"
    tools.mkdir(exist_ok=True)
    for name in ("date", "mkdir", "setsid", "nohup", "nice", "sed", "head", "tr", "cut", "cp", "find", "rm", "mv", "tail"):
        (tools / name).symlink_to(shutil.which(name))
    return str(tools)


def test_without_a_usable_python_one_line_at_session_start_and_nothing_blocks(claude_sandbox):
    path = _path_without_python(claude_sandbox)
    assert not any(shutil.which(c, path=path) for c in ("subconscious", "python3", "uv")), "precondition"
    target = claude_sandbox.project_dir / "hello.txt"
    target.write_text("The secret word is PAPAYA.\n")
    run = claude_sandbox.run("[[tool:Read %s]] [[text:It says PAPAYA.]] What does hello.txt say?" % target,
                             path=path, output_format="stream-json")
    assert run.returncode == 0, run.describe()
    assert run.result == "It says PAPAYA."
    assert run.seen_by_model("The secret word is PAPAYA.")  # the tool ran, the turn went on
    responses = _hook_responses(run)
    assert sorted({r["hook_event"] for r in responses}) == sorted(EVENTS)
    for r in responses:
        assert r["exit_code"] == 0 and r["outcome"] == "success" and r["stderr"] == "", r
        if r["hook_event"] == "SessionStart":
            (line,) = r["stdout"].splitlines()
            message = json.loads(line)["systemMessage"]
            assert "needs Python 3.11 or newer, or uv" in message and "pipx install subconscious" in message
        else:
            assert r["stdout"] == "", r  # silence on every other hook
    # the message is for the user, never context for the model
    assert not run.seen_by_model("Python 3.11")


def test_each_event_reaches_subconscious_with_real_stdin(claude_sandbox, recording_subconscious):
    target = claude_sandbox.project_dir / "hello.txt"
    target.write_text("The secret word is PAPAYA.\n")
    prompt = "[[tool:Read %s]] [[text:It says PAPAYA.]] What does hello.txt say?" % target
    run = claude_sandbox.run(prompt, env={"LETTA_MODE": "whisper", "SUBCONSCIOUS_HOME": "/x/y",
                                          "LETTA_BASE_URL": "http://127.0.0.1:9"})
    assert run.returncode == 0, run.describe()
    recs = recording_subconscious.records()
    assert [r["argv"] for r in recs] == [["hook", ev] for ev in RUN]
    recs = recs[:4]
    for r in recs:
        stdin = r["stdin"]
        assert EVENTS[stdin["hook_event_name"]] == r["argv"][1]
        assert stdin["session_id"] == run.session_id
        assert stdin["transcript_path"] == str(run.transcript_path)
        assert stdin["cwd"] == str(claude_sandbox.project_dir) == r["cwd"]
        assert r["env"]["LETTA_MODE"] == "whisper" and r["env"]["SUBCONSCIOUS_HOME"] == "/x/y"
        assert r["env"]["LETTA_BASE_URL"] == "http://127.0.0.1:9"
        assert r["env"]["CLAUDE_PROJECT_DIR"] == str(claude_sandbox.project_dir)
    start, prompt_rec, pre, stop = (r["stdin"] for r in recs)
    assert start["source"] == "startup"
    assert prompt_rec["prompt"] == prompt
    assert pre["tool_name"] == "Read" and pre["tool_input"] == {"file_path": str(target)}
    assert pre["tool_use_id"].startswith("toolu_")
    assert stop["stop_hook_active"] is False
    assert stop["last_assistant_message"] == "It says PAPAYA."
    # Stop runs to completion and already sees the final answer in the transcript
    assert "It says PAPAYA." in recs[3]["transcript_at_hook"]
    # hook stdout reaches the model: plain text on prompt submit, additionalContext on tool use
    assert run.seen_by_model("RECORDED_DOUBLE_PROMPT_CONTEXT for %s" % run.session_id)
    assert run.seen_by_model("RECORDED_DOUBLE_TOOL_CONTEXT Read")


def test_resume_keeps_session_and_cursor_picks_up_only_new_lines(claude_sandbox, recording_subconscious):
    notes = claude_sandbox.project_dir / "notes.txt"
    notes.write_text("alpha\nbeta\n")
    first = claude_sandbox.run("[[tool:Read %s]] [[text:Read them.]] FIRST-TURN read the notes" % notes)
    assert first.returncode == 0, first.describe()
    second = claude_sandbox.run("[[tool:Bash wc -l notes.txt]] [[text:Two lines.]] SECOND-TURN count them",
                                resume=first.session_id)
    assert second.returncode == 0, second.describe()
    assert second.session_id == first.session_id and second.transcript_path == first.transcript_path
    recs = recording_subconscious.records()
    starts = [r["stdin"] for r in recs if r["argv"][1] == "session-start"]
    assert [s["source"] for s in starts] == ["startup", "resume"]
    stops = [r for r in recs if r["argv"][1] == "stop"]
    assert len(stops) == 2
    # What the Stop hook would do each time: process the lines after the saved cursor.
    seen1 = complete_lines(stops[0]["transcript_at_hook"])
    u1 = build_update(seen1, -1, first.session_id)
    seen2 = complete_lines(stops[1]["transcript_at_hook"])
    u2 = build_update(seen2, u1.cursor, first.session_id)
    assert u1.cursor == len(seen1) - 1 and u2.cursor == len(seen2) - 1
    assert "FIRST-TURN" in u1.payload and "SECOND-TURN" not in u1.payload
    assert "SECOND-TURN" in u2.payload and "FIRST-TURN" not in u2.payload
    assert "[Tool Result: Bash]\n2 notes.txt" in u2.payload
    assert u1.invalid_lines == () and u2.invalid_lines == ()


def _double_exiting(sandbox, tmp_path, code: int):
    write_recording_double(sandbox.bin_dir, tmp_path / "rec")
    script = sandbox.bin_dir / "subconscious"
    script.write_text(script.read_text() + "\nprint('LEAKED_STDOUT_OF_FAILED_HOOK')\nsys.exit(%d)\n" % code)


@pytest.mark.parametrize("code", [2, 1, 3])
def test_failing_subconscious_never_blocks(claude_sandbox, tmp_path, code):
    # Exit 2 from a hook would block the prompt / the tool call / the end of the turn; e.g. an
    # older `subconscious` whose argument parser does not know the event exits with 2.
    _double_exiting(claude_sandbox, tmp_path, code)
    target = claude_sandbox.project_dir / "hello.txt"
    target.write_text("The secret word is PAPAYA.\n")
    run = claude_sandbox.run("[[tool:Read %s]] [[text:It says PAPAYA.]] read it" % target, output_format="stream-json")
    assert run.returncode == 0, run.describe()
    assert run.result == "It says PAPAYA."
    assert run.seen_by_model("The secret word is PAPAYA.")      # the tool call was not blocked
    assert len(run.message_requests()) == 2                      # Stop did not send the model back to work
    assert not run.seen_by_model("LEAKED_STDOUT_OF_FAILED_HOOK")
    assert [r["argv"][1] for r in read_recordings(tmp_path / "rec")] == RUN
    assert {r["exit_code"] for r in _hook_responses(run)} == {1}


def test_hung_hook_is_cut_off_by_its_timeout(claude_sandbox, tmp_path):
    # A `subconscious` that hangs on pre-tool-use: Claude Code must cancel it after 5 s and go on.
    write_recording_double(claude_sandbox.bin_dir, tmp_path / "rec")
    script = claude_sandbox.bin_dir / "subconscious"
    script.write_text(script.read_text().replace(
        'event = sys.argv[2] if len(sys.argv) > 2 else ""',
        'event = sys.argv[2] if len(sys.argv) > 2 else ""\nif event == "pre-tool-use":\n    time.sleep(60)'))
    target = claude_sandbox.project_dir / "hello.txt"
    target.write_text("PAPAYA\n")
    run = claude_sandbox.run("[[tool:Read %s]] [[text:Done anyway.]] read it" % target,
                             output_format="stream-json", timeout=90)
    assert run.returncode == 0, run.describe()
    assert run.result == "Done anyway."
    pre = [r for r in _hook_responses(run) if r["hook_event"] == "PreToolUse"]
    assert [r["outcome"] for r in pre] == ["cancelled"]
    assert _processes_running(str(script)) == []  # the hung hook was killed, not left behind


def _processes_running(needle: str) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if needle in cmd:
            found.append(cmd)
    return found


def test_pipx_location_is_used_when_path_lacks_it(claude_sandbox, tmp_path):
    # Claude Code started from a desktop app often has a PATH without ~/.local/bin (pipx's default).
    write_recording_double(claude_sandbox.home / ".local" / "bin", tmp_path / "rec")
    run = claude_sandbox.run("[[text:ok]] hi", path=NO_SUBCONSCIOUS_PATH)
    assert run.returncode == 0, run.describe()
    recs = read_recordings(tmp_path / "rec")
    assert [r["argv"] for r in recs] == [["hook", "session-start"], ["hook", "user-prompt-submit"], ["hook", "stop"],
                                         ["hook", "session-end"]]
    assert recs[1]["stdin"]["prompt"] == "[[text:ok]] hi"
    assert run.seen_by_model("RECORDED_DOUBLE_PROMPT_CONTEXT")
