"""Exactly-once delivery with real worker processes SIGKILLed at random points while the transcript grows
(issue 25, item 7).

Each schedule starts ``subconscious worker --session S`` as a real process against the fake Letta served over
HTTP (tests/harness/fake_letta_http.py: rows with no message, scripted failures of any send, tool-heavy
turns), while a writer thread appends Claude Code lines to the transcript. The worker is SIGKILLed either
at a request chosen by the seeded schedule — before the server handles it, or after the server stored it and
before the reply leaves — or after a random delay (anywhere: between its file writes too). No handler of
the worker runs. Then workers run unkilled until nothing is pending. The oracle is the in-process
schedules' (tests/unit/test_delivery_schedules.py): every content line in exactly one completed turn, its
text stored at most once, the start message once. Counts are printed. CI: 5 schedules (~40 s: each worker is a real process); --full: 120. A 409 (its real 2-6 s waits) is left to the in-process schedules.
"""
from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import threading
import time

from subconscious.local import sessions as localsession
from subconscious.letta.messages import content_text
from subconscious.local.runtime import runtime
from subconscious.state.records import SessionState
from subconscious.delivery.transcript import complete_lines, parse_line
from tests.harness.fake_letta_conv import FakeLetta
from tests.harness.fake_letta_http import FakeLettaHTTP
from tests.harness.sizes import size
from tests.harness.transcripts import Transcript

SID = "kill-sched-1"
AGENT = "agent-00000000-0000-4000-8000-0000000000k1"
CONV = "conv-00000000-0000-4000-8000-0000000000k1"
OUTCOMES = ["ok", "ok", "ok", "error", "error_step", "timeout_ok", "timeout_running", "down",
            "tools", "tools_cut"]
_STORED = re.compile(r'<lines first="(\d+)" last="(\d+)"')


def _env(tmp, url):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "CLAUDE_"))}
    env.update(LETTA_HOME=str(tmp / "home"), SUBCONSCIOUS_STATE_DIR=str(tmp / "state"), LETTA_BASE_URL=url,
               LETTA_API_KEY="test-key", LETTA_AGENT_ID=AGENT, SUBCONSCIOUS_HOST="laptop", LETTA_SDK_TOOLS="read-only")
    return env


class Schedule:
    def __init__(self, tmp, seed: int):
        self.rng = random.Random(seed)
        self.fake = FakeLetta([self.rng.choice(OUTCOMES) for _ in range(self.rng.randint(2, 8))],
                              blank_every=1 + seed % 4, context_window=4_000)
        self.http = FakeLettaHTTP(self.fake)
        self.env = _env(tmp, self.http.url)
        (tmp / "home").mkdir()
        self.tr = Transcript(tmp / "t.jsonl", SID, str(tmp))
        self.n = 0
        self.grow()
        rt = runtime(self.env)
        store = rt.store()
        store.put_conversation(SID, CONV, AGENT)
        store.update_session(SID, lambda cur: cur or SessionState(SID, conversation_id=CONV, agent_id=AGENT))
        self.store, self.sessions = store, rt.local.root / "sessions"
        local = localsession.load(self.sessions, SID)
        local.transcript_path, local.cwd = str(self.tr.path), str(tmp)
        local.pending_start = "<claude_code_session_start>\n<timestamp>t0</timestamp>\n</claude_code_session_start>"
        localsession.save(self.sessions, local)

    def grow(self) -> None:
        self.n += 1
        self.tr.user(f"question {self.n} " + "q<>" * 30)
        for i in range(self.rng.choice([0, 0, 4, 12])):  # now and then a tool-heavy turn over the bound
            self.tr.assistant(f"step {self.n}.{i} " + "a&" * 200)
        self.tr.assistant(f"answer {self.n}").bookkeeping()

    def worker(self, kill: bool) -> None:
        proc = subprocess.Popen([sys.executable, "-m", "subconscious", "worker", "--session", SID], env=self.env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        how = None
        if kill:
            how = self.rng.choice(["request", "request", "time"])
            if how == "request":
                self.http.arm(proc.pid, (self.rng.randint(1, 8), self.rng.choice(["before", "after"])))
            else:
                self.http.arm(None, None)
                threading.Timer(self.rng.uniform(0.2, 1.5), lambda: proc.poll() is None and proc.kill()).start()
        else:
            self.http.arm(None, None)
        writer = threading.Thread(target=lambda: [time.sleep(self.rng.uniform(0, 0.4)), self.grow()])
        if kill:
            writer.start()  # Claude Code writes on while the worker delivers
        _, err = proc.communicate(timeout=120)
        if kill:
            writer.join()
        assert "Traceback" not in err, err
        self.fake.tick()  # runs still going on the server finish

    def drain(self) -> None:
        for _ in range(25):
            self.worker(kill=False)
            local = localsession.load(self.sessions, SID)
            cursor = runtime(self.env).store().session(SID).last_processed_index
            if not local.pending_start and not local.attempt and cursor == self.tr.line_count() - 1:
                return
        raise AssertionError(f"never drained: {localsession.load(self.sessions, SID)}")

    def check(self) -> tuple[int, int]:
        lines = complete_lines(self.tr.path.read_text())
        content = {i for i, l in enumerate(lines) if parse_line(l).status == "entries"}
        done = {i: 0 for i in range(len(lines))}
        stored = {i: 0 for i in range(len(lines))}
        starts = stored_starts = 0
        for got in self.fake.ok_turns():
            if got == "start":
                starts += 1
            else:
                for i in range(got[0], got[1] + 1):
                    done[i] += 1
        for m in self.fake.messages:
            text = content_text(m.get("content")) if m["message_type"] == "user_message" else ""
            stored_starts += text.startswith("<claude_code_session_start>\n")
            r = _STORED.search(text)
            for i in range(int(r.group(1)), int(r.group(2)) + 1) if r else ():
                stored[i] += 1
        dup = (sum(max(0, c - 1) for c in [*done.values(), *stored.values()]) + max(0, starts - 1)
               + max(0, stored_starts - 1))
        return dup, sum(1 for i in content if done[i] == 0) + (starts == 0)


def test_real_workers_killed_anywhere_while_the_transcript_grows_deliver_every_line_once(tmp_path_factory):
    t0 = time.monotonic()
    schedules = size(5, 120)
    dups = losses = kills = 0
    bad = []
    for seed in range(schedules):
        s = Schedule(tmp_path_factory.mktemp("k"), seed)
        try:
            for _ in range(s.rng.randint(1, 3)):
                s.worker(kill=True)
                kills += s.http.killed
            s.drain()
            d, l = s.check()
        finally:
            s.http.close()
        dups += d
        losses += l
        if d or l:
            bad.append((seed, d, l))
    print(f"\nkilled-worker schedules: {schedules}, workers killed by the server: {kills}, duplicates: {dups}, "
          f"losses: {losses} in {time.monotonic() - t0:.1f} s")
    assert not bad, bad
    assert kills >= schedules // 3
