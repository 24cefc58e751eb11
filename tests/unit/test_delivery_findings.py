"""One test per finding of issue 10 (delivery side), each reproduced in-process against the fake server
(tests/harness/fake_letta_conv.py). The worker is driven through ``worker.deliver(rt, sid)`` with
``LettaClient`` replaced by the fake, so these tests ran against the code before the fix too (and failed)."""
from __future__ import annotations

import json

import pytest

from subconscious.local import sessions as localsession
from subconscious.delivery import worker
from subconscious.state.records import SessionState
from subconscious.delivery.transcript import build_update, complete_lines, parse_line, xml_escape
from tests.harness.fake_letta_conv import FakeLetta, FakeStore, fake_runtime
from tests.harness.transcripts import Transcript

SID = "find-1"


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch):
    monkeypatch.setattr(worker.time, "sleep", lambda s: None)
    from subconscious.agent_tools import loop
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
    from subconscious.delivery import spawn

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
    from subconscious.delivery import spawn

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


def test_a_rewrite_under_a_bookkeeping_last_line_is_detected(world):
    """Issue 25: the anchor was kept only when the line at the cursor had a uuid, and Claude Code's last
    line is usually a bookkeeping line (cost-state, last-prompt) without one: after a rewrite under the
    cursor the index was trusted and "five", "six", "seven" were delivered 0 times."""
    world.tr.user("one").assistant("two").user("three").assistant("four").bookkeeping()
    world.deliver()
    assert world.cursor() == 4
    lines = complete_lines(world.tr.path.read_text())
    world.tr.path.write_text("\n".join(lines[:2]) + "\n")  # rewritten shorter under the cursor
    world.tr.user("five").assistant("six").user("seven")  # as long as it was: the index alone sees nothing
    world.deliver()
    texts = "".join(json.dumps(m["content"]) for m in world.server.messages if m["message_type"] == "user_message")
    for word in ("five", "six", "seven"):
        assert texts.count(word) == 1, word
    assert texts.count("one") == 1 and texts.count("four") == 1


def test_new_lines_in_place_of_bookkeeping_lines_after_the_anchor_are_delivered(world):
    """Red team of the anchor above: the file cut back to the anchored line and grown with new lines where
    the delivered bookkeeping lines were: the anchored line still matches, the new lines are caught."""
    world.tr.user("one").assistant("two").bookkeeping().bookkeeping()
    world.deliver()
    assert world.cursor() == 3
    lines = complete_lines(world.tr.path.read_text())
    world.tr.path.write_text("\n".join(lines[:2]) + "\n")
    world.tr.user("five").assistant("six")
    world.deliver()
    texts = "".join(json.dumps(m["content"]) for m in world.server.messages if m["message_type"] == "user_message")
    assert texts.count("five") == 1 and texts.count("six") == 1 and texts.count("two") == 1


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
    # issue 25: also those a notice writer (a hook at its deadline) left in the session's notices dir
    from subconscious.delivery import notices

    notices.add(world.sessions, SID, "compacted", 0, trigger="auto", summary="kept")
    stale_notice = world.sessions / "notices" / SID / ".subconscious-tmp-def"
    stale_notice.write_text("x")
    os.utime(stale_notice, (time.time() - 3600, time.time() - 3600))
    world.tr.user("hi")
    world.deliver()
    assert not stale.exists() and not stale_notice.exists()
    assert list((world.sessions / "notices" / SID).iterdir()) == []  # the notice itself went with its update


def test_a_stop_keeps_no_payload_in_the_local_session_file(tmp_path):
    """The finding as a user meets it: a Stop after a long turn, server unreachable — the machine-local
    session file (rewritten by every later hook, PreToolUse included) must not carry the update's text."""
    import json
    import os

    from subconscious.state.store.core import Store
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


# --------------------------------------------------------------------------- issue 25: every session finishes


def test_a_run_left_running_past_the_age_limit_is_re_delivered_by_reference(world, caplog):
    """Issue 25: a run left ``running`` (the server restarted mid-run: it never ends) blocked the session
    forever. Past the age limit it is judged stuck and re-delivered by reference (its text not repeated);
    the lines after it follow."""
    from subconscious.delivery import turns as delivery_turns

    world.tr.user("one").assistant("two")
    world.server.script = ["timeout_running"]
    world.deliver()
    world.server._later.clear()  # the server restarted: the run stays "running" and holds nothing up
    world.server.busy = lambda: False
    world.deliver()
    assert world.cursor() == -1  # still running: waited for, not resent
    local = localsession.load(world.sessions, SID)
    assert local.running_since is not None and "running" in (local.last_error or "")
    local.running_since -= delivery_turns.RUN_AGE_LIMIT + 60  # half an hour later
    localsession.save(world.sessions, local)
    world.tr.user("three")
    world.deliver()
    texts = [json.dumps(m["content"]) for m in world.server.messages if m["message_type"] == "user_message"]
    assert sum("one" in t for t in texts) == 1  # the text is not sent again
    assert sum("claude_code_session_update_retry" in t for t in texts) == 1
    assert sum("three" in t for t in texts) == 1 and world.cursor() == world.tr.line_count() - 1
    assert localsession.load(world.sessions, SID).running_since is None
    assert "judged stuck, re-delivered by reference" in caplog.text


