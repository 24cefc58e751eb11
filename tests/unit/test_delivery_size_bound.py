"""Issue 25, item 1: the update's size bound is a bound. Measured where the user's server sees it: the text of
every user message the real worker sends (the fake server records it), with production's bound (a 32k-token
agent: 32,000 characters) — after escaping, with inserts (subagents, compaction, a lagging answer) counted.
A line larger than the bound is cut with a visible marker (the agent learns how much it does not see); an
update the server refuses for its size is cut, not resent unchanged."""
from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from subconscious.local import sessions as localsession
from subconscious.delivery import notices
from subconscious.delivery import worker
from subconscious.delivery.plan import update_limit
from subconscious.letta.errors import LettaHTTPError
from subconscious.letta.messages import content_text
from subconscious.state.records import SessionState
from subconscious.delivery.transcript import Insert, Message, build_update, complete_lines, parse_line, xml_escape
from subconscious.delivery.update_xml import CUT_MARK
from tests.harness.fake_letta_conv import FakeLetta, FakeStore, fake_runtime
from tests.harness.transcripts import Transcript
from tests.harness.sizes import examples

SID = "bound-1"
BOUND = update_limit(32_000)  # what production plans with for the fake's 32k-token agent
MARK = CUT_MARK.split("%d")[0].strip()
MARKUP = '<i>&&</i>'  # 3.2x longer escaped, like the issue's pasted line


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch):
    monkeypatch.setattr(worker.time, "sleep", lambda s: None)


class World:
    def __init__(self, tmp_path, server=None):
        self.server = server or FakeLetta()
        self.store = FakeStore()
        self.store.sessions[SID] = SessionState(SID, conversation_id="conv-1", agent_id="agent-1")
        self.rt = fake_runtime(tmp_path, self.store)
        self.tmp = tmp_path
        self.tr = Transcript(tmp_path / "t.jsonl", SID, str(tmp_path))
        self.sessions = tmp_path / "sessions"
        local = localsession.load(self.sessions, SID)
        local.transcript_path = str(self.tr.path)
        localsession.save(self.sessions, local)

    def deliver(self):  # production's bound: no max_chars given, the agent's context window decides
        return worker.deliver(self.rt, SID, client=self.server)

    def cursor(self):
        return self.store.session(SID).last_processed_index

    def sent(self) -> list[str]:
        return [content_text(m["content"]) for m in self.server.messages if m["message_type"] == "user_message"]

    def raw(self, obj: dict) -> None:
        self.tr._write({"uuid": str(uuid.uuid4()), "sessionId": SID, **obj})

    def subagent(self, n: int, report: str) -> None:
        t = Transcript(self.tmp / f"agent-{n}.jsonl", SID, str(self.tmp))
        t.user(f"task {n}").assistant(report)
        notices.add(self.sessions, SID, "subagent", self.tr.line_count(), key=f"subagent-a{n}", path=str(t.path),
                    agent_type="general-purpose", agent_id=f"a{n}")


def check_bound(w: World) -> list[str]:
    sent = w.sent()
    assert sent, "nothing was sent"
    longest = max(len(t) for t in sent)
    print(f"bound {BOUND}: {len(sent)} messages sent, longest {longest} ({longest / BOUND:.2f}x)")
    assert longest <= BOUND
    return sent


def test_a_markup_heavy_pasted_line_stays_within_the_bound_and_says_where_it_was_cut(tmp_path):
    w = World(tmp_path)
    w.tr.user(MARKUP * 11_000).assistant("ok")  # 99k characters (old: 102,745 sent, the issue's 101,348)
    w.deliver()
    sent = check_bound(w)
    assert w.cursor() == w.tr.line_count() - 1  # delivered, not stuck
    assert any(MARK in t and xml_escape(MARKUP * 50) in t for t in sent)  # as much as fits, and a marker
    assert any("\nok\n" in t for t in sent)


