"""A turn whose answer reaches the transcript file after the worker's first read (Claude Code writes its lines
late on a loaded machine): the prompt goes in one update, the answer in the next, each once.

Recorded in a full-suite run of tests/integration/test_plugin_setup.py: the worker delivered lines 0-13
(the prompt ``[[text:Noted <tag>.]] Second session. ...``: the fake API's answer directive is part of the
prompt) and, in its next round, lines 14-26 (Claude's ``Noted <tag>.``). Nothing came twice, but the test
counted the updates holding the words ``Noted <tag>.`` and got two. Answers are counted as Claude's message
(``times_said``), not as words that a prompt may hold too.
"""
from __future__ import annotations

from subconscious.local import sessions as localsession
from subconscious.delivery import worker
from subconscious.state.records import SessionState
from tests.harness.fake_letta_conv import FakeLetta, FakeStore, fake_runtime
from tests.harness.hooks import times_said, user_texts
from tests.harness.transcripts import Transcript

SID = "split-1"


def test_an_answer_written_after_the_first_read_is_delivered_once_and_counted_once(tmp_path):
    tag = "bf706eb6"
    fact = f"plugin-setup-{tag}-keep-commits-small"
    server, store = FakeLetta(), FakeStore()
    rt = fake_runtime(tmp_path, store)
    store.sessions[SID] = SessionState(SID, conversation_id="conv-1", agent_id="agent-1")
    tr = Transcript(tmp_path / "t.jsonl", SID, str(tmp_path))
    local = localsession.load(tmp_path / "sessions", SID)
    local.transcript_path = str(tr.path)
    localsession.save(tmp_path / "sessions", local)
    tr.user(f"[[text:Noted {tag}.]] Second session.\nREMEMBER guidance: {fact}").bookkeeping()

    send = server.send_message_streaming
    flushed = []

    def send_then_flush(*a, **k):  # Claude Code writes the answer's lines while the first update is sent
        try:
            return send(*a, **k)
        finally:
            if not flushed:
                flushed.append(tr.assistant(f"Noted {tag}.").bookkeeping())

    server.send_message_streaming = send_then_flush
    result = worker.deliver(rt, SID, client=server, max_chars=30_000)

    assert result.error is None and result.sent == 2
    assert server.ok_turns() == [(0, 1), (2, 3)]  # two updates, no line twice
    updates = user_texts(server.messages, "<claude_code_session_update>")
    assert sum(fact in u for u in updates) == 1
    assert times_said(updates, f"Noted {tag}.") == 1  # the answer reached the agent once
    assert sum(f"Noted {tag}." in u for u in updates) == 2  # ... though the prompt's update holds its words too