def test_a_turn_armed_while_the_previous_turns_worker_runs_keeps_its_marker(world, monkeypatch):
    """Issue 25: the previous turn's worker cleared the marker the new prompt armed while it was sending, so
    a turn with no Stop (the user interrupts) was never picked up. A marker armed after the worker began
    stays; one armed before it (what it read covers) goes."""
    from subconscious.delivery import spawn

    monkeypatch.setattr(spawn, "spawn_worker", lambda sid, cwd=None: 1)
    world.tr.user("turn one").assistant("done")
    send = world.server.send_message_streaming

    def sending(*a, **k):  # the next prompt is submitted while this turn's update is on its way
        spawn.pickup(world.sessions, arm=SID)
        return send(*a, **k)

    world.server.send_message_streaming = sending
    world.deliver()
    assert world.cursor() == world.tr.line_count() - 1
    assert [sid for sid, _ in localsession.pending_marks(world.sessions)] == [SID]  # the new turn's safety net
    world.server.send_message_streaming = send
    world.deliver()  # a worker that began after it: nothing new, the marker goes
    assert localsession.pending_marks(world.sessions) == []


def test_the_retry_marker_of_a_gone_session_is_dropped_with_a_reason(world, monkeypatch, caplog):
    """Issue 25: a retry marker whose session record is gone re-armed every 15 s forever (a worker started
    for it at every pickup). The worker drops it and says why."""
    from subconscious.delivery import spawn

    started = []
    monkeypatch.setattr(spawn, "spawn_worker", lambda sid, cwd=None: started.append(sid) or 1)
    world.tr.user("one")
    del world.store.sessions[SID]  # gc collected it (or the user removed it)
    localsession.mark_pending(world.sessions, SID, 1000.0, "a turn without a Stop yet")
    assert spawn.pickup(world.sessions, now=1001.0) == [SID]
    world.deliver()
    assert localsession.pending_marks(world.sessions) == []
    assert spawn.pickup(world.sessions) == [] and started == [SID]
    assert "session record is gone" in caplog.text and "retry marker is dropped" in caplog.text


def test_a_rebuilt_session_file_judges_from_its_newest_mark_in_a_long_conversation(world):
    """Issue 25: after the session file was rebuilt (cursor -1, no attempt recorded) the judge of the newest
    update found in the conversation read from the conversation's start; past 50 pages of 100 rows (a long
    session) that listing is refused, so every retry failed and nothing was delivered again. It reads from
    the message before that update (a known position) and goes on."""
    for i in range(6_000):  # a long conversation: the agent's earlier turns (message-less rows among them)
        world.server._add("assistant_message", None, content=f"earlier {i}")
    world.tr.user("one").assistant("two")
    world.server.script = ["timeout_ok"]  # stored and completed; the reply is lost
    world.deliver()
    assert world.cursor() == -1
    world.store.sessions[SID] = SessionState(SID, conversation_id="conv-1", agent_id="agent-1")  # rebuilt
    local = localsession.load(world.sessions, SID)
    local.attempt = local.attempt_key = local.attempt_after = None
    localsession.save(world.sessions, local)
    world.tr.user("three")
    r = world.deliver()
    assert r.error is None, r.error
    assert world.cursor() == world.tr.line_count() - 1
    assert world.server.sends == 2  # the first update is not sent again, "three" once
    assert set(count_lines(world).values()) == {1}


def _stuck_world(world):
    """A run left running whose server restarted under it (it never ends), past the age limit."""
    from subconscious.delivery import turns as delivery_turns

    world.server.busy = lambda: False

    def age():
        world.server._later.clear()  # the server restarted: the run stays "running"
        world.deliver()
        local = localsession.load(world.sessions, SID)
        assert local.running_since is not None
        local.running_since -= delivery_turns.RUN_AGE_LIMIT + 60  # half an hour later
        localsession.save(world.sessions, local)
    return age