def test_one_line_of_six_long_text_blocks_stays_within_the_bound(tmp_path):
    w = World(tmp_path)
    blocks = [{"type": "text", "text": ("block %d " % i) * 5000} for i in range(6)]
    w.raw({"type": "assistant", "message": {"id": "msg_6", "role": "assistant", "content": blocks}})
    w.tr.user("after")  # old: 6.0x the bound in one message
    w.deliver()
    sent = check_bound(w)
    assert w.cursor() == w.tr.line_count() - 1
    cut = [t for t in sent if MARK in t]
    assert len(cut) == 1 and "block 0 block 0" in cut[0]
    assert any("after" in t for t in sent)


def test_a_five_megabyte_line_of_angle_brackets_stays_within_the_bound(tmp_path):
    w = World(tmp_path)
    w.tr.user("<" * 5_000_000).user("next")  # old: 128,679 characters sent, 4.0x
    w.deliver()
    sent = check_bound(w)
    assert w.cursor() == w.tr.line_count() - 1
    assert any(MARK in t and "&lt;" * 1000 in t for t in sent) and any("next" in t for t in sent)


def test_six_subagents_finishing_together_stay_within_the_bound_and_each_arrives(tmp_path):
    w = World(tmp_path)
    w.tr.user("run six agents")
    for n in range(6):
        w.subagent(n, ("report %d: " % n) + "x" * 30_000)
    w.tr.assistant("all done")  # old: the six inserts in one message, 3.0x
    w.deliver()
    sent = check_bound(w)
    assert w.cursor() == w.tr.line_count() - 1
    assert notices.load_all(w.sessions, SID) == []  # every notice delivered (and dropped)
    for n in range(6):
        assert sum(("report %d: " % n) in t for t in sent) == 1  # each subagent once
    assert sum("all done" in t for t in sent) == 1


def test_a_lagging_answer_of_200_kb_stays_within_the_bound(tmp_path):
    w = World(tmp_path)
    w.tr.user("write a lot")
    answer = "the answer <&> " * 14_000  # 210k characters, in the Stop hook's input only
    from subconscious.delivery.transcript import answer_digest
    d = answer_digest(answer)
    notices.add(w.sessions, SID, "answer", w.tr.line_count(), key="answer-" + d, digest=d,
                text=answer[:notices.ANSWER_CUT])
    w.deliver()  # old: the 50,000-character cut, escaped, in one message
    sent = check_bound(w)
    assert any("the answer &lt;&amp;&gt;" in t and MARK in t for t in sent)
    assert notices.load_all(w.sessions, SID) == [] or all(n["kind"] == "answered" for n in notices.load_all(w.sessions, SID))


class RefusingLetta(FakeLetta):
    """A server whose request limit is below what the agent's context window suggests: 413 for a longer one."""

    def __init__(self, limit: int, status: int = 413, body: str = "Request Entity Too Large"):
        super().__init__()
        self.limit, self.status, self.body, self.refused = limit, status, body, []

    def send_message_streaming(self, conversation_id, messages, **kw):
        text = messages if isinstance(messages, str) else content_text(messages[0].get("content"))
        if len(text) > self.limit:
            self.refused.append(text)
            raise LettaHTTPError(f"sending: HTTP {self.status}", "", status=self.status, detail=self.body)
        return super().send_message_streaming(conversation_id, messages, **kw)


@pytest.mark.parametrize("status,body", [(413, "Request Entity Too Large"),
                                         (400, "message too long for the model's context window"),
                                         (422, "input exceeds the maximum size")])
def test_an_update_refused_for_its_size_is_cut_not_resent_unchanged(tmp_path, status, body):
    server = RefusingLetta(9_000, status, body)
    w = World(tmp_path, server)
    w.tr.user("a" * 20_000).assistant("ok").user("later line")
    for _ in range(3):  # the worker's own retries (a hook starts it again); old: the same text refused each time
        w.deliver()
        if w.cursor() == w.tr.line_count() - 1:
            break
    assert w.cursor() == w.tr.line_count() - 1
    assert len(server.refused) == len(set(server.refused))  # never the same refused text twice
    sent = w.sent()
    assert all(len(t) <= 9_000 for t in sent) and any("later line" in t for t in sent)
    assert any(MARK in t for t in sent)


