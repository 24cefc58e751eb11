"""Issue 25: Stop's shortcut (hotpath.handed_over) and its full path (events/stop.py) agree.

The full path queues Claude's final answer (``last_assistant_message``) as a notice when the transcript file
has not recorded it yet; the shortcut never read it, so a lagging answer was dropped whenever the shortcut
finished the hook. Here both run on the same generated inputs — transcripts of user, assistant (one or
several text blocks), sidechain, meta, bookkeeping and 40 kB lines, an unterminated last line, and an answer that
is the file's last text, ends with it, differs from it, or is blank — and what is queued for the agent
(the notices, their text) must be the same: the shortcut either finishes with nothing to queue, or hands
over to the full path. The rule they share is checked against the full path's own composition too.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from subconscious.hooks import answer_tail
from subconscious.hooks import hotentry as hotpath  # (the entry's cheap path lives there)
from subconscious.local import sessions as localsession
from subconscious.delivery import notices
from subconscious.delivery.transcript import complete_lines
from tests.harness.fake_letta import FakeLetta
from tests.unit.test_injection_hooks import Session
from tests.harness.sizes import examples

WORDS = st.sampled_from(["done", "Done.", "  done  ", "all set", "the fix is in", "", " ", "ok\nok"])


@st.composite
def lines(draw):
    out = []
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["user", "assistant", "blocks", "sidechain", "meta", "bookkeeping", "big"]))
        base = {"uuid": str(uuid.uuid4()), "sessionId": "s"}
        if kind == "user":
            out.append({**base, "type": "user", "message": {"role": "user", "content": draw(WORDS)}})
        elif kind == "big":  # past the first window the shortcut reads (answer_tail.FIRST_BYTES)
            out.append({**base, "type": "user", "message": {"role": "user", "content": "y" * 40_000}})
        elif kind == "bookkeeping":
            out.append({"type": draw(st.sampled_from(["last-prompt", "cost-state", "summary"])), "x": "assistant"})
        else:
            blocks = [{"type": "text", "text": draw(WORDS)} for _ in range(draw(st.integers(1, 3)))]
            if draw(st.booleans()):
                blocks.append({"type": "tool_use", "id": "t", "name": "Read", "input": {}})
            line = {**base, "type": "assistant", "message": {"role": "assistant", "content": blocks}}
            if kind == "sidechain":
                line["isSidechain"] = True
            elif kind == "meta":
                line["isMeta"] = True
            out.append(line)
    text = "".join(json.dumps(x) + "\n" for x in out)
    if draw(st.booleans()):
        text += '{"type": "assistant", "message": {"content": "half a li'  # still being written
    return text


@st.composite
def answers(draw, text):
    texts = [t for t in notices.assistant_texts(complete_lines(text))]
    last = texts[-1] if texts else "nothing"
    return draw(st.one_of(st.none(), st.just(last), st.just("First block.\n\n" + last), WORDS,
                          st.just("a lagging answer " + uuid.uuid4().hex[:6])))


@given(st.data())
@settings(max_examples=examples(200), deadline=None)
def test_the_shared_rule_is_the_full_paths_rule(data):
    text = data.draw(lines())
    answer = data.draw(answers(text))
    texts = notices.assistant_texts(complete_lines(text))
    old = bool(isinstance(answer, str) and answer.strip()) and not (texts and notices.answer_recorded(answer, texts[-1:]))
    assert answer_tail.recorded(answer or "", answer_tail.last_assistant_text(text)) == bool(
        texts and notices.answer_recorded(answer or "", texts[-1:]))
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        f.write(text)
    try:
        assert answer_tail.lagging(f.name, answer) is old
    finally:
        os.unlink(f.name)


@pytest.fixture(scope="module")
def setup():
    tmp = Path(tempfile.mkdtemp())
    letta = FakeLetta()
    s = Session(tmp, letta)
    conv = s.seed()
    sessions = tmp / "local" / "sessions"
    local = localsession.load(sessions, s.sid)
    local.home, local.start_for = s.env["LETTA_HOME"], conv
    localsession.save(sessions, local)
    yield s, sessions
    letta.close()
    shutil.rmtree(tmp, ignore_errors=True)


def queued(sessions: Path, sid: str) -> list[tuple]:
    return sorted((n.get("kind"), n.get("text")) for n in notices.load_all(sessions, sid))


@given(st.data())
@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_the_shortcut_and_the_full_path_queue_the_same(setup, monkeypatch, data):
    s, sessions = setup
    text = data.draw(lines())
    answer = data.draw(answers(text))
    path = s.tmp / "transcript.jsonl"
    path.write_text(text)
    extra = {"transcript_path": str(path)}
    if answer is not None:
        extra["last_assistant_message"] = answer
    raw = json.dumps(s.data("stop", **extra)).encode()
    monkeypatch.setattr(hotpath, "_spawn_worker", lambda *a: None)
    monkeypatch.setattr(hotpath, "_pickup", lambda *a: None)
    monkeypatch.setattr("subconscious.delivery.spawn.spawn_worker", lambda *a, **k: None)

    def fresh():
        shutil.rmtree(sessions / "notices", ignore_errors=True)

    fresh()
    s.in_process("stop", **extra)  # the full path alone
    full = queued(sessions, s.sid)
    fresh()
    if not hotpath.handed_over(raw, s.env):  # the shortcut, handing over when it must
        s.in_process("stop", **extra)
    short = queued(sessions, s.sid)
    fresh()
    assert short == full
    lag = isinstance(answer, str) and bool(answer.strip()) and not answer_tail.recorded(
        answer, answer_tail.last_assistant_text(text))
    assert bool(full) == lag and (not lag or full[0][1].strip() == answer.strip()[:len(full[0][1].strip())])
