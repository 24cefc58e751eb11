"""One test per finding of issue 10 (delivery side), each reproduced in-process against the fake server
(tests/harness/fake_letta_conv.py). The worker is driven through ``worker.deliver(rt, sid)`` with
``LettaClient`` replaced by the fake, so these tests ran against the code before the fix too (and failed)."""
from __future__ import annotations

import json

import pytest

from subconscious import localsession, worker
from subconscious.state.records import SessionState
from subconscious.transcript import build_update, complete_lines, parse_line, xml_escape
from tests.harness.fake_letta_conv import FakeLetta, FakeStore, fake_runtime
from tests.harness.transcripts import Transcript

SID = "find-1"


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch):
    monkeypatch.setattr(worker.time, "sleep", lambda s: None)
    from subconscious.tools import loop
    monkeypatch.setattr(loop.time, "sleep", lambda s: None)


@pytest.fixture
def world(tmp_path, monkeypatch):
    server = FakeLetta()
    monkeypatch.setattr("subconscious.letta.client.LettaClient", lambda *a, **k: server)
    store = FakeStore()
    store.sessions[SID] = SessionState(SID, conversation_id="conv-1", agent_id="agent-1")
    rt = fake_runtime(tmp_path, store)
    tr = Transcript(tmp_path / "t.jsonl", SID, str(tmp_path))
    local = localsession.load(tmp_path / "sessions", SID)
    local.transcript_path = str(tr.path)
    localsession.save(tmp_path / "sessions", local)

    class W:
        pass
    w = W()
    w.server, w.store, w.rt, w.tr, w.sessions = server, store, rt, tr, tmp_path / "sessions"
    w.deliver = lambda: worker.deliver(rt, SID)
    w.cursor = lambda: store.session(SID).last_processed_index
    return w


def count_lines(w) -> dict[int, int]:
    lines = complete_lines(w.tr.path.read_text())
    count = {i: 0 for i, l in enumerate(lines) if parse_line(l).status == "entries"}
    for got in w.server.ok_turns():
        if got != "start":
            for i in range(got[0], got[1] + 1):
                if i in count:
                    count[i] += 1
    return count


def test_a_long_tool_heavy_turn_whose_reply_was_lost_is_not_sent_twice(world):
    world.tr.user("read many files").assistant("ok")
    world.server.script = ["tools_cut"]  # 22 tool calls, then the last reply is lost (the run completed)
    world.deliver()
    assert len(world.server.messages) > 60 and world.cursor() == -1
    world.deliver()
    assert world.server.sends == 1  # found beyond the newest 50 messages: not sent again
    assert world.cursor() == world.tr.line_count() - 1
    assert set(count_lines(world).values()) == {1}


def test_a_turn_that_failed_after_the_server_stored_it_is_not_counted_as_delivered(world):
    world.tr.user("remember this").assistant("ok")
    world.server.script = ["error"]  # stored; the run ended with llm_api_error
    world.deliver()
    assert world.cursor() == -1
    world.deliver()
    assert world.cursor() == world.tr.line_count() - 1
    assert set(count_lines(world).values()) == {1}  # in exactly one completed turn
    users = [m for m in world.server.messages if m["message_type"] == "user_message"]
    assert len(users) == 2 and "remember this" not in json.dumps(users[1]["content"])  # by reference


def test_updates_are_bounded_by_the_agents_context_window(world, monkeypatch):
    monkeypatch.setattr(world.server, "get_agent", lambda *a, **k: {"llm_config": {"context_window": 8000}})
    for i in range(120):  # one turn with 120 tool calls
        world.tr.assistant(f"[step {i}] " + "x" * 1400)
    world.deliver()
    sizes = [len(json.dumps(m["content"])) for m in world.server.messages if m["message_type"] == "user_message"]
    assert world.cursor() == world.tr.line_count() - 1
    assert len(sizes) > 1 and max(sizes) < 8000 * 4 // 4 + 3000
    assert set(count_lines(world).values()) == {1}


def test_the_pending_payload_is_not_kept_in_the_local_session_file(world):
    world.tr.user("x" * 50_000)
    world.server.script = ["down"]
    world.deliver()
    text = (world.sessions / f"{SID}.json").read_text()
    assert len(text) < 2000


def test_a_failed_last_delivery_is_retried_without_a_stop(world, monkeypatch):
    from subconscious import spawn

    world.tr.user("last words").assistant("bye")
    world.server.script = ["conflict"] * 4  # 409s that outlast the worker's retries, on the session's last Stop
    world.deliver()
    assert world.cursor() == -1
    started = []
    monkeypatch.setattr(spawn, "spawn_worker", lambda sid, cwd=None: started.append(sid) or 1)
    marks = dict(localsession.pending_marks(world.sessions))
    assert SID in marks
    assert spawn.pickup(world.sessions, now=marks[SID] - 1) == []  # backoff: not yet
    assert spawn.pickup(world.sessions, now=marks[SID] + 1) == [SID]  # any hook on the machine: due
    assert spawn.pickup(world.sessions, now=marks[SID] + 2) == []  # claimed: not started twice
    world.deliver()
    assert world.cursor() == world.tr.line_count() - 1 and localsession.pending_marks(world.sessions) == []


