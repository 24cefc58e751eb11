"""The scripted model of the test harness: directives, Letta's message history, queue, HTTP protocol."""
from __future__ import annotations

import json
import threading
from pathlib import Path

import httpx
import pytest

from tests.harness.fake_llm import FakeLLMControl, decide, latest_user, parse_directives, serve

REC = Path(__file__).resolve().parents[1] / "fixtures" / "letta" / "chat_request_after_client_tool.json"


def test_directives_survive_xml_escaping_inside_a_transcript():
    text = ('<claude_code_session_update><transcript><message role="user">please REPLACE guidance: a =&gt; b'
            '</message>\n<message role="user">REMEMBER project_context: uses &lt;uv&gt;</message>\n'
            'CALL Grep {"pattern": "TODO"}\nSAY short &amp; sweet</transcript>')
    d = parse_directives(text)
    assert d["actions"] == [("memory_replace", {"label": "guidance", "old_string": "a", "new_string": "b"}),
                            ("memory_insert", {"label": "project_context", "new_string": "uses"}),
                            ("Grep", {"pattern": "TODO"})]
    assert d["say"] == "short & sweet"


def test_latest_user_skips_heartbeats_and_unwraps_json():
    msgs = [{"role": "user", "content": json.dumps({"type": "user_message", "message": "real text"})},
            {"role": "assistant", "content": "x"},
            {"role": "user", "content": json.dumps({"type": "heartbeat", "reason": "x"})}]
    assert latest_user(msgs) == (0, "real text")
    assert latest_user([{"role": "user", "content": [{"type": "text", "text": "parts"}]}]) == (0, "parts")


def test_history_recorded_from_letta_after_a_client_tool():
    rec = json.loads(REC.read_text())
    d = decide(rec["body"])
    assert d == {"kind": "text", "text": "Done: Read | results: alpha beta"}


def test_tool_directives_run_one_step_at_a_time_then_answer():
    tools = [{"type": "function", "function": {"name": n, "parameters": {"required": ["label"]}}}
             for n in ("memory_insert", "memory_replace")]
    msgs = [{"role": "user", "content": "REMEMBER a: x\nREPLACE a: x => y"}]
    assert decide({"messages": msgs, "tools": tools})["name"] == "memory_insert"
    msgs.append({"role": "assistant", "tool_calls": [{"function": {"name": "memory_insert"}}]})
    msgs.append({"role": "tool", "content": "ok"})
    assert decide({"messages": msgs, "tools": tools})["name"] == "memory_replace"
    msgs.append({"role": "assistant", "tool_calls": [{"function": {"name": "memory_replace"}}]})
    msgs.append({"role": "tool", "content": "ok2"})
    assert decide({"messages": msgs, "tools": tools})["text"] == \
        "Done: memory_insert, memory_replace | results: ok || ok2"


def test_unoffered_tool_and_errors():
    assert "not offered" in decide({"messages": [{"role": "user", "content": "CALL Read {}"}]})["text"]
    assert decide({"messages": [{"role": "user", "content": "LLM_ERROR 429"}]}) == {"kind": "error", "status": 429}


@pytest.fixture
def fake():
    srv = serve("127.0.0.1", 0, ["fake-model"])
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_openai_protocol_streaming_queue_and_log(fake):
    ctl = FakeLLMControl(fake)
    assert httpx.get(fake + "/v1/models").json()["data"][0]["id"] == "fake-model"
    tools = [{"type": "function", "function": {"name": "Read", "parameters": {"required": ["file_path"]}}}]
    body = {"model": "fake-model", "stream": True, "stream_options": {"include_usage": True}, "tools": tools,
            "messages": [{"role": "user", "content": 'CALL Read {"file_path": "/x"}'}]}
    lines = [ln for ln in httpx.post(fake + "/v1/chat/completions", json=body).text.splitlines() if ln]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(ln[6:]) for ln in lines[:-1]]
    args = "".join(c["choices"][0]["delta"].get("tool_calls", [{}])[0].get("function", {}).get("arguments", "")
                   for c in chunks if c["choices"])
    assert json.loads(args) == {"file_path": "/x"}
    assert chunks[-1]["usage"]["total_tokens"] > 0
    ctl.queue({"text": "from the queue"}, {"error": 502})
    plain = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]}
    assert httpx.post(fake + "/v1/chat/completions", json=plain).json()["choices"][0]["message"]["content"] == \
        "from the queue"
    assert httpx.post(fake + "/v1/chat/completions", json=plain).status_code == 502
    reply = httpx.post(fake + "/v1/chat/completions", json=plain).json()
    assert reply["choices"][0]["message"]["content"] == "ECHO: hi"
    emb = httpx.post(fake + "/v1/embeddings", json={"input": ["a", "b"], "dimensions": 8}).json()
    assert len(emb["data"]) == 2 and len(emb["data"][0]["embedding"]) == 8
    assert ctl.user_texts() == ['CALL Read {"file_path": "/x"}', "hi", "hi", "hi"]
    ctl.reset()
    assert ctl.requests() == []
