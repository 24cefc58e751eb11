"""Every note shown once, over seeded schedules of real hook processes (issue 25, item 7, the injection side).

tests/unit/test_injection_schedules.py explores the steps of events/messages.py rebuilt from its helpers;
these schedules go through the real entry points instead: ``python -m subconscious hook pre-tool-use`` /
``user-prompt-submit`` (JSON on stdin), so the hot-fetch shortcut (hotfetch.nothing_new: one page, no
store), the fetch TTL (``SUBCONSCIOUS_FETCH_TTL``: 0, or long enough that PreToolUse skips) and
``fetch_injection`` (the full path) decide as in production, against the fake Letta over HTTP
(tests/harness/fake_letta.py, paging by rows: message-less rows make pages short). Per schedule, after a
real SessionStart: notes arrive, message-less rows, other messages, bursts of more than a page of them
(the watermark leaves the shortcut's first page), hooks one at a time, two PreToolUse at once, and a hook
SIGKILLed after a random delay (Claude Code shows nothing of a hook that did not exit 0). A final
UserPromptSubmit (it always fetches) drains.

Oracle: every note shown by a hook that exited 0 at least once; more than once only when a hook was killed
(the documented window between printing and recording), at most once per killed hook. Printed: schedules,
hooks, duplicates, losses. CI: 6 schedules; --full: 80.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import threading
import time

import pytest

from tests.harness.fake_letta import FakeLetta
from tests.harness.sizes import size
from tests.unit.test_injection_hooks import Session

NOTE = re.compile(r"NOTE-\d+-\d+")


@pytest.fixture
def letta():
    fake = FakeLetta()
    yield fake
    fake.close()


def _run(s: Session, event: str, kill_after: float | None = None) -> tuple[str, bool]:
    p = s.popen(event)
    if kill_after is not None:
        threading.Timer(kill_after, lambda: p.poll() is None and p.kill()).start()
    out, err = p.communicate(timeout=60)
    if p.returncode != 0:  # killed: Claude Code shows nothing of it
        assert kill_after is not None, err.decode()
        return "", True
    assert b"Traceback" not in out + err, err.decode()
    return out.decode(), False


def test_every_note_is_shown_once_by_real_hooks_through_the_shortcut_the_ttl_and_the_full_path(
        tmp_path_factory, letta):
    t0 = time.monotonic()
    schedules, hooks, dups, losses, kills = size(6, 80), 0, 0, 0, 0
    bad = []
    for seed in range(schedules):
        rng = random.Random(seed)
        s = Session(tmp_path_factory.mktemp("inj"), letta, SUBCONSCIOUS_FETCH_TTL=rng.choice(["0", "0", "300"]))
        s.hook("session-start")
        conv = s.store().conversation(s.sid).conversation_id
        notes: list[str] = []
        shown: dict[str, int] = {}
        killed = 0

        def saw(out: str) -> None:
            for n in NOTE.findall(out):
                shown[n] = shown.get(n, 0) + 1
        events = [rng.choice("nnrufpqPk") for _ in range(rng.randint(6, 10))]
        if seed % 2 == 0:  # a note, then more than the shortcut's page of other messages before any hook
            at = rng.randint(0, len(events))
            events[at:at] = ["n", "F"]
        for ev in events:
            if ev == "n":
                notes.append(f"NOTE-{seed}-{len(notes)}")
                letta.say(conv, notes[-1])
            elif ev == "r":
                letta.row(conv)
            elif ev == "u":
                letta.say(conv, "the worker's update", message_type=rng.choice(["user_message", "reasoning_message"]))
            elif ev in "fF":  # more than a page of messages that are not notes: the shortcut's page misses the mark
                for i in range(120 if ev == "F" else rng.choice([30, 120])):
                    letta.say(conv, f"tool call {i}", message_type="tool_call_message")
                    if i % 7 == 0:
                        letta.row(conv)
            elif ev in "pq":
                out, _ = _run(s, "pre-tool-use" if ev == "p" else "user-prompt-submit")
                saw(out)
                hooks += 1
            elif ev == "P":  # parallel tool calls
                ps = [s.popen("pre-tool-use") for _ in range(2)]
                for p in ps:
                    out, err = p.communicate(timeout=60)
                    assert p.returncode == 0 and b"Traceback" not in out + err, err.decode()
                    saw(out.decode())
                hooks += 2
            else:
                out, was_killed = _run(s, rng.choice(["pre-tool-use", "user-prompt-submit"]),
                                       kill_after=rng.uniform(0.05, 0.6))
                saw(out)
                killed += was_killed
                hooks += 1
        for _ in range(2):
            out, _ = _run(s, "user-prompt-submit")
            saw(out)
            hooks += 1
        lost = [n for n in notes if shown.get(n, 0) == 0]
        extra = sum(max(0, c - 1) for c in shown.values())
        kills += killed
        losses += len(lost)
        dups += max(0, extra - killed)
        if lost or extra > killed:
            bad.append((seed, lost, extra, killed, s.log()[-2000:]))
    print(f"\ninjection schedules (real hooks): {schedules}, hooks run: {hooks}, killed: {kills}, "
          f"duplicates: {dups}, losses: {losses} in {time.monotonic() - t0:.1f} s")
    assert not bad, bad[:2]


SLOW_EXIT = ("import atexit, sys, time; atexit.register(time.sleep, 30); "
             "sys.argv = ['subconscious', 'hook', sys.argv[1]]; from subconscious.cli import main; sys.exit(main())")


def test_a_hook_killed_after_it_recorded_a_note_cannot_lose_it(tmp_path, letta):
    """A loaded machine's slow exit (an atexit that takes 30 s stands in for it) and Claude Code's timeout:
    the hook is killed after it printed and recorded its note and before it exited, so Claude Code shows
    nothing of it. On main the hook still ran its side jobs and the interpreter's clean-up after recording,
    the note was recorded as shown and never shown (the CI's NOTE-0-0). The hook now ends at once after the
    record: it exits 0 with the note, and the next hook does not show it again."""
    s = Session(tmp_path, letta)
    s.hook("session-start")
    conv = s.store().conversation(s.sid).conversation_id
    letta.say(conv, "NOTE-slow-exit")
    shown = []
    for event in ("user-prompt-submit", "pre-tool-use", "user-prompt-submit"):
        p = subprocess.Popen([sys.executable, "-c", SLOW_EXIT, event], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=s.env, cwd=str(s.project))
        try:
            out, _ = p.communicate(json.dumps(s.data(event)).encode(), timeout=8)
        except subprocess.TimeoutExpired:  # Claude Code's timeout: the hook is killed, its output not shown
            p.kill()
            p.communicate()
            out = b""
        shown += re.findall(r"NOTE-slow-exit(?:-2)?\b", out.decode())
        if event == "user-prompt-submit" and shown:
            letta.say(conv, "NOTE-slow-exit-2")
    assert shown == ["NOTE-slow-exit", "NOTE-slow-exit-2"], (shown, s.log()[-1500:])