def test_an_interrupted_turn_is_delivered_without_its_stop(world, monkeypatch):
    from subconscious import spawn

    started = []
    monkeypatch.setattr(spawn, "spawn_worker", lambda sid, cwd=None: started.append(sid) or 1)
    spawn.pickup(world.sessions, now=1000.0, arm=SID)  # UserPromptSubmit; then the user interrupts: no Stop
    assert spawn.pickup(world.sessions, now=1000.0 + spawn.SAFETY_NET_SECONDS + 1) == [SID]


def test_a_shrunk_transcript_that_grows_again_loses_no_line(world):
    world.tr.user("one").assistant("two").user("three").assistant("four")
    world.deliver()
    assert world.cursor() == 3
    lines = complete_lines(world.tr.path.read_text())
    world.tr.path.write_text("\n".join(lines[:2]) + "\n")  # rewritten shorter
    world.tr.user("five").assistant("six").user("seven")  # and grows again
    world.deliver()
    texts = "".join(json.dumps(m["content"]) for m in world.server.messages if m["message_type"] == "user_message")
    for word in ("five", "six", "seven"):
        assert texts.count(word) == 1, word
    assert texts.count("one") == 1  # what was delivered is not sent again


def test_compaction_commands_sidechains_and_ansi():
    def line(kind, content, **extra):
        return json.dumps({"type": kind, "uuid": kind + str(len(content)), "message": {"role": kind, "content": content},
                           **extra})
    lines = [line("user", "hello"), line("assistant", "red \x1b[31mERROR\x1b[0m done"),
             line("user", "summary of it all", isCompactSummary=True),
             line("user", "<command-name>/model</command-name>\n<command-args>opus</command-args>"),
             line("user", "<local-command-stdout>Set model to opus</local-command-stdout>"),
             line("assistant", "subagent chatter", isSidechain=True)]
    u = build_update(lines, -1, "s")
    texts = [(m.role, m.text) for m in u.messages]
    assert not any("summary of it all" in t for _, t in texts)
    assert ("system", "[Command: /model opus]") in texts and ("system", "[Command output]: Set model to opus") in texts
    assert not any(r == "user" and "command" in t for r, t in texts)
    assert not any("subagent" in t for _, t in texts)
    assert "[31m" not in u.payload and "[0m" not in u.payload and "red ERROR done" in u.payload
    assert xml_escape("\x1b]0;title\x07ok") == "ok"


def test_temp_files_of_killed_writers_are_swept(world):
    import os
    import time

    stale = world.sessions / ".subconscious-tmp-abc"
    stale.write_text("x")
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    world.tr.user("hi")
    world.deliver()
    assert not stale.exists()


def test_a_stop_keeps_no_payload_in_the_local_session_file(tmp_path):
    """The finding as a user meets it: a Stop after a long turn, server unreachable — the machine-local
    session file (rewritten by every later hook, PreToolUse included) must not carry the update's text."""
    import json
    import os

    from subconscious.state.store import Store
    from tests.harness.hooks import run_hook

    home, local, project = tmp_path / "lh", tmp_path / "local", tmp_path / "proj"
    project.mkdir()
    sid = "payload-session"
    state = home / ".letta" / "claude"
    store = Store(state, "laptop", local / "locks", local / "clocks")
    store.put_conversation(sid, "conv-1", "agent-1")
    store.update_session(sid, lambda cur: SessionState(sid, conversation_id="conv-1", agent_id="agent-1"))
    tr = Transcript(tmp_path / "t.jsonl", sid, str(project))
    tr.user("x" * 50_000).assistant("done")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_"))}
    env.update(LETTA_HOME=str(home), LETTA_API_KEY="k", LETTA_BASE_URL="http://127.0.0.1:9",
               LETTA_AGENT_ID="agent-00000000-0000-4000-8000-000000000000",
               SUBCONSCIOUS_STATE_DIR=str(local), SUBCONSCIOUS_HOST="laptop")
    run_hook("stop", {"session_id": sid, "transcript_path": str(tr.path), "cwd": str(project),
                      "hook_event_name": "Stop", "stop_hook_active": False}, env)
    files = list((local / "sessions").glob(f"{sid}*.json"))
    assert files, "the Stop hook recorded nothing for the session"
    assert all(len(p.read_bytes()) < 5000 for p in files), [(p.name, len(p.read_bytes())) for p in files]
    assert all("x" * 1000 not in p.read_text() for p in files)
