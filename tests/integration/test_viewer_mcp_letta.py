"""The MCP server (`subconscious mcp`) and the viewer (`subconscious ui`) against the real Letta server, on a
shared home fed by two machines (two SUBCONSCIOUS_HOST / state dirs, one LETTA_HOME) through real hook
processes and the real worker, with a Syncthing conflict copy in the home.

The MCP server runs as Claude Code runs it: a subprocess spoken to over stdio by the SDK's own client. The
viewer runs as `subconscious ui --print-url`; its page is rendered by a real headless Chromium and checked
for what a person looks for; the screenshot is kept (its path is printed)."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import httpx
import pytest

from subconscious.state.copynames import Engine, make_copy_name
from tests.harness.chromium import Dom, dump_dom, screenshot
from tests.harness.fake_llm import FakeLLMControl
from tests.harness.hooks import conversation_messages
from tests.harness.letta_fixtures import FAKE_MODEL_HANDLE, delete_agent, import_agent
from tests.harness.machines import Machine, machine_env, reader, shared_state

pytestmark = pytest.mark.letta

LAPTOP_FACT = "viewer-test laptop fact about pytest -x"
DESKTOP_NOTE = "desktop note nobody was shown yet"
ARCHIVED = "The team deploys with blue-green releases on Fridays"
MARKUP = "<img src=x onerror=alert(1)> <b>not bold</b>"
ARTIFACTS = Path(os.environ.get("SUBCONSCIOUS_TEST_ARTIFACTS") or Path(tempfile.gettempdir()) / "subconscious-test-artifacts")


@pytest.fixture(scope="module")
def home(tmp_path_factory, letta_server):
    """The desktop started first and was shown the blocks (its session keeps those values), then said a note
    nobody was shown; then the laptop's turn added a fact to the guidance block and its next prompt showed
    it the agent's notes (and the blocks as they are now). The agent has one archival passage; one block holds markup; the desktop's session
    file has a Syncthing conflict copy."""
    FakeLLMControl(letta_server.fake_llm_url).reset()
    tmp = tmp_path_factory.mktemp("viewer")
    base = letta_server.base_url
    agent = import_agent(base)
    letta_env = {"LETTA_BASE_URL": base, "LETTA_API_KEY": "test-key-not-checked-by-the-server",
                 "LETTA_MODEL": FAKE_MODEL_HANDLE}
    desktop = Machine(tmp, machine_env(tmp, letta_env, "desktop", agent["id"]), "webapp-desktop")
    laptop = Machine(tmp, machine_env(tmp, letta_env, "laptop", agent["id"]), "webapp")
    try:
        with httpx.Client(base_url=base, timeout=60) as http:
            # the bundled agent embeds with OpenAI's servers; point it at the harness's own embeddings
            http.patch(f"/v1/agents/{agent['id']}", json={"embedding": "openai/text-embedding-3-small"}).raise_for_status()
            http.post(f"/v1/agents/{agent['id']}/archival-memory", json={"text": ARCHIVED}).raise_for_status()
            http.patch(f"/v1/agents/{agent['id']}/core-memory/blocks/project_context",
                       json={"value": MARKUP}).raise_for_status()
        desktop.start()
        desktop.prompt("hi")
        desktop.turn(f"SAY {DESKTOP_NOTE}")
        laptop.start()
        laptop.turn(f"Please REMEMBER guidance: {LAPTOP_FACT}")
        laptop.prompt("next")
        state = shared_state(tmp)
        original = state / f"session-{desktop.sid}.json"
        copy = state / make_copy_name(Engine.SYNCTHING, original.name, host="LAPTOP")
        shutil.copyfile(original, copy)
        yield {"tmp": tmp, "agent": agent, "laptop": laptop, "desktop": desktop, "base_url": base, "copy": copy}
    finally:
        delete_agent(base, agent["id"])


def block_value(base_url: str, agent_id: str, label: str) -> str:
    r = httpx.get(f"{base_url}/v1/agents/{agent_id}/core-memory/blocks/{label}", timeout=30)
    r.raise_for_status()
    return r.json()["value"]


# --------------------------------------------------------------------------- MCP over stdio

def test_mcp_server_lists_and_runs_its_tools_over_stdio(home):
    from mcp import Client, StdioServerParameters

    laptop, desktop, base = home["laptop"], home["desktop"], home["base_url"]
    sessions = [reader(home["tmp"]).session(m.sid).conversation_id for m in (laptop, desktop)]
    before = [conversation_messages(base, c) for c in sessions]
    params = StdioServerParameters(command=sys.executable, args=["-m", "subconscious", "mcp"], env=laptop.env,
                                   cwd=str(laptop.project))

    async def session():
        async with Client(params, read_timeout_seconds=120) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            found = await client.call_tool("search_memory", {"query": "LAPTOP fact pytest"})
            archival = await client.call_tool("search_memory", {"query": "deploys releases", "top_k": 3})
            every = await client.call_tool("search_memory", {"query": ""})
            answer = await client.call_tool("ask_subconscious", {"question": "SAY the tests run with pytest -x"})
            empty = await client.call_tool("ask_subconscious", {"question": "  "})
            return tools, found, archival, every, answer, empty

    tools, found, archival, every, answer, empty = anyio.run(session)
    text = lambda result: "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")  # noqa: E731

    assert set(tools) == {"ask_subconscious", "search_memory"}
    assert tools["search_memory"].annotations.read_only_hint is True
    assert set(tools["ask_subconscious"].input_schema["required"]) == {"question"}

    assert not found.is_error and f"[guidance] {LAPTOP_FACT}" in text(found)  # the line the laptop's turn added
    assert not archival.is_error and ARCHIVED in text(archival)  # Letta's archival search, on the real server
    blocks = httpx.get(f"{base}/v1/agents/{home['agent']['id']}/core-memory/blocks", timeout=30).json()
    assert all(f"## {b['label']} (" in text(every) and b["value"] in text(every) for b in blocks)

    assert not answer.is_error and text(answer) == "the tests run with pytest -x"
    assert empty.is_error and "question" in text(empty)  # an error the model reads, the server goes on
    # the question went to the side conversation every machine shares, never to a session's
    assert [conversation_messages(base, c) for c in sessions] == before
    side = reader(home["tmp"]).setting("askConversation")
    asked = [m for m in conversation_messages(base, side["conversationId"]) if m.get("message_type") == "user_message"]
    assert len(asked) == 1 and "SAY the tests run with pytest -x" in json.dumps(asked[0]["content"])


# --------------------------------------------------------------------------- the viewer

@pytest.fixture(scope="module")
def viewer(home):
    desktop = home["desktop"]
    proc = subprocess.Popen([sys.executable, "-m", "subconscious", "ui", "--port", "0", "--no-browser", "--print-url"],
                            env=desktop.env, cwd=str(desktop.project), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and "/?token=" in url, proc.stderr.read() if proc.poll() else url
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, proc.stderr.read()  # SIGTERM stops it cleanly


def http_call(url: str, method: str, path: str, headers: dict | None = None, body: bytes | None = None):
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def test_viewer_refuses_every_request_without_the_token(viewer):
    token = viewer.split("token=", 1)[1]
    wrong = token[:-1] + ("A" if token[-1] != "A" else "B")
    for path in ("/", "/static/app.js", "/api/memory", "/api/health", "/?token=" + wrong, "/api/sessions?token="):
        status, body = http_call(viewer, "GET", path)
        assert status == 403, path
        assert token not in body.decode()
    status, _ = http_call(viewer, "POST", "/api/blocks/guidance", {"Content-Type": "application/json"},
                        b'{"value": "x"}')
    assert status == 403
    # the token in the URL does not let a page on another name (DNS rebinding to 127.0.0.1) read anything
    status, _ = http_call(viewer, "GET", f"/api/memory?token={token}", {"Host": f"evil.example:{urlsplit(viewer).port}"})
    assert status == 403
    status, body = http_call(viewer, "GET", f"/api/memory?token={token}")
    assert status == 200 and json.loads(body)["ok"] is True


def test_viewer_page_in_chromium_shows_blocks_sessions_messages_and_the_conflict(home, viewer, request):
    tmp, laptop, desktop = home["tmp"], home["laptop"], home["desktop"]
    dom = Dom.parse(dump_dom(viewer))
    (body,) = dom.find("body")
    assert body.attrs.get("data-loaded") == "1"  # every section was read
    assert not dom.find(cls="error"), [e.text for e in dom.find(cls="error")]

    (guidance,) = dom.find(cls="block", data_label="guidance")
    assert LAPTOP_FACT in guidance.text  # the block's text, as the server holds it
    (markup,) = dom.find(cls="block", data_label="project_context")
    assert MARKUP in markup.text and not markup.find("img") and not markup.find("b")  # text, never HTML

    (change,) = [li for li in dom.find("li") if "guidance" in li.text and LAPTOP_FACT in li.text
                 and li.find(cls="add")]  # the change, from the desktop's view to the laptop's
    assert "laptop" in change.text

    rows = {tr.attrs["data-session"]: tr for tr in dom.find("tr") if "data-session" in tr.attrs}
    assert set(rows) == {laptop.sid, desktop.sid}
    store = reader(tmp)
    for m, host, project in ((laptop, "laptop", "webapp"), (desktop, "desktop", "webapp-desktop")):
        cells = [td.text for td in rows[m.sid].find("td")]
        assert cells[:3] == [m.sid, host, project]
        assert cells[5] == str(store.session(m.sid).last_processed_index)

    timelines = {t.attrs["data-session"]: t for t in dom.find(cls="timeline")}
    assert set(timelines) == {laptop.sid, desktop.sid} and "on desktop" in timelines[desktop.sid].text
    (note,) = [li for li in timelines[desktop.sid].find("li") if DESKTOP_NOTE in li.text]
    assert "unshown" in note.classes and "not shown yet" in note.text
    shown = [li for li in timelines[laptop.sid].find("li") if "memory_insert" in li.text]
    assert shown and all("shown" in li.classes for li in shown)

    (conflict,) = dom.find("tr", cls="conflict")
    assert home["copy"].name in conflict.text and "syncthing" in conflict.text.lower()
    (verdict,) = dom.find(id="health-verdict")
    assert "1 problem" in verdict.text

    shot = screenshot(viewer, ARTIFACTS / "viewer.png", height=2600)
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"viewer screenshot: {shot}")
    assert shot.stat().st_size > 50_000  # a rendered page, not a blank one


def test_viewer_edit_goes_to_letta_only_when_asked_and_only_over_the_block_it_read(home, viewer):
    token = viewer.split("token=", 1)[1]
    base, agent_id = home["base_url"], home["agent"]["id"]
    before = block_value(base, agent_id, "user_preferences")
    json_headers = {"Content-Type": "application/json", "X-Subconscious-Token": token}

    # the token in the URL (a link, the history) cannot change anything
    status, _ = http_call(viewer, "POST", f"/api/blocks/user_preferences?token={token}",
                        {"Content-Type": "application/json"}, json.dumps({"value": "x", "expected": before}).encode())
    assert status == 403
    # an edit of a value the block no longer holds is refused: the agent's newer text is not overwritten
    status, body = http_call(viewer, "POST", "/api/blocks/user_preferences", json_headers,
                           json.dumps({"value": "stale edit", "expected": before + " (older)"}).encode())
    assert status == 409, body
    assert block_value(base, agent_id, "user_preferences") == before

    status, body = http_call(viewer, "POST", "/api/blocks/user_preferences", json_headers,
                           json.dumps({"value": "Prefers small commits.", "expected": before}).encode())
    assert status == 200, body
    assert json.loads(body)["data"]["value"] == "Prefers small commits."
    assert block_value(base, agent_id, "user_preferences") == "Prefers small commits."
    status, body = http_call(viewer, "GET", "/api/memory", {"X-Subconscious-Token": token})
    assert {b["label"]: b["value"] for b in json.loads(body)["data"]["blocks"]}["user_preferences"] == "Prefers small commits."


# --------------------------------------------------------------------------- in the real Claude Code

@pytest.mark.claude
def test_claude_code_starts_the_plugins_mcp_server_and_its_tool_answers_the_model(home, claude_sandbox):
    """The plugin as Claude Code loads it: plugin.json's mcpServers starts hooks/run mcp from
    ${CLAUDE_PLUGIN_ROOT}, which finds `subconscious` and runs `subconscious mcp`; the model calls
    search_memory and the memory's line comes back to it as the tool's result. (Last in this module: the
    run's own SessionStart adds a session to the shared home.)"""
    tool = "mcp__plugin_subconscious_subconscious__search_memory"
    laptop = home["laptop"]
    env = {k: v for k, v in laptop.env.items() if k.startswith(("LETTA_", "SUBCONSCIOUS_"))}
    # Claude Code defers MCP tools: the model loads the tool's schema with ToolSearch, then calls it
    prompt = f'[[tool:ToolSearch {{"query": "select:{tool}"}}]] [[tool:{tool} {{"query": "laptop fact"}}]] [[text:done]]'
    run = claude_sandbox.run(prompt, env=env,
                             path=claude_sandbox.path_with_subconscious(), allowed_tools=[tool], timeout=180)
    assert run.returncode == 0, run.describe()
    results = [block for req in run.message_requests() for msg in req.body.get("messages", [])
               if isinstance(msg.get("content"), list) for block in msg["content"]
               if isinstance(block, dict) and block.get("type") == "tool_result"]
    assert results, f"the model never got a tool result; {run.describe()}"
    assert f"[guidance] {LAPTOP_FACT}" in json.dumps(results), run.describe()


@pytest.mark.claude
def test_the_plugins_slash_command_reaches_the_model_with_its_arguments(home, claude_sandbox):
    """/subconscious:memory (commands/memory.md; /subconscious:ask is made the same way) is the plugin's,
    expands with the user's words, and asks the model to use the MCP tool (the run's hooks add a session:
    last in this module)."""
    env = {k: v for k, v in home["laptop"].env.items() if k.startswith(("LETTA_", "SUBCONSCIOUS_"))}
    run = claude_sandbox.run("/subconscious:memory flaky login", env=env, path=claude_sandbox.path_with_subconscious())
    assert run.returncode == 0, run.describe()
    text = run.bodies_text()
    assert "flaky login" in text and "Call the `search_memory` tool of the subconscious MCP server" in text, run.describe()
