"""Exactly-once delivery, proved over many deterministic schedules (issues 10 and 25).

A schedule is an order of hook events (the transcript grows, a Stop hands it to a worker, a retry worker
runs without a Stop, the transcript grows *while* a worker sends) and a script of server outcomes per send
(tests/harness/fake_letta_conv.py: ok, error after store, completed + llm_api_error after a step, timeout
after store with the run done or still going, 409, down, long tool-heavy turns of 66+ messages, a reply
lost after a long turn, a worker dying mid-turn) — any send, tool results too, takes the next outcome. The
fake pages by rows as Letta 0.16.8 does (limit counts rows, message-less rows among them) and the worker
lists through the real client's paging. The worker's own bound is used (the agent's context window as
the fake reports it: production's ``update_limit``), never a test's max_chars. The real worker
(subconscious/delivery/worker.py) and the real tool loop run in-process against the fake server. After the schedule
the retries run until nothing is pending. The oracle, per content line of the transcript:

- the agent's turns that COMPLETED OK on it (the update, or its re-delivery by reference): exactly once;
- the user messages the server STORED carrying its text, whether or not their turn completed: at most
  once (the agent sees a stored message in its history: a full resend after a failure is a duplicate);
- the start message: stored once, completed once.

Worker processes SIGKILLed at random points are tests/integration/test_delivery_kill_schedules.py.
"""
from __future__ import annotations

import itertools
import random
import re
import time

import pytest

from subconscious.local import sessions as localsession
from subconscious.delivery import worker
from subconscious.state.records import SessionState
from subconscious.letta.messages import content_text
from subconscious.delivery.transcript import complete_lines, parse_line
from tests.harness.fake_letta_conv import FakeLetta, FakeStore, fake_runtime
from tests.harness.sizes import size
from tests.harness.transcripts import Transcript

SID = "sched-1"
OUTCOMES = ["ok", "error", "error_step", "error_raise", "timeout_ok", "timeout_running", "conflict", "down",
            "tools", "tools_cut", "tools_die"]
_STORED = re.compile(r'<lines first="(\d+)" last="(\d+)"')
WINDOW = 4_000  # the agent's context window (tokens) the fake reports: production's smallest bound, 4,000 chars


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch):
    monkeypatch.setattr(worker.time, "sleep", lambda s: None)
    from subconscious.agent_tools import loop
    monkeypatch.setattr(loop.time, "sleep", lambda s: None)


class World:
    def __init__(self, tmp, script, max_chars=None, blank_every=3):
        self.tmp, self.max_chars = tmp, max_chars
        self.server = FakeLetta(script, blank_every=blank_every, context_window=WINDOW)
        self.during: list = []  # transcript growth due while the next send is on its way
        send = self.server.send_message_streaming

        def sending(*a, **k):  # the transcript grows while a worker delivers (Claude Code goes on writing)
            while self.during:
                self.during.pop(0)()
            return send(*a, **k)
        self.server.send_message_streaming = sending
        self.store = FakeStore()
        self.rt = fake_runtime(tmp, self.store)
        self.sessions = tmp / "sessions"
        self.tr = Transcript(tmp / "t.jsonl", SID, str(tmp))
        self.n = 0
        self.store.sessions[SID] = SessionState(SID, conversation_id="conv-1", agent_id="agent-1")
        local = localsession.load(self.sessions, SID)
        local.pending_start = "<claude_code_session_start>\n<timestamp>t0</timestamp>\n</claude_code_session_start>"
        local.transcript_path = str(self.tr.path)
        localsession.save(self.sessions, local)

    def grow(self, long: bool = False) -> None:
        self.n += 1
        self.tr.user(f"question {self.n} " + "q" * 80)
        if long:  # a tool-heavy Claude Code turn: many lines, bigger than one update may be
            for i in range(12):
                self.tr.assistant(f"step {self.n}.{i} " + "a<&>" * 100)
        self.tr.assistant(f"answer {self.n}").bookkeeping()

    def run_worker(self) -> worker.Delivery:
        return worker.deliver(self.rt, SID, client=self.server, max_chars=self.max_chars)

    def drain(self, rounds: int = 40) -> None:
        for _ in range(rounds):
            self.server.tick()
            r = self.run_worker()
            local = localsession.load(self.sessions, SID)
            if (r.error is None and not r.more and not local.pending_start and not local.attempt
                    and self.store.session(SID).last_processed_index == self.tr.line_count() - 1):
                return
        raise AssertionError(f"never drained: {localsession.load(self.sessions, SID)}")

    def check(self) -> tuple[int, int]:
        """(duplicates, losses) by the oracle."""
        lines = complete_lines(self.tr.path.read_text())
        content = {i for i, l in enumerate(lines) if parse_line(l).status == "entries"}
        count = {i: 0 for i in range(len(lines))}
        stored = {i: 0 for i in range(len(lines))}
        starts = stored_starts = 0
        for got in self.server.ok_turns():
            if got == "start":
                starts += 1
                continue
            for i in range(got[0], got[1] + 1):
                count[i] += 1
        for m in self.server.messages:  # every message the server kept, its turn completed or not
            text = content_text(m.get("content")) if m["message_type"] == "user_message" else ""
            stored_starts += text.startswith("<claude_code_session_start>\n")  # not its re-delivery
            r = _STORED.search(text)  # an update's own marker (a re-delivery by reference carries no text)
            for i in range(int(r.group(1)), int(r.group(2)) + 1) if r else ():
                stored[i] += 1
        dup = (sum(max(0, c - 1) for c in count.values()) + max(0, starts - 1)
               + sum(max(0, c - 1) for c in stored.values()) + max(0, stored_starts - 1))
        lost = sum(1 for i in content if count[i] == 0) + (starts == 0)
        return dup, lost


