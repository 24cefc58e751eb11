"""Exactly-once delivery, proved over many deterministic schedules (issue 10).

A schedule is an order of hook events (the transcript grows, a Stop hands it to a worker, a retry worker
runs without a Stop) and a script of server outcomes per send (tests/harness/fake_letta_conv.py: ok, error
after store, timeout after store with the run done or still going, 409, down, long tool-heavy turns of
66+ messages, a reply lost after a long turn, a worker dying mid-turn). The real worker
(subconscious/worker.py) and the real tool loop run in-process against the fake server. After the schedule
the retries run until nothing is pending. The oracle: the transcript lines inside the agent's turns that
COMPLETED OK — each content line exactly once, the start message exactly once, every line covered.
"""
from __future__ import annotations

import itertools
import json
import random
import time

import pytest

from subconscious import localsession, worker
from subconscious.state.records import SessionState
from subconscious.transcript import complete_lines, parse_line
from tests.harness.fake_letta_conv import FakeLetta, FakeStore, fake_runtime
from tests.harness.transcripts import Transcript

SID = "sched-1"
OUTCOMES = ["ok", "error", "error_raise", "timeout_ok", "timeout_running", "conflict", "down", "tools",
            "tools_cut", "tools_die"]


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch):
    monkeypatch.setattr(worker.time, "sleep", lambda s: None)
    from subconscious.tools import loop
    monkeypatch.setattr(loop.time, "sleep", lambda s: None)


class World:
    def __init__(self, tmp, script, max_chars=600):
        self.tmp, self.max_chars = tmp, max_chars
        self.server = FakeLetta(script)
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
        if long:  # a tool-heavy Claude Code turn: many lines, bigger than max_chars
            for i in range(12):
                self.tr.assistant(f"step {self.n}.{i} " + "a" * 120)
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
        starts = 0
        for got in self.server.ok_turns():
            if got == "start":
                starts += 1
                continue
            for i in range(got[0], got[1] + 1):
                count[i] += 1
        dup = sum(max(0, c - 1) for c in count.values()) + max(0, starts - 1)
        lost = sum(1 for i in content if count[i] == 0) + (starts == 0)
        return dup, lost


# a schedule: which events happen, in order ("g" grow, "G" grow a long turn, "w" a worker: Stop or retry)
SHAPES = ["gwGwgw", "ggwGGw", "gGwwgw", "Gwgwww"]


def run_schedule(tmp, shape: str, script) -> tuple[int, int, World]:
    w = World(tmp, script)
    for ev in shape:
        if ev == "g":
            w.grow()
        elif ev == "G":
            w.grow(long=True)
        else:
            w.server.tick()
            w.run_worker()
    w.drain()
    return (*w.check(), w)


def test_every_line_reaches_the_agents_completed_turns_exactly_once(tmp_path_factory):
    t0 = time.monotonic()
    scripts = [list(s) for s in itertools.product(OUTCOMES, repeat=2)]
    rng = random.Random(10)
    scripts += [[rng.choice(OUTCOMES) for _ in range(rng.randint(3, 7))] for _ in range(150)]
    explored = dups = losses = 0
    bad = []
    long_seen = 0
    for shape in SHAPES:
        for script in scripts:
            d, l, w = run_schedule(tmp_path_factory.mktemp("s"), shape, script)
            explored += 1
            dups += d
            losses += l
            long_seen += len(w.server.messages) > 60
            if d or l:
                bad.append((shape, script, d, l))
    print(f"\ndelivery schedules explored: {explored}, duplicates: {dups}, losses: {losses} "
          f"({long_seen} with conversations over 60 messages) in {time.monotonic() - t0:.1f} s")
    assert not bad, bad[:5]
    assert explored >= 1000 and long_seen > 100


def test_a_backlog_drains_in_pieces_bounded_by_max_chars(tmp_path):
    w = World(tmp_path, ["down"] * 3, max_chars=600)
    for _ in range(6):
        w.grow(long=True)
        w.run_worker()  # the server is down: the backlog grows
    w.drain()
    sizes = [len(json.dumps(m["content"])) for m in w.server.messages if m["message_type"] == "user_message"]
    assert len(sizes) > 6 and max(sizes) < 600 + 2500  # pieces, none holding the whole backlog
    assert w.check() == (0, 0)
