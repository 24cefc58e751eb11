"""Exactly-once delivery against the real Letta server (0.16.8), on what that server really does:

- an LLM error on the first step of a turn: the server keeps nothing of the message (not even with
  ``include_err``), so the worker's look-up finds it absent and sends it again;
- an LLM error after a step (a tool call) ran: the server keeps the user message and the step's messages,
  and ``GET /v1/runs/{id}`` says ``status: completed, stop_reason: llm_api_error`` (not ``failed``); the
  worker must keep the cursor, and re-deliver by reference, not by repeating the text;
- a long tool-heavy turn (30 server-side and 20 client-side tool calls, 122 messages in 21 runs) whose reply
  is lost: the worker must page through the whole turn from the newest message at the first send
  (``after``, ascending) and must not send the range again.

Real hook processes, the real detached worker, the real server; the scripted model (tests/harness/fake_llm.py)
calls the tools and fails on demand; tests/harness/fault_proxy.py loses replies. What counts is the
conversation read straight from the server: each transcript line in the agent's *completed* turns exactly
once (a completed re-delivery by reference completes the turn it names), and no update's text twice.
"""

from __future__ import annotations

import re
import time
import uuid

import httpx
import pytest

from subconscious.letta.messages import COMPLETE_STOP_REASONS, content_text
from tests.harness.hooks import conversation_messages
from tests.integration.test_faults import MESSAGES, Rig, proxy  # noqa: F401 (proxy: a fixture)

pytestmark = pytest.mark.letta

SERVER_TOOL_CALLS, CLIENT_TOOL_CALLS = 30, 20  # one long turn: memory_insert x30, then Read x20
KEY = re.compile(r'delivery="(\w+)"')


@pytest.fixture
def rig(tmp_path, proxy, letta_server, letta_agent, letta_env, fake_llm) -> Rig:
    r = Rig(tmp_path, proxy, letta_server.base_url, letta_agent["id"], letta_env, LETTA_SDK_TOOLS="read-only")
    (r.project / "README.md").write_text("# The project\n")
    yield r
    fake_llm.fail(None)


# ---------------------------------------------------------------- reading the conversation


def turns(base_url: str, conv: str) -> list[dict]:
    """Each user message of the conversation with its turn: {text, messages, run, completed}. A turn is the
    user message and what follows up to the next user message; the run of its last message says how it
    ended (each answer to a client-tool call is a run of its own)."""
    msgs = conversation_messages(base_url, conv)
    out: list[dict] = []
    for m in msgs:
        if m.get("message_type") == "user_message":
            out.append({"text": content_text(m.get("content")), "messages": [m]})
        elif out:
            out[-1]["messages"].append(m)
    with httpx.Client(base_url=base_url, timeout=30) as http:
        for t in out:
            run_id = t["messages"][-1].get("run_id") or t["messages"][0].get("run_id")
            run = http.get(f"/v1/runs/{run_id}").json() if run_id else {}
            stop = run.get("stop_reason")
            stop = stop.get("stop_reason") if isinstance(stop, dict) else stop
            t["run"] = (run.get("status"), stop)
            t["completed"] = run.get("status") == "completed" and (stop is None or stop in COMPLETE_STOP_REASONS)
    return out


def completed_count(ts: list[dict], needle: str) -> int:
    """How many completed turns processed the text ``needle``: turns on a message holding it, and turns on
    a re-delivery by reference (``<retry delivery="K"``) of a message holding it."""
    keys = {k for t in ts if needle in t["text"] for k in KEY.findall(t["text"])}
    n = sum(1 for t in ts if t["completed"] and needle in t["text"])
    n += sum(1 for t in ts if t["completed"] and "<retry delivery=" in t["text"] and needle not in t["text"]
             and set(KEY.findall(t["text"])) & keys)
    return n


def assert_each_line_once(rig: Rig) -> list[dict]:
    """Every turn's text: in exactly one user message, and processed by exactly one completed turn."""
    rig.wait_worker_idle()
    ts = turns(rig.server_url, rig.conversation())
    for token in rig.turns:
        for needle in (f"question {token}", f"answer {token}"):
            in_messages = sum(needle in t["text"] for t in ts)
            assert in_messages == 1, (needle, in_messages, [t["text"][:200] for t in ts], rig.log()[-3000:])
            assert completed_count(ts, needle) == 1, (needle, [(t["text"][:120], t["run"]) for t in ts])
    assert rig.cursor() == rig.transcript.line_count() - 1
    return ts


def long_turn(rig: Rig) -> str:
    token = f"long-{uuid.uuid4().hex[:10]}"
    text = (f"question {token}\n" + "".join(f"REMEMBER guidance: note {i} of {token}\n" for i in range(SERVER_TOOL_CALLS))
            + "".join('CALL Read {"file_path": "README.md"}\n' for _ in range(CLIENT_TOOL_CALLS)))
    rig.transcript.user(text).assistant(f"answer {token}").bookkeeping()
    rig.turns.append(token)
    return token


# ---------------------------------------------------------------- long tool-heavy turn, reply lost


