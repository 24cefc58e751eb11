"""subconscious.letta against the real Letta 0.16.8 server started by the harness (scripted fake LLM)."""
from __future__ import annotations

import json
import time

import httpx
import pytest

from subconscious.letta.agent import read_user_config, resolve_agent
from subconscious.letta.client import LettaClient
from subconscious.letta.config import LettaSettings
from subconscious.letta.errors import LettaConfigError, LettaConnectionError, LettaNotFoundError, \
    LettaProtocolError, LettaServerError, LettaStreamError, LettaTimeoutError
from subconscious.letta.messages import ClientTool, ToolResult
from tests.harness.letta_fixtures import AGENT_FILE, FAKE_MODEL_HANDLE
from tests.harness.letta_server import free_port

pytestmark = pytest.mark.letta

READ = ClientTool("Read", "Read a text file from the developer's machine.",
                  {"type": "object", "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]})
GREP = ClientTool("Grep", "Search files for a regular expression.",
                  {"type": "object", "properties": {"pattern": {"type": "string"}, "path": {"type": "string"}},
                   "required": ["pattern"]})
BLOCKS = ["core_directives", "guidance", "user_preferences", "project_context", "session_patterns",
          "pending_items", "self_improvement", "tool_guidelines"]


@pytest.fixture
def client(letta_server):
    with LettaClient(letta_server.base_url, "harness-key-never-checked") as c:
        yield c


@pytest.fixture
def conv(client, letta_agent):
    return client.create_conversation(letta_agent["id"])["id"]


def blocks_of(client, agent_id) -> dict:
    return {b["label"]: b["value"] for b in client.get_agent(agent_id)["blocks"]}


def test_bundled_agent_imports_with_its_blocks_and_memory_tools(client, fake_llm):
    agent_id = client.import_agent_file(AGENT_FILE.read_bytes(), model=FAKE_MODEL_HANDLE)[0]
    try:
        agent = client.get_agent(agent_id)
        assert agent["name"] == "Subconscious"  # no _copy suffix
        assert sorted(b["label"] for b in agent["blocks"]) == sorted(BLOCKS)
        assert all(0 < len(b["value"]) < b["limit"] <= 5000 for b in agent["blocks"])
        assert sum(b["limit"] for b in agent["blocks"]) <= 25000  # keeps the context window in check
        full = client.get_agent(agent_id, include_blocks=False)
        assert {"memory_insert", "memory_replace"} <= {t["name"] for t in full["tools"]}
        assert full["model"] == FAKE_MODEL_HANDLE and "subconscious" in full["tags"]
    finally:
        httpx.delete(f"{client.base_url}/agents/{agent_id}")


def test_streaming_turn_reaches_the_model_and_returns_its_reply(client, conv, fake_llm):
    seen = []
    r = client.send_message_streaming(conv, "hello from the test", on_item=seen.append)
    assert r.stop_reason == "end_turn" and r.text == "ECHO: hello from the test"
    assert fake_llm.user_texts()[-1] == "hello from the test"
    assert seen[-1]["message_type"] in ("usage_statistics", "stop_reason")


def test_scripted_model_edits_memory_blocks_visible_through_get_agent(client, letta_agent, conv, fake_llm):
    before = blocks_of(client, letta_agent["id"])
    r = client.send_message_streaming(
        conv, "REMEMBER user_preferences: prefers tabs over spaces\n"
              f"REPLACE pending_items: {before['pending_items']} => write the release notes\nSAY noted")
    assert r.text == "noted"
    assert [m["tool_call"]["name"] for m in r.of_type("tool_call_message")] == ["memory_insert", "memory_replace"]
    assert all(m["status"] == "success" for m in r.of_type("tool_return_message"))
    after = blocks_of(client, letta_agent["id"])
    assert after["user_preferences"].endswith("prefers tabs over spaces")
    assert after["pending_items"] == "write the release notes"
    assert after["guidance"] == before["guidance"]


def test_list_messages_newest_first_with_limit(client, conv, fake_llm):
    client.send_message(conv, "first")
    client.send_message(conv, "second")
    msgs = client.list_messages(conv, limit=3)
    assert len(msgs) == 3
    assert msgs[0]["message_type"] == "assistant_message" and msgs[0]["content"] == "ECHO: second"
    everything = client.list_messages(conv, limit=50)
    assert everything[-1]["message_type"] == "system_message"
    oldest_first = client.list_messages(conv, limit=50, order="asc")
    assert [m["id"] for m in oldest_first] == [m["id"] for m in reversed(everything)]


def test_models_and_model_patch(client, letta_agent):
    handles = [m["handle"] for m in client.list_models()]
    assert FAKE_MODEL_HANDLE in handles
    client.set_agent_model(letta_agent["id"], FAKE_MODEL_HANDLE, 24000)
    agent = client.get_agent(letta_agent["id"])
    assert agent["model"] == FAKE_MODEL_HANDLE and agent["llm_config"]["context_window"] == 24000
    with pytest.raises(LettaNotFoundError, match="not offered"):
        client.set_agent_model(letta_agent["id"], "nosuch/model")


@pytest.mark.parametrize("streaming", [True, False])
def test_client_tool_round_trip(client, conv, fake_llm, streaming):
    send = client.send_message_streaming if streaming else client.send_message
    r = send(conv, 'Check the notes.\nCALL Read {"file_path": "/home/dev/notes.txt"}', client_tools=[READ, GREP])
    assert r.stop_reason == "requires_approval"
    (req,) = r.approval_requests
    assert (req.name, req.arguments) == ("Read", {"file_path": "/home/dev/notes.txt"})
    offered = [t["function"]["name"] for t in fake_llm.chat_requests()[-1]["body"]["tools"]]
    assert {"Read", "Grep"} <= set(offered)
    r2 = client.send_tool_results(conv, [ToolResult(req.tool_call_id, "ship on Friday")], client_tools=[READ, GREP],
                                  streaming=streaming)
    assert r2.stop_reason == "end_turn"
    assert "Done: Read" in r2.text and "ship on Friday" in r2.text  # the model saw the tool's output
    kinds = [m["message_type"] for m in client.list_messages(conv, limit=10)]
    assert {"approval_request_message", "approval_response_message", "tool_return_message"} <= set(kinds)


def test_client_tool_failure_is_reported_to_the_agent(client, conv, fake_llm):
    r = client.send_message_streaming(conv, 'CALL Grep {"pattern": "TODO"}', client_tools=[GREP])
    req = r.approval_requests[0]
    r2 = client.send_tool_results(conv, [ToolResult(req.tool_call_id, "refused: outside the project", "error")],
                                  client_tools=[GREP])
    assert r2.stop_reason == "end_turn"
    ret = r2.of_type("tool_return_message")[0]
    assert ret["status"] == "error" and "refused" in ret["tool_return"]


def test_queued_replies_override_directives(client, conv, fake_llm):
    fake_llm.queue({"text": "queued answer"})
    assert client.send_message(conv, "SAY not this").text == "queued answer"
    assert client.send_message(conv, "SAY now this").text == "now this"


# ---------------------------------------------------------------- error paths

def test_server_down_is_a_connection_error_quickly():
    with LettaClient(f"http://127.0.0.1:{free_port()}", "k", timeout=2) as c:
        t0 = time.monotonic()
        with pytest.raises(LettaConnectionError, match="cannot connect") as exc:
            c.list_models()
        assert time.monotonic() - t0 < 2
    assert "start the server or fix LETTA_BASE_URL" in str(exc.value)


def test_model_provider_5xx(client, conv, fake_llm):
    with pytest.raises(LettaServerError) as exc:
        client.send_message(conv, "LLM_ERROR 500")
    assert exc.value.status == 500
    with pytest.raises(LettaStreamError) as exc2:
        client.send_message_streaming(conv, "LLM_ERROR 503")
    assert "503" in str(exc2.value) and exc2.value.partial.stop_reason == "llm_api_error"
    assert client.send_message(conv, "still alive").text == "ECHO: still alive"


def test_unknown_conversation_and_agent(client):
    # Letta 0.16.8 lists an unknown conversation as empty (no 404); sending to it is a 404
    assert client.list_messages("conv-00000000-0000-4000-8000-000000000000") == []
    with pytest.raises(LettaNotFoundError):
        client.send_message("conv-00000000-0000-4000-8000-000000000000", "hi")
    with pytest.raises(LettaNotFoundError):
        client.get_agent("agent-00000000-0000-4000-8000-000000000000")


class Corrupting(httpx.BaseTransport):
    """Fault injection on the real wire: passes the real stream through, altering or cutting it."""

    def __init__(self, mode: str):
        self.inner = httpx.HTTPTransport()
        self.mode = mode

    def handle_request(self, request):
        resp = self.inner.handle_request(request)
        if "text/event-stream" not in resp.headers.get("content-type", ""):
            return resp
        mode = self.mode

        class Body(httpx.SyncByteStream):
            def __iter__(self_inner):
                buf = b""
                for chunk in resp.stream:
                    buf += chunk
                resp.close()
                if mode == "garble":
                    buf = buf.replace(b'"message_type":"assistant_message"', b"}{garbage", 1)
                elif mode == "cut":
                    buf = buf[: buf.find(b'"message_type":"assistant_message"')]
                for i in range(0, len(buf), 7):
                    yield buf[i:i + 7]

        return httpx.Response(resp.status_code, headers=resp.headers, stream=Body())


@pytest.mark.parametrize("mode,match", [("garble", "not JSON"), ("cut", "ended before")])
def test_malformed_or_cut_stream_from_the_real_server(letta_server, conv, fake_llm, mode, match):
    with LettaClient(letta_server.base_url, transport=Corrupting(mode)) as c:
        with pytest.raises(LettaProtocolError, match=match):
            c.send_message_streaming(conv, "hello")


def test_slow_model_hits_the_callers_timeout(client, conv, fake_llm):
    t0 = time.monotonic()
    with pytest.raises(LettaTimeoutError):
        client.send_message_streaming(conv, "LLM_SLEEP 4", timeout=httpx.Timeout(1.5, connect=2))
    assert time.monotonic() - t0 < 4
    time.sleep(3)  # let the server finish that run before the fixture deletes the agent


def test_key_never_appears_in_errors_from_the_real_server(letta_server):
    key = "sk-let-IntegrationSecret-7781"
    with LettaClient(letta_server.base_url, key) as c:
        with pytest.raises(LettaNotFoundError) as exc:
            c.get_agent("agent-00000000-0000-4000-8000-000000000000")
        text = str(exc.value) + repr(exc.value) + repr(c)
    assert "IntegrationSecret" not in text and "sk-let" not in text


# ---------------------------------------------------------------- agent resolution end to end

def test_resolution_imports_once_then_reuses(letta_server, fake_llm, tmp_path):
    settings = LettaSettings.from_env({"LETTA_BASE_URL": letta_server.base_url, "LETTA_MODEL": FAKE_MODEL_HANDLE})
    cfg = tmp_path / "home" / ".letta" / "claude-subconscious" / "config.json"
    with LettaClient.from_settings(settings) as c:
        first = resolve_agent(c, settings, config_path=cfg)
        try:
            assert first.source == "imported" and first.model == FAKE_MODEL_HANDLE
            assert read_user_config(cfg) == (first.agent_id, True)
            again = resolve_agent(c, settings, config_path=cfg)
            assert (again.agent_id, again.source, again.model_changed) == (first.agent_id, "user_config", False)
            pinned = resolve_agent(c, settings, config_path=cfg, pinned_agent_id=lambda: first.agent_id)
            assert pinned.source == "pinned"
            # an agent on a model the server does not offer is moved to LETTA_MODEL
            c.set_agent_model(first.agent_id, "letta/letta-free")
            moved = resolve_agent(c, settings, config_path=cfg)
            assert moved.model_changed and c.get_agent(first.agent_id)["model"] == FAKE_MODEL_HANDLE
            conv = c.create_conversation(moved.agent_id)["id"]
            assert c.send_message(conv, "works").text == "ECHO: works"
        finally:
            httpx.delete(f"{c.base_url}/agents/{first.agent_id}")


def test_agent_name_in_letta_agent_id_gets_a_helpful_error(letta_server):
    with pytest.raises(LettaConfigError, match="looks like an agent name"):
        LettaSettings.from_env({"LETTA_BASE_URL": letta_server.base_url, "LETTA_AGENT_ID": "Subconscious"})


def test_letta_agent_id_that_does_not_exist(letta_server, tmp_path):
    settings = LettaSettings.from_env({"LETTA_BASE_URL": letta_server.base_url,
                                       "LETTA_AGENT_ID": "agent-00000000-0000-4000-8000-000000000000"})
    with LettaClient.from_settings(settings) as c:
        with pytest.raises(LettaNotFoundError, match="unset LETTA_AGENT_ID"):
            resolve_agent(c, settings, config_path=tmp_path / "c.json")
    assert not (tmp_path / "c.json").exists()


def test_fake_llm_received_letta_history_with_tool_results(client, conv, fake_llm):
    client.send_message(conv, "REMEMBER guidance: run the linters first\nSAY ok")
    last = fake_llm.chat_requests()[-1]["body"]
    roles = [m["role"] for m in last["messages"]]
    assert roles[0] == "system" and "tool" in roles
    assert "<guidance>" in last["messages"][0]["content"]  # memory blocks are compiled into the system prompt
    assert json.loads(last["messages"][-2]["tool_calls"][0]["function"]["arguments"])["label"] == "guidance"


def test_lite_hot_path_reads_match_the_client(client, letta_agent, conv, fake_llm, letta_server):
    from subconscious.letta import lite
    client.send_message(conv, "REMEMBER guidance: prefer small commits\nSAY ok")
    assert lite.list_messages(letta_server.base_url, conv, limit=4, api_key="k") == client.list_messages(conv, limit=4)
    assert lite.get_agent(letta_server.base_url, letta_agent["id"])["blocks"] == \
        client.get_agent(letta_agent["id"])["blocks"]
    with pytest.raises(LettaNotFoundError):
        lite.get_agent(letta_server.base_url, "agent-00000000-0000-4000-8000-000000000000")
    with pytest.raises(LettaConnectionError):
        lite.list_messages(f"http://127.0.0.1:{free_port()}", conv, timeout=2)