# a schedule: which events happen, in order ("g" grow, "G" grow a long turn, "w" a worker: Stop or retry,
# "s" the transcript grows while the next worker sends)
SHAPES = ["gwGwgw", "ggwGGw", "gGwswgw", "Gwsgwww"]


def run_schedule(tmp, shape: str, script, blank_every: int = 3) -> tuple[int, int, World]:
    w = World(tmp, script, blank_every=blank_every)
    for ev in shape:
        if ev == "g":
            w.grow()
        elif ev == "G":
            w.grow(long=True)
        elif ev == "s":
            w.during.append(lambda: w.grow(long=w.n % 2 == 0))
        else:
            w.server.tick()
            w.run_worker()
    w.drain()
    return (*w.check(), w)


def test_every_line_reaches_the_agents_completed_turns_exactly_once(tmp_path_factory):
    t0 = time.monotonic()
    rng = random.Random(25)
    scripts = [list(s) for s in itertools.product(OUTCOMES, repeat=2)]  # every pair of outcomes, once
    scripts += [[rng.choice(OUTCOMES) for _ in range(rng.randint(3, 9))] for _ in range(size(60, 1500))]
    explored = dups = losses = 0
    bad = []
    long_seen = blank_pages = 0
    for n, script in enumerate(scripts):
        for shape in (SHAPES if n < size(40, 10 ** 6) else [SHAPES[n % len(SHAPES)]]):
            d, l, w = run_schedule(tmp_path_factory.mktemp("s"), shape, script, blank_every=1 + n % 5)
            explored += 1
            dups += d
            losses += l
            long_seen += len(w.server.messages) > 60
            blank_pages += sum(1 for r in w.server.rows if r.get("_no_message")) > 0
            if d or l:
                bad.append((shape, script, d, l))
    print(f"\ndelivery schedules explored: {explored}, duplicates: {dups}, losses: {losses} "
          f"({long_seen} with conversations over 60 messages, {blank_pages} with message-less rows) "
          f"in {time.monotonic() - t0:.1f} s")
    assert not bad, bad[:5]
    assert explored >= size(300, 3000) and long_seen > 50


def test_a_backlog_drains_in_pieces_bounded_by_the_agents_window(tmp_path):
    w = World(tmp_path, ["down"] * 3)
    for _ in range(6):
        w.grow(long=True)
        w.run_worker()  # the server is down: the backlog grows
    w.drain()
    sizes = [len(content_text(m["content"])) for m in w.server.messages if m["message_type"] == "user_message"]
    assert len(sizes) > 6 and max(sizes) <= WINDOW  # pieces, each within production's bound for the window
    assert w.check() == (0, 0)