def test_a_refusal_that_is_not_about_size_is_retried_unchanged_later(tmp_path):
    server = RefusingLetta(100, 400, "the conversation is waiting for approval of tool calls")
    w = World(tmp_path, server)
    w.tr.user("hello")
    w.deliver()
    assert w.cursor() == -1 and localsession.load(w.sessions, SID).size_cap is None


# --------------------------------------------------------------------------- the property, on the pure plan


def _line(kind: str, content) -> str:
    role = "assistant" if kind == "assistant" else "user"
    return json.dumps({"type": kind, "uuid": uuid.uuid4().hex, "message": {"role": role, "content": content}})


markup = st.text(st.sampled_from('<>&"x \n'), max_size=400).map(lambda t: t * 40)
plain = st.text(max_size=50)
lines_st = st.lists(st.one_of(
    markup.map(lambda t: _line("user", t)),
    plain.map(lambda t: _line("user", t)),
    st.lists(markup, min_size=1, max_size=8).map(
        lambda ts: _line("assistant", [{"type": "text", "text": t} for t in ts])),
    st.just(json.dumps({"type": "last-prompt", "lastPrompt": "x"})),
), min_size=1, max_size=8)


@st.composite
def inserts_st(draw, n_lines):
    out = []
    for k in range(draw(st.integers(0, 7))):
        at = draw(st.integers(0, n_lines))
        msgs = tuple(Message(draw(st.sampled_from(["system", "subagent", "claude_code"])), draw(markup),
                             draw(st.sampled_from([None, 'gen"eral<'])))
                     for _ in range(draw(st.integers(1, 3))))
        out.append(Insert(at, f"ins{k}", msgs))
    return out


def _drain(lines, inserts, max_chars):
    cursor, queue, payloads, covered = -1, list(inserts), [], []
    for _ in range(500):
        u = build_update(lines, cursor, SID, max_chars=max_chars, inserts=queue)
        if u.payload is not None:
            payloads.append(u)
            covered.append((cursor + 1, u.cursor))
        queue = [i for i in queue if i.key not in u.inserted]
        if u.cursor == cursor and not u.inserted:
            assert u.payload is None
            break
        cursor = u.cursor
    return payloads, covered, queue, cursor


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(lines_st.flatmap(lambda ls: st.tuples(st.just(ls), inserts_st(len(ls)))),
       st.sampled_from([4_000, 9_000, 32_000]))
def test_every_planned_update_is_within_the_bound_and_every_line_reaches_one(data, max_chars):
    lines, inserts = data
    payloads, covered, left, cursor = _drain(lines, inserts, max_chars)
    assert left == [] and cursor == len(lines) - 1  # every insert and every line was taken
    assert all(len(u.payload) <= max_chars for u in payloads)
    for i, line in enumerate(lines):  # each line in exactly one update, its text whole or cut with a marker
        holders = [u for u, (a, b) in zip(payloads, covered) if a <= i <= b]
        assert len(holders) <= 1
        texts = [e.text for e in parse_line(line).entries if getattr(e, "text", "").strip()]
        if texts:
            assert len(holders) == 1
            u = holders[0]
            assert all(xml_escape(t.strip()) in u.payload for t in texts) or MARK in u.payload


def test_the_extreme_cases_of_the_issue_hold_in_the_plan():
    lines = complete_lines("\n".join([_line("user", "<" * 5_000_000),
                                      _line("assistant", [{"type": "text", "text": MARKUP * 4000}] * 6), ""]))
    subs = [Insert(1, f"s{n}", (Message("subagent", "r" * 16_000, "general-purpose"),)) for n in range(6)]
    answer = Insert(2, "answer", (Message("claude_code", "<&>" * 70_000),))
    payloads, covered, left, cursor = _drain(lines, [*subs, answer], BOUND)
    assert left == [] and cursor == 1
    print("sizes:", [len(u.payload) for u in payloads])
    assert max(len(u.payload) for u in payloads) <= BOUND