def test_a_run_still_stuck_after_its_re_delivery_is_given_up_with_a_reason_and_a_status_line(
        world, caplog, tmp_path, monkeypatch):
    """Issue 25: a run that is still stuck after it was re-delivered by reference was re-delivered again and
    again (a new reference every half hour, the lines after it waiting for good). The second time it is
    given up: a logged reason, a ``status`` line (``--json`` too), and delivery goes on after it."""
    world.tr.user("one").assistant("two")
    world.server.script = ["timeout_running", "timeout_running"]  # the re-delivery gets stuck too
    world.deliver()
    age = _stuck_world(world)
    age()
    world.deliver()  # judged stuck: re-delivered by reference (its run stuck in turn)
    texts = lambda: [json.dumps(m["content"]) for m in world.server.messages if m["message_type"] == "user_message"]
    assert sum("claude_code_session_update_retry" in t for t in texts()) == 1 and world.cursor() == -1
    age()
    world.tr.user("three")
    world.deliver()
    assert sum("claude_code_session_update_retry" in t for t in texts()) == 1  # not a second time
    assert sum("one" in t for t in texts()) == 1 and sum("three" in t for t in texts()) == 1
    assert world.cursor() == world.tr.line_count() - 1
    assert "gave up on lines 0-1" in caplog.text and "re-delivered once for a stuck run" in caplog.text
    # what status says about it, as a user runs it
    import subprocess
    import sys

    env = {**__import__("os").environ, "SUBCONSCIOUS_STATE_DIR": str(tmp_path), "LETTA_HOME": str(tmp_path / "lh"),
           "LETTA_API_KEY": "", "LETTA_BASE_URL": "http://127.0.0.1:9"}
    out = subprocess.run([sys.executable, "-m", "subconscious", "status", "--json"], capture_output=True, text=True,
                         env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)["gave_up"]
    assert [(g["session"], g["lines"]) for g in got] == [(SID, [0, 1])] and "stuck" in got[0]["why"]
    out = subprocess.run([sys.executable, "-m", "subconscious", "status"], capture_output=True, text=True,
                         env={**env, "COLUMNS": "300"}, timeout=60)
    assert "gave up" in out.stdout and f"{SID}: lines 0-1" in out.stdout, out.stdout


class Killed(BaseException):
    """SIGKILL, in-process: no handler of the worker runs (it is not an Exception)."""


def test_a_notice_reaches_the_agent_once_whatever_file_operation_the_worker_is_killed_at(world, monkeypatch):
    """Issue 25: a worker killed between the cursor write and the notices record sent the notice again (the
    cursor had moved on, the notice was still queued). Killed at each of the worker's file operations and
    store writes in turn, then run again: the compaction notice and every line reach the agent once."""
    import os

    from subconscious.delivery import notices

    real = {name: getattr(os, name) for name in ("replace", "rename", "unlink", "link")}
    update = FakeStore.update_session
    point, n = 1, 0
    while True:
        world.server.rows[1:] = []
        world.store.sessions[SID] = SessionState(SID, conversation_id="conv-1", agent_id="agent-1")
        for p in list(world.sessions.iterdir()) if world.sessions.exists() else []:
            if p.name != f"{SID}.json":
                __import__("shutil").rmtree(p) if p.is_dir() else p.unlink()
        local = localsession.load(world.sessions, SID)
        local.attempt = local.attempt_key = local.attempt_after = local.anchor = None
        local.attempt_inserts = local.attempt_skipped = None
        localsession.save(world.sessions, local)
        world.tr.path.write_text("")
        world.tr.user("before the compaction").assistant("ok")
        notices.add(world.sessions, SID, "compacted", 2, trigger="manual", summary="SUMMARY-TEXT")
        world.tr.user("after it")
        ops = [0]

        def op(f):
            def wrapped(*a, **k):
                ops[0] += 1
                if ops[0] == point:
                    raise Killed()
                return f(*a, **k)
            return wrapped
        for name, f in real.items():
            monkeypatch.setattr(os, name, op(f))
        monkeypatch.setattr(FakeStore, "update_session", op(update))
        try:
            world.deliver()
            killed = False
        except Killed:
            killed = True
        for name, f in real.items():
            monkeypatch.setattr(os, name, f)
        monkeypatch.setattr(FakeStore, "update_session", update)
        for _ in range(3):
            world.deliver()
        sent = [json.dumps(m["content"]) for m in world.server.messages if m["message_type"] == "user_message"]
        assert sum("SUMMARY-TEXT" in t for t in sent) == 1, (point, sent)
        assert set(count_lines(world).values()) == {1}, point
        assert world.cursor() == world.tr.line_count() - 1
        n += 1
        if not killed:
            break
        point += 1
    assert n >= 5  # every point was reached (the attempt, the notice, the cursor, the local file, the marker), then a run with no kill
