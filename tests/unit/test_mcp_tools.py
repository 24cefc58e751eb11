"""The MCP server's tools through the SDK's own client, connected in process (the stdio path is tested
against the real Letta server in tests/integration/test_viewer_mcp_letta.py): a failure reaches the model as
a tool error saying why, and the server keeps answering."""

from __future__ import annotations

import os
import socket

import anyio

from subconscious.mcpserver import build_server
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