def test_an_entry_whose_element_alone_is_over_the_room_still_leaves_a_visible_marker():
    from subconscious.delivery.update_xml import fit_messages, message_size
    msgs = [Message("subagent", "report", '"' * 200)]  # an attribute 1,200 characters long escaped
    out = fit_messages(msgs, 500)
    assert sum(message_size(m) for m in out) <= 500 and len(out) == 1 and MARK in out[0].text


def test_one_line_of_20000_small_text_blocks_is_cut_within_the_bound():
    """Thousands of blocks in one line: each is an element of its own (overhead counted); the cut keeps whole
    blocks and names the rest. (Benchmark figure printed: planning it was quadratic, ~10 s, before.)"""
    import time
    line = json.dumps({"type": "assistant", "message": {"id": "m", "role": "assistant",
                                                         "content": [{"type": "text", "text": "<&"}] * 20_000}})
    t0 = time.perf_counter()
    u = build_update([line], -1, SID, max_chars=BOUND)
    print(f"20,000 blocks planned in {time.perf_counter() - t0:.2f} s")
    assert len(u.payload) <= BOUND and MARK in u.payload and u.cursor == 0


# --------------------------------------------------------------------------- issue 25, round 2: small bounds


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(lines_st, st.integers(300, 3_000), st.sampled_from([None, {"id": "p" * 80, "name": "n<&>" * 20}]))
def test_a_small_bound_is_held_or_refused_with_a_clear_message_never_exceeded(lines, max_chars, project):
    """Below ~1,300 characters the bound could be exceeded: the envelope (~760 characters) was not counted
    against a floor of 500 for text. Now every update is within the bound, or the bound is refused, saying
    what it would need."""
    from subconscious.delivery.transcript import BoundTooSmall

    cursor = -1
    for _ in range(200):
        try:
            u = build_update(lines, cursor, SID, max_chars=max_chars, project=project)
        except BoundTooSmall as exc:
            need = int(str(exc).split("at least ")[1].split()[0])
            assert need > max_chars and f"at most {max_chars} characters" in str(exc)
            return
        if u.payload is not None:
            assert len(u.payload) <= max_chars
        if u.cursor == cursor:
            break
        cursor = u.cursor
    assert cursor == len(lines) - 1


def test_the_worker_refuses_a_bound_that_cannot_hold_an_update_and_says_why(tmp_path):
    w = World(tmp_path)
    w.tr.user("hello " * 100)
    r = worker.deliver(w.rt, SID, client=w.server, max_chars=600)
    assert w.sent() == [] and w.cursor() == -1  # nothing over the bound went out
    assert "nothing can be sent within that bound" in r.error and "at least" in r.error
    assert "nothing can be sent within that bound" in localsession.pending_reason(w.sessions, SID)


def test_a_size_cap_set_after_a_refusal_lapses_and_the_full_bound_is_tried_again(tmp_path, caplog):
    """The size cap a 413 set was kept for good: a proxy limit lifted later still cut every update of the
    session to a fraction of the agent's window. It holds SIZE_CAP_TTL (a day), then the full bound is tried
    again (a new refusal halves it anew)."""
    caplog.set_level("INFO", logger="subconscious")
    server = RefusingLetta(9_000)
    w = World(tmp_path, server)
    w.tr.user("a" * 20_000).assistant("ok")
    w.deliver()
    w.deliver()
    local = localsession.load(w.sessions, SID)
    assert local.size_cap and local.size_cap < 20_000 and w.cursor() == w.tr.line_count() - 1
    server.limit = 10 ** 9  # the proxy's limit was lifted
    w.tr.user("b" * 20_000)
    w.deliver()
    assert max(len(t) for t in w.sent() if "bbbb" in t) < 10_000  # within the day: still cut to the cap
    local = localsession.load(w.sessions, SID)
    local.size_cap_at -= worker.SIZE_CAP_TTL + 60  # a day later
    localsession.save(w.sessions, local)
    w.tr.user("c" * 20_000)
    w.deliver()
    assert any(("c" * 20_000) in t for t in w.sent())  # whole again: the cap lapsed
    assert localsession.load(w.sessions, SID).size_cap is None and "lapsed" in caplog.text
