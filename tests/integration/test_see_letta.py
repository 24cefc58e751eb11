"""`subconscious memory|messages|sessions|ask` against the real Letta server, on a shared home fed by two
machines (two SUBCONSCIOUS_HOST / state dirs, one LETTA_HOME): real hook processes and the real worker build
the home, the commands run as real processes, and what they print is checked against the server (read
with plain httpx) and the state files (read through the Store API)."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from tests.harness.hooks import conversation_messages, run_hook as hook
from tests.harness.letta_fixtures import delete_agent, import_agent
from tests.harness.machines import Machine, machine_env, reader

pytestmark = pytest.mark.letta


@pytest.fixture(scope="module")
def two_machines(tmp_path_factory, letta_server):
    """A laptop session whose notes were shown (a prompt after the turn) and a desktop session whose last
    note was not, both feeding one agent through one shared home; the laptop ran `memory` before its turn
    changed the guidance block (so `--since` has a baseline)."""
    from tests.harness.fake_llm import FakeLLMControl

    FakeLLMControl(letta_server.fake_llm_url).reset()
    tmp = tmp_path_factory.mktemp("see")
    agent = import_agent(letta_server.base_url)
    letta_env = {"LETTA_BASE_URL": letta_server.base_url, "LETTA_API_KEY": "test-key-not-checked-by-the-server",
                 "LETTA_MODEL": "openai-proxy/fake-model"}
    narrow = {"COLUMNS": "80"}  # the tables must fit 80 columns
    laptop = Machine(tmp, {**machine_env(tmp, letta_env, "laptop", agent["id"]), **narrow}, "webapp")
    desktop = Machine(tmp, {**machine_env(tmp, letta_env, "desktop", agent["id"]), **narrow}, "webapp-desktop")
    try:
        laptop.start()
        laptop.prompt("hi")  # full mode: the blocks are shown and recorded in the session
        before = laptop.json("memory")  # seen on the laptop: the baseline of --since
        time.sleep(1.2)
        between = time.time()
        time.sleep(1.2)
        laptop.turn("Please REMEMBER guidance: see-test laptop fact about pytest -x")
        laptop.prompt("next")  # shows the agent's notes: the watermark passes them
        desktop.start()
        desktop.turn("SAY desktop note nobody was shown yet")
        yield {"tmp": tmp, "agent": agent, "laptop": laptop, "desktop": desktop, "before": before,
               "between": between, "base_url": letta_server.base_url}
    finally:
        delete_agent(letta_server.base_url, agent["id"])


def server_notes(base_url: str, conv: str) -> list[dict]:
    return [m for m in conversation_messages(base_url, conv) if m.get("message_type") == "assistant_message"]


def test_sessions_shows_both_machines_as_the_state_and_the_server_have_them(two_machines):
    tmp, laptop, desktop = two_machines["tmp"], two_machines["laptop"], two_machines["desktop"]
    out = desktop.json("sessions")
    rows = {r["session"]: r for r in out["sessions"]}
    assert set(rows) == {laptop.sid, desktop.sid}
    store = reader(tmp)
    live = store.read().live
    for m, host, project in ((laptop, "laptop", "webapp"), (desktop, "desktop", "webapp-desktop")):
        r, state = rows[m.sid], store.session(m.sid)
        assert r["host"] == host == live[m.sid].host
        assert r["conversation"] == state.conversation_id == live[m.sid].conversation_id
        assert r["cursor"] == state.last_processed_index == m.tr.line_count() - 1
        assert r["started"] == state.started_at and r["last_seen_message_id"] == state.last_seen_message_id
        assert r["project"] == project  # this machine's own file or the start message on the server
        users = [x for x in conversation_messages(two_machines["base_url"], state.conversation_id)
                 if x.get("message_type") == "user_message"]
        assert r["last_delivery"] == users[-1]["date"]
    assert rows[laptop.sid]["ended"] is None  # still running
    assert rows[desktop.sid]["pending"] == [] and rows[laptop.sid]["pending"] is None  # seen from the desktop

    text = desktop.cli("sessions").stdout
    assert laptop.sid[:8] in text and desktop.sid[:8] in text and "laptop" in text and "desktop" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_messages_says_what_the_agent_said_where_and_whether_claude_saw_it(two_machines):
    laptop, desktop, base_url = two_machines["laptop"], two_machines["desktop"], two_machines["base_url"]
    out = laptop.json("messages", "--limit", "50")
    got = {(m["session"], m["id"]): m for m in out["messages"]}
    store = reader(two_machines["tmp"])
    for m, host in ((laptop, "laptop"), (desktop, "desktop")):
        notes = [n for n in server_notes(base_url, store.session(m.sid).conversation_id) if n.get("content")]
        assert notes and {i for s, i in got if s == m.sid} == {n["id"] for n in notes}
        for n in notes:
            row = got[(m.sid, n["id"])]
            assert row["date"] == n["date"] and row["text"] == n["content"] and row["host"] == host
    laptop_notes = [m for m in out["messages"] if m["session"] == laptop.sid]
    assert laptop_notes and all(m["shown"] for m in laptop_notes)  # the prompt after the turn showed them
    desk = [m for m in out["messages"] if m["session"] == desktop.sid]
    newest = desk[0]
    assert newest["text"] == "desktop note nobody was shown yet" and newest["shown"] is False
    assert [m["date"] for m in out["messages"]] == sorted((m["date"] for m in out["messages"]), reverse=True)

    only = laptop.json("messages", "--host", "desktop")["messages"]
    assert only and {m["session"] for m in only} == {desktop.sid}
    one = laptop.json("messages", "--session", laptop.sid, "--limit", "1")["messages"]
    assert len(one) == 1 and one[0]["id"] == laptop_notes[0]["id"]

    text = laptop.cli("messages").stdout
    assert "desktop note nobody was shown yet" in " ".join(text.split()) and "not shown" in text
    assert max(len(line.rstrip()) for line in text.splitlines()) <= 80


def test_memory_shows_the_servers_blocks_and_what_changed_since(two_machines):
    laptop, base_url, agent = two_machines["laptop"], two_machines["base_url"], two_machines["agent"]
    server = httpx.get(f"{base_url}/v1/agents/{agent['id']}", params={"include": "agent.blocks"}, timeout=30).json()
    by_label = {b["label"]: b["value"] for b in server["blocks"]}
    out = laptop.json("memory")
    assert {b["label"]: b["value"] for b in out["blocks"]} == by_label
    assert all(b["size"] == len(b["value"]) for b in out["blocks"])
    assert "see-test laptop fact" in by_label["guidance"]
    assert "see-test laptop fact" not in {b["label"]: b["value"] for b in two_machines["before"]["blocks"]}["guidance"]

    one = laptop.json("memory", "--label", "guidance")
    assert [b["label"] for b in one["blocks"]] == ["guidance"]
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(two_machines["between"])) + "Z"
    changed = laptop.json("memory", "--since", since)["since"]
    assert changed["baseline"] is not None
    assert [c["label"] for c in changed["changes"]] == ["guidance"]
    assert any("see-test laptop fact" in line for line in changed["changes"][0]["added"])
    assert laptop.json("memory", "--since", "1s")["since"]["changes"] == []  # the last read is the baseline

    text = laptop.cli("memory", "--label", "guidance", "--since", since).stdout
    assert "+ " in text and "see-test laptop fact" in text
    assert max(len(line.rstrip()) for line in text.splitlines()) <= 80
    bad = laptop.cli("memory", "--label", "no-such-block")
    assert bad.returncode == 1 and "guidance" in bad.stderr


def test_ask_answers_on_its_own_conversation_and_leaves_the_sessions_alone(two_machines):
    laptop, desktop, base_url = two_machines["laptop"], two_machines["desktop"], two_machines["base_url"]
    store = reader(two_machines["tmp"])
    convs = [store.session(m.sid).conversation_id for m in (laptop, desktop)]
    before = [conversation_messages(base_url, c) for c in convs]

    first = laptop.json("ask", "SAY the tests run with pytest -x")
    assert first["reply"] == "the tests run with pytest -x" and first["conversation"] not in convs
    streamed = laptop.cli("ask", "what do you know?")
    assert streamed.returncode == 0 and "ECHO:" in streamed.stdout and "what do you know?" in streamed.stdout
    again = desktop.json("ask", "SAY asked from the desktop")  # another machine: the same side conversation
    assert again["conversation"] == first["conversation"] and again["created"] is False

    assert [conversation_messages(base_url, c) for c in convs] == before
    assert reader(two_machines["tmp"]).setting("askConversation")["conversationId"] == first["conversation"]
    side = [m for m in conversation_messages(base_url, first["conversation"]) if m.get("message_type") == "user_message"]
    assert len(side) == 3 and "the tests run with pytest -x" in json.dumps(side[0]["content"])


def test_sessions_shows_the_end_session_end_recorded(two_machines):
    laptop, desktop = two_machines["laptop"], two_machines["desktop"]
    hook("session-end", {**desktop.base, "hook_event_name": "SessionEnd", "reason": "logout"}, desktop.env)
    state = reader(two_machines["tmp"]).session(desktop.sid)
    assert state.ended_at and state.end_reason == "logout"
    rows = {r["session"]: r for r in laptop.json("sessions", "--offline")["sessions"]}
    assert (rows[desktop.sid]["ended"], rows[desktop.sid]["end_reason"]) == (state.ended_at, "logout")
    assert rows[laptop.sid]["ended"] is None and rows[desktop.sid]["last_delivery"] is None  # offline: no server
    text = laptop.cli("sessions").stdout
    assert "ended" in text.splitlines()[0] and "logout" in text
    assert max(len(line) for line in text.splitlines()) <= 80