@pytest.mark.parametrize("lost", ["first", "last"])
def test_a_long_tool_heavy_turn_whose_reply_is_lost_is_not_sent_again(rig: Rig, lost: str):
    """``first``: the reply to the update's own POST is lost (the server goes on until the model's first
    client-tool call, which then waits); ``last``: the reply to the 21st POST (the last tool results, on
    which the turn ends) is lost, so the worker never learns that the turn completed."""
    rig.start()
    token = long_turn(rig)
    rule = rig.proxy.drop_after_forward(method="POST", path=MESSAGES, count=1,
                                        skip=0 if lost == "first" else CLIENT_TOOL_CALLS)
    t0 = time.monotonic()
    rig.hook("stop")
    rig.wait_log(r"delivery failed, kept and retried later: .*connection to Letta at \S+ failed", timeout=240)
    rig.wait_worker_idle()
    first_round = time.monotonic() - t0
    assert rule.hits == 1
    assert rig.cursor() == -1  # the worker does not know the turn completed: nothing is skipped

    rig.proxy.clear()
    posts_before = len(rig.proxy.seen("POST", MESSAGES))
    rig.turn("after")
    rig.hook("stop")
    rig.wait_cursor(rig.transcript.line_count() - 1, timeout=240)
    ts = assert_each_line_once(rig)
    log = rig.log()
    assert re.search(r"lines 0-\d+ had arrived already \(delivery \w+\); not sent again", log), log[-3000:]
    if lost == "first":
        assert "answering the waiting tool calls" in log
    long = next(t for t in ts if f"question {token}" in t["text"])
    n_msgs = len(long["messages"])
    runs = len({m.get("run_id") for m in long["messages"]})
    # the whole turn is in the conversation, every tool call answered once
    kinds = [m.get("message_type") for m in long["messages"]]
    assert kinds.count("approval_request_message") == CLIENT_TOOL_CALLS
    assert kinds.count("tool_call_message") == SERVER_TOOL_CALLS
    assert n_msgs >= 2 * SERVER_TOOL_CALLS + 3 * CLIENT_TOOL_CALLS + 2
    if lost == "last":  # the second round sent only the newer lines: one POST, no tool results again
        assert len(rig.proxy.seen("POST", MESSAGES)) - posts_before == 1
    print(f"\nlong turn ({lost} reply lost): {n_msgs} messages in {runs} runs; first round {first_round:.1f} s")


# ---------------------------------------------------------------- LLM errors


def test_an_llm_error_after_the_server_stored_the_update_is_retried_by_reference(rig: Rig, fake_llm):
    """The model's first step (a memory tool) runs, then every try of the next step fails: the server keeps
    the user message and the step, and says the run completed with ``llm_api_error``. The cursor stays;
    the next round re-delivers by reference: the agent gets the lines once, the text is not repeated."""
    rig.start()
    token = rig.turn("stored")
    fake_llm.queue({"tool": "memory_insert", "args": {"label": "guidance", "new_string": f"kept {token}"}},
                   {"error": 500, "times": 3})  # Letta's OpenAI client tries each request 3 times
    rig.hook("stop")
    rig.wait_log(r"delivery failed, kept and retried later: .*the Letta agent run failed")
    rig.wait_worker_idle()
    assert rig.cursor() == -1
    ts = turns(rig.server_url, rig.conversation())
    stored = [t for t in ts if f"question {token}" in t["text"]]
    assert len(stored) == 1 and not stored[0]["completed"] and stored[0]["run"] == ("completed", "llm_api_error")
    assert [m["message_type"] for m in stored[0]["messages"]] == ["user_message", "tool_call_message",
                                                                   "tool_return_message"]

    rig.turn("after")
    rig.hook("stop")
    rig.wait_cursor(rig.transcript.line_count() - 1)
    ts = assert_each_line_once(rig)
    log = rig.log()
    assert re.search(r"stored but not processed \(run \S+ ended completed \(llm_api_error\)\); re-delivered by reference",
                     log), log[-3000:]
    retries = [t for t in ts if "<claude_code_session_update_retry>" in t["text"]]
    assert len(retries) == 1 and retries[0]["completed"]
    assert sum(f"kept {token}" in t["text"] for t in ts) == 0  # the memory edit was not asked for again


def test_an_llm_error_on_the_first_step_leaves_nothing_stored_and_the_update_is_sent_again(rig: Rig, fake_llm):
    """Every try of the first step fails: the server keeps nothing of the message (the look-up finds it
    absent), so the lines are sent again, and the conversation holds them once."""
    rig.start()
    token = rig.turn("unstored")
    fake_llm.fail(500)
    rig.hook("stop")
    rig.wait_log(r"delivery failed, kept and retried later: .*the Letta agent run failed")
    rig.wait_worker_idle()
    assert rig.cursor() == -1
    assert not any(f"question {token}" in t for t in rig.user_texts())  # nothing of it was kept
    with httpx.Client(base_url=rig.server_url, timeout=30) as http:
        errs = http.get(f"/v1/conversations/{rig.conversation()}/messages",
                        params={"limit": 100, "order": "asc", "include_err": "true"}).json()
    assert not any(f"question {token}" in content_text(m.get("content")) for m in errs)
    fake_llm.fail(None)
    rig.turn("after")
    rig.hook("stop")
    rig.wait_cursor(rig.transcript.line_count() - 1)
    assert_each_line_once(rig)
