"""The MCP server's tools through the SDK's own client, connected in process (the stdio path is tested
against the real Letta server in tests/integration/test_viewer_mcp_letta.py): a failure reaches the model as
a tool error saying why, and the server keeps answering."""

from __future__ import annotations

import os
import socket

import anyio

from subconscious.mcp.server import build_server
from subconscious.see import SeeHome


def test_a_server_that_cannot_be_reached_is_a_tool_error_not_a_dead_server(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "CLAUDE"))}
    env.update(HOME=str(tmp_path), SUBCONSCIOUS_STATE_DIR=str(tmp_path / "local"), LETTA_HOME=str(tmp_path / "h"),
               LETTA_BASE_URL=f"http://127.0.0.1:{port}", LETTA_AGENT_ID="agent-00000000-0000-4000-8000-000000000000")
    server = build_server(lambda: SeeHome(env=env, cwd=str(tmp_path)))

    async def session():
        from mcp import Client

        async with Client(server) as client:
            names = sorted(t.name for t in (await client.list_tools()).tools)
            return names, [await client.call_tool(name, args) for name, args in (
                ("search_memory", {"query": "pytest"}), ("search_memory", {"query": ""}),
                ("ask_subconscious", {"question": "hello?"}), ("ask_subconscious", {"question": " "}))]

    names, results = anyio.run(session)
    assert names == ["ask_subconscious", "search_memory"]
    assert all(r.is_error for r in results)
    texts = [r.content[0].text for r in results]
    assert all("cannot connect to Letta" in t for t in texts[:3]), texts
    assert "question" in texts[3]


def test_a_huge_query_is_not_echoed_back_whole_into_the_models_context(tmp_path):
    from subconscious.mcp.server import search_text

    query = "pytest " * 300_000  # 2.1 MB
    error = "the server said: " + query
    answer = search_text({"blocks": [], "archival": None, "archival_error": error}, query)
    found = search_text({"blocks": [{"label": "guidance", "line": "run pytest"}], "archival": []}, query)
    for text in (answer, found):
        assert len(text) < 3000, len(text)
        assert f"({len(query):,} characters)" in text  # it says how long the query was
    assert "'pytest pytest" in answer and "[guidance] run pytest" in found
    short = search_text({"blocks": [], "archival": []}, "flaky login")
    assert "'flaky login'" in short and "characters" not in short

    # through the SDK's client: the tool's error (here: no server) is bounded too
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "CLAUDE"))}
    env.update(HOME=str(tmp_path), SUBCONSCIOUS_STATE_DIR=str(tmp_path / "local"), LETTA_HOME=str(tmp_path / "h"),
               LETTA_BASE_URL=f"http://127.0.0.1:{port}", LETTA_AGENT_ID="agent-00000000-0000-4000-8000-000000000000")
    server = build_server(lambda: SeeHome(env=env, cwd=str(tmp_path)))

    async def session():
        from mcp import Client

        async with Client(server) as client:
            return await client.call_tool("search_memory", {"query": query})

    result = anyio.run(session)
    assert result.is_error and len(result.content[0].text) < 3000


def test_the_tools_answer_the_agents_text_without_its_escape_sequences(tmp_path):
    """Claude Code shows a tool's result in the user's terminal: the agent's escapes do not get there."""
    import re

    from subconscious.see import ask as see_ask_module  # noqa: F401 - the module the tool calls

    hostile = "run\x1b]52;c;Y3VybA==\x07 \x1b[2Jtests\x9b31m now\u202e"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "CLAUDE"))}
    env.update(HOME=str(tmp_path), SUBCONSCIOUS_STATE_DIR=str(tmp_path / "local"), LETTA_HOME=str(tmp_path / "h"))
    import subconscious.see as see

    answers = {"ask": {"reply": hostile, "stop_reason": "end_turn"},
               "memory": {"blocks": [{"label": "guidance", "value": hostile, "description": hostile}]},
               "search_memory": {"blocks": [{"label": "guidance", "line": hostile}],
                                 "archival": [{"content": hostile, "tags": [hostile]}]}}
    saved = {name: getattr(see, name) for name in answers}
    try:
        for name, value in answers.items():
            setattr(see, name, lambda *a, _v=value, **k: _v)
        server = build_server(lambda: SeeHome(env=env, cwd=str(tmp_path)))

        async def session():
            from mcp import Client

            async with Client(server) as client:
                return [await client.call_tool(n, a) for n, a in (
                    ("ask_subconscious", {"question": "what now?"}), ("search_memory", {"query": ""}),
                    ("search_memory", {"query": "run"}))]

        results = anyio.run(session)
    finally:
        for name, fn in saved.items():
            setattr(see, name, fn)
    for r in results:
        text = r.content[0].text
        assert not r.is_error, text
        assert "run" in text and "tests" in text and " now" in text
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", text), text
