"""execute(): the mode's policy, argument checks, the per-call timeout, redaction and the result cap; the
tool definitions each mode offers; reading tool calls out of approval requests."""
from __future__ import annotations

import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from subconscious.letta.messages import ToolCallRequest
from subconscious.agent_tools.limits import Limits
from subconscious.agent_tools.loop import requests_of
from subconscious.agent_tools.modes import AGENT_TEXT, CLAUDE_LINE, MODES, allowed_tools
from subconscious.agent_tools.registry import SCHEMAS, ToolContext, client_tools, execute, finish_text
from subconscious.delivery.transcript import REDACTED, find_secrets
from tests.harness.sizes import examples


def req(name: str, args: dict | None, call_id: str = "call_1") -> ToolCallRequest:
    raw = json.dumps(args) if args is not None else "not json"
    return ToolCallRequest(call_id, name, args, raw)


@pytest.fixture
def proj(tmp_path):
    p = tmp_path / "proj"
    p.mkdir()
    (p / "a.txt").write_text("hello\n")
    (p / "conf.ini").write_text("password = hunter2hunter2\napi_key=sk-live-abcdefghijklmnop1234\nplain = 1\n")
    (p / "slow.txt").write_text("a" * 40 + "b\n")
    return p


def test_each_mode_offers_its_tools():
    assert [t.name for t in client_tools("read-only")] == ["Read", "Grep", "Glob"]
    assert client_tools("off") == []
    full = [t.name for t in client_tools("full")]
    assert full[:5] == ["Read", "Grep", "Glob", "Write", "Edit"]
    for t in client_tools("full"):
        body = t.to_json()
        assert body["parameters"]["type"] == "object" and set(body["parameters"]["required"]) <= set(
            body["parameters"]["properties"])
        assert body["description"]
    assert set(MODES) == set(AGENT_TEXT) == set(CLAUDE_LINE)
    assert allowed_tools("nonsense") == ()
    assert set(SCHEMAS) == set(allowed_tools("full"))


def test_read_runs_in_read_only_mode(proj):
    out = execute(req("Read", {"file_path": "a.txt"}), ToolContext.for_session("read-only", str(proj)))
    assert out.result.status == "success" and out.ran and "hello" in out.result.output
    assert out.result.tool_call_id == "call_1"


@pytest.mark.parametrize("mode,name,args", [
    ("off", "Read", {"file_path": "a.txt"}),
    ("off", "Glob", {"pattern": "*"}),
    ("read-only", "Write", {"file_path": "new.txt", "content": "x"}),
    ("read-only", "Edit", {"file_path": "a.txt", "old_string": "hello", "new_string": "bye"}),
    ("read-only", "Bash", {"command": "touch pwned"}),
    ("full", "WebFetch", {"url": "http://example.com"}),
    ("read-only", "rm_rf", {}),
])
def test_a_tool_the_mode_does_not_allow_is_refused_and_not_run(proj, mode, name, args):
    before = sorted(p.name for p in proj.iterdir())
    out = execute(req(name, args), ToolContext.for_session(mode, str(proj)))
    assert out.result.status == "error" and not out.ran
    assert f"LETTA_SDK_TOOLS={mode}" in out.result.output and "not run" in out.result.output
    assert sorted(p.name for p in proj.iterdir()) == before
    assert (proj / "a.txt").read_text() == "hello\n"


def test_bad_arguments_and_unknown_project_are_errors(proj, tmp_path):
    out = execute(req("Read", None), ToolContext.for_session("read-only", str(proj)))
    assert out.result.status == "error" and "not a JSON object" in out.result.output
    out = execute(req("Read", {"file_path": "a.txt"}), ToolContext.for_session("read-only", None))
    assert out.result.status == "error" and "project directory is not known" in out.result.output
    out = execute(req("Read", {"file_path": "a.txt"}), ToolContext.for_session("read-only", str(tmp_path / "gone")))
    assert out.result.status == "error" and "does not exist" in out.result.output
    out = execute(req("Read", {"file_path": 42}), ToolContext.for_session("read-only", str(proj)))
    assert out.result.status == "error" and "must be a string" in out.result.output


