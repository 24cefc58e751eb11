"""subconscious.delivery.transcript on transcripts captured from the real Claude Code CLI, and examples."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from subconscious.delivery.transcript import (RESULT_CUT, THINKING_CUT, AssistantText, Summary, Thinking, ToolResult,
                                     ToolUse, UserText, build_update, complete_lines, cut, parse_line, redact,
                                     session_start_message, session_update, tool_summary)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "claude-code"
SCENARIOS = sorted(p.name for p in FIXTURES.iterdir() if (p / "transcript.jsonl").exists())


def lines_of(scenario: str) -> list[str]:
    return complete_lines((FIXTURES / scenario / "transcript.jsonl").read_text(encoding="utf-8"))


def meta(scenario: str) -> dict:
    return json.loads((FIXTURES / scenario / "scenario.json").read_text())


def messages(payload: str) -> list[tuple[str, str]]:
    root = ET.fromstring(payload)
    return [(m.get("role"), m.text.strip("\n")) for m in root.find("transcript")]


def test_all_scenarios_present():
    assert set(SCENARIOS) >= {"plain", "read-tool", "bash-tool", "tool-error", "multi-tool", "secrets",
                              "resume", "compact"}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_real_transcript_parses_into_a_well_formed_update(scenario):
    lines = lines_of(scenario)
    statuses = [parse_line(line).status for line in lines]
    assert "invalid" not in statuses
    u = build_update(lines, -1, meta(scenario)["session_id"])
    assert u.cursor == len(lines) - 1 and not u.more and u.invalid_lines == ()
    root = ET.fromstring(u.payload)  # well-formed XML
    assert root.tag == "claude_code_session_update"
    assert root.findtext("session_id") == meta(scenario)["session_id"]
    got = messages(u.payload)
    # every prompt the user typed is there, and every final answer
    for run in meta(scenario)["runs"]:
        if not run["prompt"].startswith("/"):
            assert ("user", redact(run["prompt"])) in got
        if run["result"]:
            assert ("claude_code", run["result"]) in got
    # bookkeeping never leaks into the payload
    for junk in ("api-request", "queue-operation", "hook_success", "stop_hook_summary", "cost-state",
                 "You are powered by the model", "# Environment"):
        assert junk not in u.payload


def test_read_tool_result_is_labelled_with_its_tool():
    got = messages(build_update(lines_of("read-tool"), -1, "s").payload)
    project = meta("read-tool")["project_dir"]
    assert ("claude_code", "[Tool: Read] %s/notes.txt" % project) in got
    result = [t for r, t in got if t.startswith("[Tool Result: Read]")]
    assert result == ["[Tool Result: Read]\n1\tBuild notes\n2\tThe build uses make & ninja.\n"
                      "3\tRun <make test> before pushing.\n4\t"]
    assert "make &amp; ninja" in build_update(lines_of("read-tool"), -1, "s").payload  # escaped on the wire


def test_bash_and_errors():
    got = messages(build_update(lines_of("bash-tool"), -1, "s").payload)
    assert ("claude_code", "[Tool: Bash] printf 'a<b>&c \u00fc\\n' && ls") in got  # as the CLI recorded it
    assert any(t.startswith("[Tool Result: Bash]\na<b>&c ü") for _, t in got)
    got = messages(build_update(lines_of("tool-error"), -1, "s").payload)
    errors = [t.split("\n")[0] for _, t in got if t.startswith("[Tool Error")]
    assert errors == ["[Tool Error: Read]", "[Tool Error: Bash]"]
    assert any("File does not exist" in t for _, t in got)


def test_several_tools_in_order():
    got = messages(build_update(lines_of("multi-tool"), -1, "s").payload)
    labels = [t.split("\n")[0].split("]")[0] + "]" for _, t in got if t.startswith("[Tool")]
    assert labels == ["[Tool: Read]", "[Tool Result: Read]", "[Tool: Bash]", "[Tool Result: Bash]",
                      "[Tool: Edit]", "[Tool Error: Edit]"]


def test_thinking_from_real_run():
    got = messages(build_update(lines_of("plain"), -1, "s").payload)
    assert ("claude_code", "[Thinking]: The user wants a greeting; keep it short.") in got


def test_secrets_do_not_leave_the_machine():
    u = build_update(lines_of("secrets"), -1, "s")
    for secret in ("hunter2", "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx", "s3cretPass",
                   "sk-proj-0123456789abcdefghijABCDEFGHIJ", "AKIAIOSFODNN7EXAMPLE"):
        assert secret in "\n".join(lines_of("secrets"))  # the fixture really holds it
        assert secret not in u.payload
    assert "password=[REDACTED]" in u.payload and "postgres://app:[REDACTED]@db.internal" in u.payload


def test_compaction_summary_and_slash_command():
    """The compaction summary summarises lines this session delivered itself: it is not sent again (it was,
    before issue 10). The /compact command and its output are not the user's words."""
    lines = lines_of("compact")
    got = messages(build_update(lines, -1, "s").payload)
    assert not any(t.startswith("[Session Summary]: ") for _, t in got)
    assert sum("Read my notes." in t for _, t in got) == 1  # what the summary covers went out itself
    assert not any("local-command-caveat" in t for _, t in got)  # isMeta lines skipped
    assert any(r == "system" and t.startswith("[Command: /compact") for r, t in got) and ("system", "[Command output]: Compacted (ctrl+o to see full summary)") in got
    assert not any(r == "user" and ("<command-name>" in t or "local-command-stdout" in t) for r, t in got)
    # a summary at the top of a transcript (a session continued from one this agent may not have seen) is kept
    top = [l for l in lines if '"isCompactSummary":true' in l.replace(" ", "")]
    assert top
    again = messages(build_update(top + lines[55:56], -1, "s").payload)
    summaries = [t for r, t in again if t.startswith("[Session Summary]: ")]
    assert len(summaries) == 1 and "build uses make & ninja" in summaries[0]


