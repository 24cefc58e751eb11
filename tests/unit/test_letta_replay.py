"""The client against responses recorded from the real Letta 0.16.8 server (tests/fixtures/letta/*.json,
made by tests/fixtures/letta/record_letta.py), replayed through httpx.MockTransport; plus fault injection
and the API key's secrecy."""
from __future__ import annotations

import json
import logging
import traceback
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from subconscious.letta.client import LettaClient
from subconscious.letta.errors import LettaAuthError, LettaConnectionError, LettaError, LettaNotFoundError, \
    LettaProtocolError, LettaServerError, LettaStreamError, LettaTimeoutError
from subconscious.letta.messages import ClientTool, ToolResult
from tests.harness.sizes import examples

REC = Path(__file__).resolve().parents[1] / "fixtures" / "letta"
BASE = "http://letta.test:8283"
KEY = "sk-let-Zq81xYtopSecretValue42"
READ_TOOL = ClientTool("Read", "Read a text file from the developer's machine.",
                       {"type": "object", "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]})


def load(name: str) -> list[dict]:
    return json.loads((REC / f"{name}.json").read_text())


class Replay:
    """Serves a recording in order; each request must match the recorded method, path, params and JSON body."""

    def __init__(self, name: str, chunk: int | None = None):
        self.exchanges = load(name)
        self.i = 0
        self.chunk = chunk
        self.seen: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        request.read()
        self.seen.append(request)
        assert self.i < len(self.exchanges), f"unexpected extra request {request.method} {request.url}"
        rec = self.exchanges[self.i]
        self.i += 1
        exp = rec["request"]
        assert (request.method, request.url.path) == (exp["method"], exp["path"])
        assert dict(request.url.params) == exp["params"]
        if isinstance(exp["body"], dict):
            assert json.loads(request.content) == exp["body"]
        resp = rec["response"]
        data = resp["text"].encode()
        if self.chunk:
            pieces = [data[i:i + self.chunk] for i in range(0, len(data), self.chunk)]
            return httpx.Response(resp["status"], headers={"content-type": resp["content_type"]},
                                  stream=httpx.ByteStream(b"") if not pieces else _Chunks(pieces))
        return httpx.Response(resp["status"], headers={"content-type": resp["content_type"]}, content=data)

    def done(self) -> bool:
        return self.i == len(self.exchanges)


class _Chunks(httpx.SyncByteStream):
    def __init__(self, pieces):
        self.pieces = pieces

    def __iter__(self):
        yield from self.pieces


def client_for(handler, key: str | None = None) -> LettaClient:
    return LettaClient(BASE, key, transport=httpx.MockTransport(handler))


def ids_of(name: str) -> dict:
    """The agent and conversation ids used in a recording."""
    ex = load("setup")
    agent = json.loads(ex[2]["response"]["text"])["agent_ids"][0]
    conv = json.loads(ex[5]["response"]["text"])["id"]
    return {"agent": agent, "conv": conv}


IDS = ids_of("setup")
AF = (Path(__file__).resolve().parents[2] / "subconscious" / "data" / "Subconscious.af").read_bytes()


def test_setup_sequence_parses():
    rp = Replay("setup")
    with client_for(rp) as c:
        assert c.health()["version"] == "0.16.8"
        handles = [m["handle"] for m in c.list_models()]
        assert "openai-proxy/fake-model" in handles
        agent_id = c.import_agent_file(AF, model="openai-proxy/fake-model")[0]
        agent = c.get_agent(agent_id)
        assert agent["name"] == "Subconscious"
        assert sorted(b["label"] for b in agent["blocks"]) == sorted([
            "core_directives", "guidance", "user_preferences", "project_context", "session_patterns",
            "pending_items", "self_improvement", "tool_guidelines"])
        patched = c.set_agent_model(agent_id, "openai-proxy/fake-model", 24000)
        assert patched["llm_config"]["context_window"] == 24000
        assert c.create_conversation(agent_id)["id"].startswith("conv-")
    assert rp.done()
    multipart = rp.seen[2]
    assert b'name="append_copy_suffix"\r\n\r\nfalse' in multipart.content
    assert b'filename="Subconscious.af"' in multipart.content


@given(st.integers(min_value=1, max_value=400))
@settings(max_examples=examples(25), suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_memory_turn_streams_in_any_chunking(chunk):
    rp = Replay("memory_turn", chunk=chunk)
    seen = []
    with client_for(rp) as c:
        r = c.send_message_streaming(IDS["conv"], "Note this.\nREMEMBER user_preferences: prefers tabs\nSAY noted",
                                     on_item=seen.append)
        assert r.stop_reason == "end_turn" and r.text == "noted"
        calls = r.of_type("tool_call_message")
        assert calls[0]["tool_call"]["name"] == "memory_insert"
        assert any(i["message_type"] == "ping" for i in seen)  # on_item sees everything, pings included
        assert r.usage["step_count"] == 2
        blocks = {b["label"]: b["value"] for b in c.get_agent(IDS["agent"])["blocks"]}
        assert "prefers tabs" in blocks["user_preferences"]
        msgs = c.list_messages(IDS["conv"], limit=5)
        assert msgs[0]["message_type"] == "assistant_message" and len(msgs) == 5
    assert rp.done()


def test_non_streaming_turn():
    with client_for(Replay("plain_turn")) as c:
        r = c.send_message(IDS["conv"], "hello there")
    assert r.text == "ECHO: hello there" and r.stop_reason == "end_turn"


def test_client_tool_round_trip():
    rp = Replay("client_tool")
    with client_for(rp) as c:
        r = c.send_message_streaming(IDS["conv"], 'CALL Read {"file_path": "/tmp/notes.txt"}', client_tools=[READ_TOOL])
        assert r.requires_approval
        (req,) = r.approval_requests
        assert (req.name, req.arguments) == ("Read", {"file_path": "/tmp/notes.txt"})
        r2 = c.send_tool_results(IDS["conv"], [ToolResult(req.tool_call_id, "line one\nline two")],
                                 client_tools=[READ_TOOL])
        assert r2.stop_reason == "end_turn" and "line one" in r2.text
        kinds = [m["message_type"] for m in c.list_messages(IDS["conv"], limit=6)]
        assert {"approval_request_message", "approval_response_message", "tool_return_message"} <= set(kinds)
    assert rp.done()


def test_llm_errors_streaming_and_not():
    with client_for(Replay("llm_error")) as c:
        with pytest.raises(LettaStreamError) as exc:
            c.send_message_streaming(IDS["conv"], "LLM_ERROR 503")
        assert exc.value.partial.stop_reason == "llm_api_error"
        assert "503" in str(exc.value)
        with pytest.raises(LettaServerError) as exc2:
            c.send_message(IDS["conv"], "LLM_ERROR 500")
        assert exc2.value.status == 500 and "llm_error" in str(exc2.value)


def test_not_found_errors_say_what_to_check():
    with client_for(Replay("not_found")) as c:
        with pytest.raises(LettaNotFoundError, match="check the id"):
            c.get_agent("agent-00000000-0000-4000-8000-000000000000")
        with pytest.raises(LettaNotFoundError, match="not offered"):
            c.set_agent_model(IDS["agent"], "nonexistent/model")


# ---------------------------------------------------------------- fault injection

def _recorded_stream() -> str:
    return load("memory_turn")[0]["response"]["text"]


@pytest.mark.parametrize("cut", [0.3, 0.6, 0.9])
def test_stream_cut_mid_run_is_a_protocol_error(cut):
    text = _recorded_stream()
    body = text[: int(len(text) * cut)]
    body = body[: body.find('"stop_reason"')] if '"stop_reason"' in body else body
    with client_for(lambda r: httpx.Response(200, headers={"content-type": "text/event-stream"}, text=body)) as c:
        with pytest.raises(LettaProtocolError, match="ended before"):
            c.send_message_streaming("conv-1", "x")


def test_garbled_stream_is_a_protocol_error():
    text = _recorded_stream().replace('"message_type":"assistant_message"', 'garbage{', 1)
    with client_for(lambda r: httpx.Response(200, headers={"content-type": "text/event-stream"}, text=text)) as c:
        with pytest.raises(LettaProtocolError, match="not JSON"):
            c.send_message_streaming("conv-1", "x")


def test_html_instead_of_stream_is_a_protocol_error():
    with client_for(lambda r: httpx.Response(200, headers={"content-type": "text/html"}, text="<html>")) as c:
        with pytest.raises(LettaProtocolError, match="expected an event stream"):
            c.send_message_streaming("conv-1", "x")
        with pytest.raises(LettaProtocolError, match="not JSON"):
            c.list_models()


@pytest.mark.parametrize("exc,kind", [(httpx.ConnectError("refused"), LettaConnectionError),
                                      (httpx.ReadTimeout("slow"), LettaTimeoutError),
                                      (httpx.RemoteProtocolError("peer closed"), LettaConnectionError)])
def test_transport_failures_map_to_letta_errors(exc, kind):
    def boom(request):
        raise exc
    with client_for(boom) as c:
        with pytest.raises(kind) as e1:
            c.get_agent("agent-00000000-0000-4000-8000-000000000000")
        with pytest.raises(kind):
            c.send_message_streaming("conv-1", "x")
    assert "letta.test" in str(e1.value)


def test_every_call_carries_an_explicit_timeout():
    seen = []

    def handler(request):
        seen.append(request.extensions.get("timeout"))
        return httpx.Response(200, json=[])
    with client_for(handler) as c:
        c.list_models()
        c.list_messages("conv-1", timeout=2.5)
    assert seen[0]["read"] == 30.0 and seen[0]["connect"] == 5.0
    assert seen[1]["read"] == 2.5


# ---------------------------------------------------------------- secrecy of the API key

def _all_text(e: BaseException) -> str:
    return "".join(traceback.format_exception(e)) + repr(e) + str(e) + repr(getattr(e, "__cause__", None)) + \
        repr(getattr(e, "__context__", None))


def _assert_no_key_piece(text: str) -> None:
    for i in range(len(KEY) - 5):
        assert KEY[i:i + 6] not in text, f"a piece of the key leaked: {KEY[i:i + 6]!r}"


def test_key_is_sent_but_never_shown(caplog):
    auth_seen = []

    def handler(request):
        auth_seen.append(request.headers.get("authorization"))
        echo = f"invalid token {KEY} (prefix {KEY[:10]}) header={request.headers.get('authorization')}"
        return httpx.Response(401, json={"detail": echo})

    caplog.set_level(logging.DEBUG, logger="subconscious.letta")
    with client_for(handler, KEY) as c:
        _assert_no_key_piece(repr(c))
        with pytest.raises(LettaAuthError) as exc:
            c.get_agent("agent-00000000-0000-4000-8000-000000000000")
        with pytest.raises(LettaAuthError) as exc2:
            c.send_message_streaming("conv-1", "hi")
    assert auth_seen == [f"Bearer {KEY}"] * 2
    assert "LETTA_API_KEY" in str(exc.value) and "refused" in str(exc.value)
    for e in (exc.value, exc2.value):
        _assert_no_key_piece(_all_text(e))
    _assert_no_key_piece(caplog.text)
    assert caplog.records, "the client logs its calls (without secrets)"


def test_transport_error_text_never_holds_the_key():
    def handler(request):
        raise httpx.ConnectError(f"failed with headers {dict(request.headers)}")
    with client_for(handler, KEY) as c:
        with pytest.raises(LettaConnectionError) as exc:
            c.list_models()
    _assert_no_key_piece(_all_text(exc.value))
    assert exc.value.__cause__ is None and exc.value.__context__ is None


def test_errors_form_one_family():
    for cls in (LettaAuthError, LettaConnectionError, LettaNotFoundError, LettaProtocolError, LettaServerError,
                LettaStreamError, LettaTimeoutError):
        assert issubclass(cls, LettaError)
