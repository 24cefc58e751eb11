"""Notices (a subagent's transcript, a compaction, a final answer the file lags on) reach the agent exactly
once, in their place among the transcript lines: the pure placement in transcript.build_update, and the
notice files the worker keeps (notices.py) across an answer that arrives before its transcript line."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from subconscious.delivery import notices
from subconscious.state.merge import merge_sessions
from subconscious.state.records import SessionState, parse_session
from subconscious.delivery.transcript import Insert, Message, build_update
from tests.harness.sizes import examples

SID = "11111111-2222-3333-4444-555555555555"


def line(i: int, kind: str) -> str:
    if kind == "user":
        return json.dumps({"type": "user", "uuid": f"u{i}", "message": {"role": "user", "content": f"prompt-{i}"}})
    if kind == "assistant":
        return json.dumps({"type": "assistant", "uuid": f"u{i}",
                           "message": {"role": "assistant", "content": [{"type": "text", "text": f"answer-{i}"}]}})
    return json.dumps({"type": "attachment", "uuid": f"u{i}"})


def text_of(i: int, kind: str) -> str | None:
    return {"user": f"prompt-{i}", "assistant": f"answer-{i}"}.get(kind)


def deliver_all(lines, inserts, max_chars):
    """The worker's rounds, pure: build, 'deliver', drop what the payload carried, go on from its cursor."""
    cursor, pending, payloads = -1, list(inserts), []
    for _ in range(10 * (len(lines) + len(inserts)) + 10):
        u = build_update(lines, cursor, SID, max_chars=max_chars, inserts=pending)
        if u.payload is not None:
            payloads.append(u.payload)
        pending = [i for i in pending if i.key not in u.inserted]
        assert u.cursor >= cursor
        cursor = u.cursor
        if cursor >= len(lines) - 1 and not pending:
            return payloads
    raise AssertionError("delivery did not finish")


@settings(max_examples=examples(150), deadline=None)
@given(kinds=st.lists(st.sampled_from(["user", "assistant", "attachment"]), min_size=0, max_size=12),
       ats=st.lists(st.integers(min_value=-1, max_value=15), max_size=4),
       max_chars=st.one_of(st.none(), st.integers(min_value=900, max_value=1_100)))
def test_every_insert_reaches_the_agent_once_before_its_line(kinds, ats, max_chars):
    lines = [line(i, k) for i, k in enumerate(kinds)]
    inserts = [Insert(at, f"n{j}", (Message("system", f"notice-{j}-here"),)) for j, at in enumerate(ats)]
    stream = "".join(deliver_all(lines, inserts, max_chars))
    for j, at in enumerate(ats):
        assert stream.count(f"notice-{j}-here") == 1
        pos = stream.index(f"notice-{j}-here")
        for i, k in enumerate(kinds):  # lines before its place come before it, the others after
            t = text_of(i, k)
            if t is not None:
                assert (stream.index(f"\n{t}\n") < pos) == (i < at), (i, at)
    for i, k in enumerate(kinds):  # and every line's text once, as before
        t = text_of(i, k)
        if t is not None:
            assert stream.count(f"\n{t}\n") == 1


def _round(sessions, lines, cursor):
    """One worker round with the notice files: (payload or None, new cursor)."""
    inserts, moot, skip = notices.inserts(notices.load_all(sessions, SID), lines, 0, 100_000)
    notices.remove(sessions, SID, moot)
    u = build_update(lines, cursor, SID, inserts=inserts, skip_answers=skip)
    notices.delivered(sessions, SID, u.inserted, u.skipped)  # the turn on it completed
    return u.payload, u.cursor