@pytest.mark.parametrize("scenario", ["resume", "compact"])
def test_stop_by_stop_cursor_matches_one_shot(scenario):
    lines = lines_of(scenario)
    cursor, chunks = -1, []
    for run in meta(scenario)["runs"]:
        if run["stop_line_count"] is None:
            continue  # /compact fires no Stop
        seen = lines[: run["stop_line_count"]]
        u = build_update(seen, cursor, "s")
        assert u.cursor == len(seen) - 1
        chunks += list(u.messages)
        cursor = u.cursor
    tail = build_update(lines, cursor, "s")  # lines written after the last Stop (bookkeeping)
    chunks += list(tail.messages)
    assert chunks == list(build_update(lines, -1, "s").messages)


def test_hook_inputs_carry_what_the_hooks_need():
    for scenario in SCENARIOS:
        session = meta(scenario)["session_id"]
        for f in sorted((FIXTURES / scenario / "hook-inputs").iterdir()):
            data = json.loads(f.read_text())
            event = f.stem.split("-", 1)[1]
            assert data["session_id"] == session
            assert data["transcript_path"].endswith("/%s.jsonl" % session)
            assert data["cwd"] == meta(scenario)["project_dir"]
            need = {"session-start": {"source"}, "user-prompt-submit": {"prompt"},
                    "pre-tool-use": {"tool_name", "tool_input", "tool_use_id"},
                    "stop": {"stop_hook_active", "last_assistant_message"}}[event]
            assert need <= set(data), (f, data)


# --------------------------------------------------------------------------- examples

def _line(kind: str, content, **extra) -> str:
    role = "assistant" if kind == "assistant" else "user"
    return json.dumps({"type": kind, "message": {"role": role, "content": content}, **extra})


def test_cut_lengths():
    assert cut("x" * RESULT_CUT, RESULT_CUT) == "x" * RESULT_CUT
    assert cut("x" * (RESULT_CUT + 1), RESULT_CUT) == "x" * RESULT_CUT + "... [truncated]"
    lines = [_line("assistant", [{"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/a"}}]),
             _line("user", [{"type": "tool_result", "tool_use_id": "t1", "content": "y" * 5000}]),
             _line("assistant", [{"type": "thinking", "thinking": "z" * 900, "signature": "s"}])]
    got = [m.text for m in build_update(lines, -1, "s").messages]
    assert got[1] == "[Tool Result: Read]\n" + "y" * RESULT_CUT + "... [truncated]"
    assert got[2] == "[Thinking]: " + "z" * THINKING_CUT + "... [truncated]"


@pytest.mark.parametrize("name,tool_input,expected", [
    ("Read", {"file_path": "/a/b.py", "limit": 5}, "/a/b.py"),
    ("Edit", {"file_path": "/a/b.py", "old_string": "x"}, "/a/b.py"),
    ("Write", {"file_path": "/w", "content": "c"}, "/w"),
    ("Bash", {"command": "ls -la", "description": "list"}, "ls -la"),
    ("Bash", {"command": "e" * 150}, "e" * 100 + "... [truncated]"),
    ("Glob", {"pattern": "**/*.py"}, "**/*.py"),
    ("Grep", {"pattern": "def main", "path": "src"}, "def main"),
    ("WebFetch", {"url": "https://example.org", "prompt": "p"}, "https://example.org"),
    ("WebSearch", {"query": "letta memory"}, "letta memory"),
    ("Task", {"description": "explore", "prompt": "p"}, "explore"),
    ("Agent", {"description": "explore", "prompt": "p"}, "explore"),
    ("TodoWrite", {"todos": []}, '{"todos":[]}'),
    ("Mystery", {"k": "v" * 200}, ('{"k":"' + "v" * 200 + '"}')[:100] + "... [truncated]"),
    ("Read", {"limit": 3}, '{"limit":3}'),
])
def test_tool_summaries(name, tool_input, expected):
    assert tool_summary(name, tool_input) == expected