def test_secrets_in_results_are_redacted(proj):
    out = execute(req("Read", {"file_path": "conf.ini"}), ToolContext.for_session("read-only", str(proj)))
    text = out.result.output
    assert "hunter2hunter2" not in text and "sk-live-abcdefghijklmnop1234" not in text
    assert text.count(REDACTED) == 2 and "plain = 1" in text
    out = execute(req("Grep", {"pattern": "api_key"}), ToolContext.for_session("read-only", str(proj)))
    assert "sk-live" not in out.result.output and REDACTED in out.result.output


def test_a_call_that_runs_too_long_is_answered_with_an_error(proj):
    lim = Limits(call_timeout=0.5)
    ctx = ToolContext.for_session("read-only", str(proj), lim)
    t0 = time.monotonic()
    out = execute(req("Grep", {"pattern": "(a+)+$"}), ctx)  # catastrophic backtracking on slow.txt
    took = time.monotonic() - t0
    assert out.result.status == "error" and "did not finish within 0.5 s" in out.result.output
    assert took < 10


class SteppingClock:
    """``time`` as the tools see it, but ``monotonic()`` moves 1 ms per call: the deadline passes after a
    fixed number of checks, however fast the machine is (everything else is the real ``time``)."""

    def __init__(self, step: float = 0.001):
        self.now, self.step = 1000.0, step

    def monotonic(self) -> float:
        self.now += self.step
        return self.now

    def __getattr__(self, name):
        return getattr(time, name)


def test_grep_stops_cooperatively_at_the_deadline(tmp_path, monkeypatch):
    from subconscious.agent_tools import confine, readers, registry

    p = tmp_path / "many"
    p.mkdir()
    for i in range(300):
        (p / f"f{i}.txt").write_text("x\n" * 2000)
    clock = SteppingClock()
    for module in (registry, readers, confine):
        monkeypatch.setattr(module, "time", clock)
    limits = Limits(call_timeout=0.05, max_matches=10**9)  # 50 clock readings: far fewer than 300 files need
    ctx = ToolContext.for_session("read-only", str(p), limits)
    # what the isolated child runs (in-process here, so the clock is the stepping one on every platform)
    kind, text = registry.run_tool("Grep", ctx.root.given, {"pattern": "x", "output_mode": "count"}, limits,
                                   limits.call_timeout)
    assert kind == "ok" and "[stopped at the time limit; results are partial]" in text
    assert 0 < text.count(".txt:2000\n") < 300  # partial indeed: some files counted, not all


secret_values = st.one_of(
    st.from_regex(r"sk-[A-Za-z0-9]{20,30}", fullmatch=True),
    st.from_regex(r"ghp_[A-Za-z0-9]{24,30}", fullmatch=True),
    st.from_regex(r"AKIA[0-9A-Z]{16}", fullmatch=True),
)
filler = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=300)


@settings(max_examples=examples(200), deadline=None)
@given(filler, secret_values, filler, st.integers(50, 2000))
def test_finish_text_never_lets_a_secret_through_and_respects_the_cap(before, secret, after, cap):
    lim = Limits(max_result_chars=cap)
    text = before + " " + secret + " " + after
    out = finish_text(text, lim)
    assert secret not in out
    assert len(out) <= cap + 60
    assert find_secrets(out) == [] or all(out[a:b].startswith(REDACTED) for a, b in find_secrets(out))


def test_finish_text_cuts_with_a_note():
    out = finish_text("z" * 50_000, Limits(max_result_chars=1000))
    assert out.startswith("z" * 1000) and out.endswith("[... result cut at 1,000 characters]")


def test_requests_of_reads_single_and_parallel_calls():
    msgs = [
        {"message_type": "assistant_message", "content": "x"},
        {"message_type": "approval_request_message", "id": "m1",
         "tool_call": {"name": "Read", "arguments": "{\"file_path\": \"a\"}", "tool_call_id": "c1"},
         "tool_calls": [{"name": "Read", "arguments": "{\"file_path\": \"a\"}", "tool_call_id": "c1"},
                        {"name": "Grep", "arguments": "{\"pattern\": \"b\"}", "tool_call_id": "c2"}]},
        {"message_type": "approval_request_message", "id": "m2",
         "tool_call": {"name": "Glob", "arguments": "{oops", "tool_call_id": "c3"}},
        {"message_type": "approval_request_message", "id": "m3", "tool_call": {"name": "Read"}},
    ]
    got = requests_of(msgs)
    assert [(r.tool_call_id, r.name) for r in got] == [("c1", "Read"), ("c2", "Grep"), ("c3", "Glob")]
    assert got[0].arguments == {"file_path": "a"} and got[2].arguments is None