def test_an_answer_the_file_lags_on_is_delivered_once_also_when_its_line_arrives(tmp_path):
    sessions = tmp_path / "sessions"
    answer = "The final answer, from the hook."
    lines = [line(0, "user")]  # the Stop hook came before the file recorded the answer
    from subconscious.delivery.transcript import answer_digest

    notices.add(sessions, SID, "answer", len(lines), key="answer-x", digest=answer_digest(answer), text=answer)
    first, cursor = _round(sessions, lines, -1)
    assert first.count(answer) == 1 and first.count("prompt-0") == 1
    lines.append(json.dumps({"type": "assistant", "uuid": "late",
                             "message": {"content": [{"type": "text", "text": answer}]}}))
    lines.append(line(2, "user"))
    second, cursor = _round(sessions, lines, cursor)
    assert answer not in second and "prompt-2" in second  # its line is left out, what follows goes
    assert notices.load_all(sessions, SID) == []  # nothing left to skip or send
    lines.append(json.dumps({"type": "assistant", "uuid": "again",
                             "message": {"content": [{"type": "text", "text": answer}]}}))
    third, _ = _round(sessions, lines, cursor)
    assert third.count(answer) == 1  # the same words later are a new answer


def test_an_answer_whose_line_arrived_before_delivery_goes_once_by_its_line(tmp_path):
    sessions = tmp_path / "sessions"
    from subconscious.delivery.transcript import answer_digest

    answer = "Answer in time."
    lines = [line(0, "user")]
    notices.add(sessions, SID, "answer", 1, key="answer-y", digest=answer_digest(answer), text=answer)
    lines.append(json.dumps({"type": "assistant", "uuid": "a", "message": {"content": [{"type": "text", "text": answer}]}}))
    payload, _ = _round(sessions, lines, -1)
    assert payload.count(answer) == 1 and notices.load_all(sessions, SID) == []


def test_a_compaction_notice_is_redacted_and_a_missing_subagent_transcript_is_dropped(tmp_path):
    sessions = tmp_path / "sessions"
    notices.add(sessions, SID, "compacted", 0, trigger="auto", summary="user said password=hunter2hunter2")
    notices.add(sessions, SID, "subagent", 0, key="subagent-a1", path=str(tmp_path / "gone.jsonl"),
                agent_type="Explore", agent_id="a1")
    payload, _ = _round(sessions, [line(0, "user")], -1)
    assert "[Claude Code compacted this session (auto)" in payload and "hunter2" not in payload
    assert "Explore" not in payload and notices.load_all(sessions, SID) == []


def test_the_end_of_a_session_is_kept_merged_and_cleared_by_a_resume():
    s = SessionState(SID, conversation_id="conv-1").with_end("2026-12-01T10:00:00.000Z", "clear")
    back = parse_session(json.loads(json.dumps(s.to_json())), SID)
    assert (back.ended_at, back.end_reason) == ("2026-12-01T10:00:00.000Z", "clear")
    assert back.to_json()["endReason"] == "clear" and back.to_json()["sessionId"] == SID  # upstream keys stay
    from subconscious.state.clock import Stamp

    later = back.evolve(stamp=Stamp(5, 0), host="b").with_end(None, None)
    merged = merge_sessions(back.evolve(stamp=Stamp(1, 0), host="a"), later)
    assert merged.ended_at is None and "endedAt" not in merged.to_json()


def test_an_answer_of_several_blocks_that_arrived_in_time_is_not_sent_twice(tmp_path):
    sessions = tmp_path / "sessions"
    from subconscious.delivery.transcript import answer_digest, redact

    answer = "Part one, with password=s3cr3tvalue9.\n\nPart two."
    notices.add(sessions, SID, "answer", 1, key="answer-z", digest=answer_digest(answer), text=redact(answer))
    lines = [line(0, "user")] + [json.dumps({"type": "assistant", "uuid": f"b{i}", "message": {
        "content": [{"type": "text", "text": t}]}}) for i, t in enumerate(answer.split("\n\n"))]
    payload, _ = _round(sessions, lines, -1)
    assert payload.count("Part two.") == 1 and payload.count("Part one") == 1 and "s3cr3t" not in payload


def test_notes_shown_again_stay_under_claude_codes_cut_keeping_the_newest():
    from subconscious.injection.context import AgentMessage
    from subconscious.hooks.events.reinject import fit_notes

    notes = [AgentMessage(f"m{i}", None, f"note {i} " + "<&>" * 700) for i in range(5)]  # oldest first
    text = fit_notes("Shown again.", "Subconscious", notes)
    assert len(text) <= 10_000 and "note 4" in text and "note 0" not in text
    assert fit_notes("Shown again.", "Subconscious", notes[-1:]).count("<letta_message") == 1