def test_parse_line_kinds():
    assert parse_line("").status == "blank"
    assert parse_line("{not json").status == "invalid"
    assert parse_line("[1, 2]").status == "invalid"
    for skipped in ({"type": "file-history-snapshot", "snapshot": {}}, {"type": "system", "subtype": "x"},
                    {"type": "attachment", "attachment": {"type": "hook_success"}}, {"type": "last-prompt"},
                    {"type": "user", "isMeta": True, "message": {"role": "user", "content": "caveat"}}):
        assert parse_line(json.dumps(skipped)).status == "skipped"
    assert parse_line(json.dumps({"type": "summary", "summary": "S"})).entries == (Summary("S"),)
    p = parse_line(_line("user", [{"type": "text", "text": "hi"}, {"type": "image", "source": {}},
                                  {"type": "tool_result", "tool_use_id": "t", "is_error": True,
                                   "content": [{"type": "text", "text": "boom"}]}]))
    assert p.entries == (UserText("hi\n[image]"), ToolResult("t", "boom", True))
    p = parse_line(_line("assistant", [{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "ok"},
                                       {"type": "tool_use", "id": "t", "name": "Bash", "input": {"command": "x"}}]))
    assert p.entries == (Thinking("hm"), AssistantText("ok"), ToolUse("t", "Bash", {"command": "x"}))


def test_invalid_lines_are_counted_not_fatal():
    lines = [_line("user", "one"), "{garbage", "", _line("user", "two"), "null"]
    u = build_update(lines, -1, "s")
    assert u.invalid_lines == (1, 4) and u.cursor == 4
    assert [m.text for m in u.messages] == ["one", "two"]


def test_partial_last_line_waits_for_next_time():
    full = _line("user", "done") + "\n" + _line("user", "half")
    lines = complete_lines(full[:-10])
    assert len(lines) == 1
    payload, cursor = session_update(lines, -1, "s")
    assert cursor == 0 and "half" not in payload
    payload, cursor = session_update(complete_lines(full + "\n"), cursor, "s")
    assert cursor == 1 and "half" in payload and "done" not in payload


def test_cursor_edges():
    lines = [_line("user", "a"), json.dumps({"type": "last-prompt"})]
    assert session_update(lines, 1, "s") == (None, 1)            # nothing new
    assert session_update(lines, 7, "s") == (None, 7)            # past the end: as it is (the worker checks line identity)
    assert session_update(lines, -5, "s")[1] == 1                # below -1 means from the start
    assert session_update(lines[1:], -1, "s") == (None, 0)       # only bookkeeping: advance, no payload
    assert session_update([], -1, "s") == (None, -1)


def test_tool_name_found_before_the_cursor():
    lines = [_line("assistant", [{"type": "tool_use", "id": "toolu_X", "name": "Grep", "input": {"pattern": "p"}}]),
             _line("user", [{"type": "tool_result", "tool_use_id": "toolu_X", "content": "hit"}]),
             _line("user", [{"type": "tool_result", "tool_use_id": "toolu_unknown", "content": "?"}])]
    texts = [m.text for m in build_update(lines, 0, "s").messages]
    assert texts == ["[Tool Result: Grep]\nhit", "[Tool Result: unknown]\n?"]


def test_max_chars_splits_into_several_payloads():
    lines = [_line("user", "m%d " % i + "x" * 300) for i in range(10)]
    cursor, seen, rounds = -1, [], 0
    while True:
        u = build_update(lines, cursor, "s", max_chars=1000)
        if u.payload is None:
            break
        seen += [m.text for m in u.messages]
        cursor, rounds = u.cursor, rounds + 1
        assert len(u.messages) <= 4
    assert seen == [m.text for m in build_update(lines, -1, "s").messages] and rounds >= 3


def test_session_start_message():
    msg = session_start_message(project="my<app>", path="/home/a/my<app>", session_id="abc",
                                timestamp="2026-01-01T00:00:00Z", sdk_tools_mode="read-only", machine="laptop")
    root = ET.fromstring(msg)
    assert root.tag == "claude_code_session_start"
    assert [c.tag for c in root] == ["project", "path", "session_id", "timestamp", "machine", "sdk_tools_mode",
                                     "context"]
    assert root.findtext("project") == "my<app>" and root.findtext("sdk_tools_mode") == "read-only"
    assert "read-only" in root.findtext("context") or "cannot change files" in root.findtext("context")
    for mode, words in (("full", "full tool access"), ("off", "no tools")):
        ctx = ET.fromstring(session_start_message(project="p", path="/p", session_id="s", timestamp="t",
                                                  sdk_tools_mode=mode)).findtext("context")
        assert words in ctx
