"""Faults between the hooks and a real Letta server: every hook still exits 0 within its hooks.json timeout,
prints no traceback, logs why, and nothing is lost — once the fault clears, the next Stop delivers every
missed transcript line exactly once and the cursor ends at the transcript's end.

Real hook processes (``python -m subconscious hook <event>``, JSON on stdin, as Claude Code runs them), the
real detached worker, the real Letta server; tests/harness/fault_proxy.py sits between them and injects
the faults. Deliveries are counted in the conversation's user messages read straight from the server."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from subconscious.state.locks import probe
from subconscious.state.store.core import Store
from tests.harness.fault_proxy import FaultProxy
from tests.harness.hooks import conversation_messages
from tests.harness.transcripts import Transcript

pytestmark = pytest.mark.letta

ROOT = Path(__file__).resolve().parents[2]
HOOK_EVENTS = {"SessionStart": "session-start", "UserPromptSubmit": "user-prompt-submit",
               "PreToolUse": "pre-tool-use", "Stop": "stop"}
MESSAGES = r"/conversations/[^/]+/messages$"


def hooks_json_timeouts() -> dict[str, float]:
    """The timeout Claude Code gives each of our hooks (hooks/hooks.json): the bound a hook must exit in."""
    spec = json.loads((ROOT / "hooks" / "hooks.json").read_text())["hooks"]
    return {HOOK_EVENTS[name]: float(groups[0]["hooks"][0]["timeout"]) for name, groups in spec.items()
            if name in HOOK_EVENTS}  # the events these tests run


TIMEOUTS = hooks_json_timeouts()


@dataclass
class Ran:
    proc: subprocess.CompletedProcess
    seconds: float

    @property
    def stdout(self) -> str:
        return self.proc.stdout


class Rig:
    """One Claude Code session on one machine, its hooks pointed at the fault proxy."""

    def __init__(self, tmp: Path, proxy: FaultProxy, server_url: str, agent_id: str, letta_env: dict, **extra: str):
        self.tmp, self.proxy, self.server_url = tmp, proxy, server_url
        self.sid = str(uuid.uuid4())
        self.project = tmp / "project"
        self.project.mkdir(exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "CLAUDE"))}
        env.update(letta_env, LETTA_BASE_URL=proxy.url, LETTA_AGENT_ID=agent_id, HOME=str(tmp / "user"),
                   SUBCONSCIOUS_STATE_DIR=str(tmp / "local"), SUBCONSCIOUS_HOST="laptop",
                   LETTA_HOME=str(tmp / "shared"), SUBCONSCIOUS_FETCH_TTL="0")
        env.update(extra)
        self.env = env
        self.transcript = Transcript(tmp / "transcripts" / f"{self.sid}.jsonl", self.sid, str(self.project))
        self.turns: list[str] = []

    # ---------------------------------------------------------------- paths
    @property
    def home(self) -> Path:
        return self.tmp / "shared" / ".letta" / "claude"

    @property
    def log_path(self) -> Path:
        return self.tmp / "local" / "logs" / "subconscious.log"

    @property
    def local_session_path(self) -> Path:
        return self.tmp / "local" / "sessions" / f"{self.sid}.json"

    def log(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""

    # ---------------------------------------------------------------- hooks
    def data(self, event: str, **extra) -> dict:
        base = {"session_id": self.sid, "transcript_path": str(self.transcript.path), "cwd": str(self.project)}
        per = {"session-start": {"hook_event_name": "SessionStart", "source": "startup"},
               "user-prompt-submit": {"hook_event_name": "UserPromptSubmit", "prompt": "next step"},
               "pre-tool-use": {"hook_event_name": "PreToolUse", "tool_name": "Read",
                                "tool_input": {"file_path": "/etc/hostname"}, "tool_use_id": "toolu_01"},
               "stop": {"hook_event_name": "Stop", "stop_hook_active": False}}[event]
        return {**base, **per, **extra}

    def hook(self, event: str, stdin: str | bytes | None = None, env: dict | None = None, **extra) -> Ran:
        """Run one hook as Claude Code does; assert what must hold whatever happens: exit 0 within the
        hooks.json timeout, no traceback on stdout or stderr."""
        raw = json.dumps(self.data(event, **extra)) if stdin is None else stdin
        raw = raw.encode() if isinstance(raw, str) else raw
        limit = TIMEOUTS[event]
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "subconscious", "hook", event], input=raw,
                              capture_output=True, env=env or self.env, cwd=str(self.project), timeout=limit + 30)
        seconds = time.monotonic() - t0
        out = subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode(errors="replace"),
                                          proc.stderr.decode(errors="replace"))
        assert out.returncode == 0, f"hook {event} exited {out.returncode}: {out.stderr[-2000:]}"
        assert seconds < limit, f"hook {event} took {seconds:.1f} s; Claude Code kills it after {limit:g} s"
        assert "Traceback" not in out.stdout + out.stderr, out.stdout + out.stderr
        return Ran(out, seconds)

    def turn(self, tag: str) -> str:
        """Append a user/assistant exchange carrying a unique text; returns that text."""
        token = f"{tag}-{uuid.uuid4().hex[:10]}"
        self.transcript.user(f"question {token}").assistant(f"answer {token}").bookkeeping()
        self.turns.append(token)
        return token

    # ---------------------------------------------------------------- state
    def store(self) -> Store:
        return Store(self.home, "reader", self.tmp / "r" / "locks", self.tmp / "r" / "clocks", read_only=True)

    def cursor(self) -> int | None:
        s = self.store().session(self.sid)
        return None if s is None else s.last_processed_index

    def conversation(self) -> str:
        entry = self.store().conversation(self.sid)
        assert entry is not None, "no conversation recorded for the session"
        return entry.conversation_id

    def local(self) -> dict:
        return json.loads(self.local_session_path.read_text()) if self.local_session_path.exists() else {}

    # ---------------------------------------------------------------- waiting
    def wait_log(self, pattern: str, count: int = 1, timeout: float = 90) -> str:
        """Until ``pattern`` (a regex) occurs ``count`` times in the log; returns the log."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log()
            if len(re.findall(pattern, text)) >= count:
                return text
            time.sleep(0.2)
        raise AssertionError(f"log never showed {pattern!r} x{count}:\n{self.log()[-4000:]}")

    def wait_worker_idle(self, timeout: float = 120) -> None:
        """Until no worker holds this session's delivery lock (checked twice, a second apart)."""
        lock = self.tmp / "local" / "locks" / f"laptop.deliver.{self.sid}.lock"
        deadline = time.monotonic() + timeout
        free = 0
        while time.monotonic() < deadline:
            free = free + 1 if probe(lock) is None else 0
            if free >= 5:
                return
            time.sleep(0.2)
        raise AssertionError(f"a worker still holds {lock}:\n{self.log()[-3000:]}")

    def wait_cursor(self, at_least: int, timeout: float = 120) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            c = self.cursor()
            if c is not None and c >= at_least:
                return c
            time.sleep(0.2)
        raise AssertionError(f"cursor {self.cursor()} never reached {at_least}:\n{self.log()[-4000:]}")

    def wait_started(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.local_session_path.exists() and self.local().get("pending_start") is None:
                return
            time.sleep(0.2)
        raise AssertionError(f"the start message was never delivered:\n{self.log()[-3000:]}")

    def start(self) -> None:
        """A healthy SessionStart whose start message has reached the agent."""
        self.hook("session-start")
        self.wait_started()
        self.wait_worker_idle()

    # ---------------------------------------------------------------- the conversation
    def user_texts(self) -> list[str]:
        """Every user message of the session's conversation, read from the server (not through the proxy)."""
        out = []
        for m in conversation_messages(self.server_url, self.conversation()):
            if m.get("message_type") == "user_message":
                c = m.get("content")
                out.append(c if isinstance(c, str) else json.dumps(c))
        return out

    def deliveries(self) -> dict[str, int]:
        """How many user messages carry each turn's question and answer (each must be exactly 1)."""
        texts = self.user_texts()
        out = {}
        for token in self.turns:
            out[f"question {token}"] = sum(f"question {token}" in t for t in texts)
            out[f"answer {token}"] = sum(f"answer {token}" in t for t in texts)
        return out

    def assert_all_delivered_once(self) -> None:
        """Nothing lost, nothing twice, and the cursor at the transcript's end."""
        self.wait_worker_idle()
        counts = self.deliveries()
        assert all(n == 1 for n in counts.values()), f"deliveries per turn text: {counts}\n{self.log()[-3000:]}"
        assert self.cursor() == self.transcript.line_count() - 1

    def recover(self) -> None:
        """After the fault cleared: one more turn and a Stop deliver everything, each line once."""
        self.proxy.clear()
        self.proxy.up()
        self.turn("after")
        self.hook("stop")
        self.wait_cursor(self.transcript.line_count() - 1)
        self.assert_all_delivered_once()


@pytest.fixture
def proxy(letta_server):
    p = FaultProxy(letta_server.base_url).start()
    yield p
    p.stop()


@pytest.fixture
def rig(tmp_path, proxy, letta_server, letta_agent, letta_env, fake_llm) -> Rig:
    return Rig(tmp_path, proxy, letta_server.base_url, letta_agent["id"], letta_env)


# ==================================================================== server down


def test_server_down_every_hook_exits_in_time_and_the_next_stop_delivers_what_was_missed(rig: Rig):
    rig.start()
    rig.turn("before")
    rig.proxy.down()

    ups = rig.hook("user-prompt-submit")
    pre = rig.hook("pre-tool-use")
    assert ups.stdout.strip() == "" and pre.stdout.strip() == ""
    rig.hook("stop")
    log = rig.wait_log(r"delivery failed, kept and retried later: .*cannot connect to Letta")
    assert re.search(r"hook user-prompt-submit: .*cannot connect to Letta at http://127\.0\.0\.1:\d+/v1", log)
    assert re.search(r"hook pre-tool-use: .*cannot connect to Letta", log)
    rig.wait_worker_idle()
    assert rig.cursor() == -1  # nothing was delivered, nothing was skipped

    rig.turn("while-down")
    rig.hook("stop")
    rig.wait_log(r"delivery failed, kept and retried later", count=2)
    rig.recover()


@pytest.mark.parametrize("fault", ["down", "503", "slow"])
def test_session_start_failing_loses_nothing(rig: Rig, fault: str):
    """SessionStart could not reach the server, so there is no conversation yet. The lines of the turns
    meanwhile are kept; the first Stop once the server is back creates the conversation (SessionStart's
    work) and delivers the start message and every line, once."""
    if fault == "down":
        rig.proxy.down()
        reason = r"hook session-start: .*cannot connect to Letta at http://127\.0\.0\.1:\d+/v1"
    elif fault == "503":
        rig.proxy.fail(503, method="GET", path=r"/models/?$", count=None)
        reason = r"hook session-start: .*listing models: HTTP 503"
    else:  # every answer slower than the hook's deadline
        rig.proxy.delay(30, count=None)
        reason = r"hook session-start: .*(timed out|gave up after 12\.0 s \(deadline\))"
    ran = rig.hook("session-start")
    assert re.search(reason, rig.log()), rig.log()
    assert rig.store().conversation(rig.sid) is None
    if fault == "slow":
        assert ran.seconds > 5  # it did wait for the server, within its budget
    rig.turn("first")
    rig.hook("user-prompt-submit")
    if fault == "down":  # a Stop while the server is still down keeps everything too
        rig.hook("stop")
        assert re.search(r"hook stop: .*cannot connect to Letta", rig.log())
        assert rig.store().conversation(rig.sid) is None
    rig.recover()
    assert sum("<claude_code_session_start>" in t for t in rig.user_texts()) == 1


# ==================================================================== 5xx and 409


def test_5xx_answers_hooks_log_the_status_and_the_next_stop_delivers_once(rig: Rig):
    rig.start()
    rig.turn("before")
    rig.proxy.fail(502, method="GET", path=MESSAGES, count=None)
    rig.hook("user-prompt-submit")
    rig.hook("pre-tool-use")
    log = rig.log()
    assert re.search(r"hook user-prompt-submit: LettaServerError: listing messages of conv-\S+: HTTP 502", log), log
    assert re.search(r"hook pre-tool-use: LettaServerError: .*HTTP 502", log), log
    rig.proxy.clear()
    rig.proxy.fail(500, method="POST", path=MESSAGES, count=None)
    rig.hook("stop")
    rig.wait_log(r"delivery failed, kept and retried later: .*HTTP 500")
    rig.wait_worker_idle()
    assert rig.cursor() == -1
    rig.turn("during")
    rig.recover()


def test_409_while_another_run_is_busy_is_retried_by_the_worker_without_duplicates(rig: Rig):
    rig.start()
    rig.turn("busy")
    rule = rig.proxy.fail(409, method="POST", path=MESSAGES, count=2,
                          detail="Cannot send a new message: a run is already in progress on this conversation")
    rig.hook("stop")
    rig.wait_cursor(rig.transcript.line_count() - 1)
    assert rule.hits == 2  # the worker met the conflict twice and retried on its own
    rig.assert_all_delivered_once()


def test_409_that_outlasts_the_retries_is_kept_for_the_next_stop(rig: Rig):
    rig.start()
    rig.turn("busy")
    rig.proxy.fail(409, method="POST", path=MESSAGES, count=None)
    rig.hook("stop")
    rig.wait_log(r"delivery failed, kept and retried later: .*HTTP 409.*another request is still running", timeout=60)
    rig.wait_worker_idle()
    assert rig.cursor() == -1
    rig.recover()


# ==================================================================== slow server


def test_slow_answers_hooks_give_up_within_their_timeout(rig: Rig):
    rig.start()
    rig.turn("slow")
    rig.proxy.delay(60, method="GET", count=None)
    ups = rig.hook("user-prompt-submit")
    pre = rig.hook("pre-tool-use")
    log = rig.log()
    assert re.search(r"hook user-prompt-submit: (LettaTimeoutError: .*timed out|listing messages of \S+ timed out|gave up after 8\.0 s)", log), log
    assert re.search(r"hook pre-tool-use: (LettaTimeoutError: .*timed out|listing messages of \S+ timed out|gave up after 4\.0 s)", log), log
    assert ups.stdout.strip() == "" and pre.stdout.strip() == ""
    assert ups.seconds > 3 and pre.seconds > 1.5  # they waited for the server, within their budget
    rig.recover()


def test_a_slow_delivery_and_a_second_stop_deliver_each_range_once(rig: Rig):
    """The first worker waits on a slow answer (the server took the message); a second Stop in the
    meantime starts a second worker, which waits for the first and then sends only the newer lines."""
    rig.start()
    rig.turn("first")
    slow = rig.proxy.delay(6, method="POST", path=MESSAGES, count=1, after=True)
    t0 = time.monotonic()
    stop1 = rig.hook("stop")
    rig.turn("second")
    stop2 = rig.hook("stop")
    assert stop1.seconds < 5 and stop2.seconds < 5  # Stop returns before the worker finishes
    rig.wait_cursor(rig.transcript.line_count() - 1)
    assert slow.hits == 1 and time.monotonic() - t0 > 6
    rig.assert_all_delivered_once()


def test_two_stops_in_quick_succession_deliver_each_range_once(rig: Rig):
    rig.start()
    rig.turn("one")
    rig.hook("stop")
    rig.turn("two")
    rig.hook("stop")
    rig.turn("three")
    rig.hook("stop")
    rig.wait_cursor(rig.transcript.line_count() - 1)
    rig.assert_all_delivered_once()


# ==================================================================== broken streams


SSE_FAULTS = {
    # name: (cut_stream arguments, what the worker logs)
    "garbage-json": (dict(after_events=1, garbage=b'data: {"message_type": "assistant_mess\n\n', end="clean"),
                     r"stream event that is not JSON"),
    "garbage-lines": (dict(after_events=1, garbage=b"<html><body>502 Bad Gateway</body></html>\r\n\r\n", end="clean"),
                      r"stream ended before the agent run finished"),
    "error-event": (dict(after_events=1, end="clean",
                         garbage=b'event: error\ndata: {"error": {"type": "internal_error", "message": "boom"}}\n\n'),
                    r"the Letta agent run failed \(internal_error\): boom"),
    "truncated": (dict(after_events=2, end="abort"), r"connection to Letta at \S+ failed \((ReadError|RemoteProtocolError)\)"),
    "cut-without-drain": (dict(after_events=1, end="abort", drain=False),
                          r"connection to Letta at \S+ failed \((ReadError|RemoteProtocolError)\)"),
}


@pytest.mark.parametrize("name", list(SSE_FAULTS))
def test_malformed_or_cut_stream_is_never_delivered_twice(rig: Rig, name: str):
    args, reason = SSE_FAULTS[name]
    rig.start()
    rig.turn("cut")
    rig.proxy.cut_stream(method="POST", path=MESSAGES, count=1, **args)
    rig.hook("stop")
    rig.wait_log(r"delivery failed, kept and retried later: .*" + reason)
    rig.wait_worker_idle()
    assert rig.cursor() == -1 and rig.local()["attempt"] == [0, rig.transcript.line_count() - 1]
    rig.recover()


def test_connection_dropped_after_the_server_took_the_message(rig: Rig):
    rig.start()
    rig.turn("dropped")
    rig.proxy.drop_after_forward(method="POST", path=MESSAGES, count=1)
    rig.hook("stop")
    rig.wait_log(r"delivery failed, kept and retried later: .*connection to Letta at \S+ failed")
    rig.wait_worker_idle()
    assert rig.deliveries()[f"question {rig.turns[0]}"] == 1  # the server has it; we could not know
    rig.recover()
    assert re.search(r"lines 0-\d+ had arrived already \(delivery \w+\); not sent again", rig.log())


def test_start_message_whose_reply_was_dropped_is_not_sent_twice(rig: Rig):
    rig.proxy.drop_after_forward(method="POST", path=MESSAGES, count=1)  # the server takes it; we never hear
    rig.hook("session-start")
    rig.wait_log(r"delivery failed, kept and retried later")
    rig.wait_worker_idle()
    assert rig.local()["pending_start"] and rig.local()["start_attempted"] is True
    rig.turn("after-start")
    rig.hook("stop")  # the next worker looks before it sends
    rig.wait_log(r"the start message had arrived already; not sent again")
    rig.wait_worker_idle()
    starts = [t for t in rig.user_texts() if "<claude_code_session_start>" in t]
    assert len(starts) == 1
    rig.assert_all_delivered_once()


# ==================================================================== bad input, damaged or unwritable state


BAD_STDIN = {
    "not-json": (b"this is not json", r"malformed input on stdin"),
    "json-array": (b"[1, 2, 3]", r"malformed input on stdin \(hook input is a JSON list"),
    "not-utf8": (b"\xff\xfe\x00garbage", r"malformed input on stdin"),
    "truncated-json": (b'{"session_id": "abc', r"malformed input on stdin"),
    "empty": (b"", r"InvalidIdentifier|session id"),
    "path-as-session-id": (json.dumps({"session_id": "../../etc/passwd", "cwd": "/tmp"}).encode(),
                           r"InvalidIdentifier|session id"),
}


def test_bad_stdin_every_hook_exits_quietly_and_state_is_untouched(rig: Rig):
    rig.start()
    rig.turn("kept")
    before = {p: p.read_bytes() for p in sorted(rig.home.rglob("*")) if p.is_file()}
    for event in TIMEOUTS:
        for name, (raw, reason) in BAD_STDIN.items():
            mark = len(rig.log())
            ran = rig.hook(event, stdin=raw)
            assert ran.stdout == "", (event, name, ran.stdout)
            assert re.search(reason, rig.log()[mark:]), (event, name, rig.log()[mark:])
    assert {p: p.read_bytes() for p in sorted(rig.home.rglob("*")) if p.is_file()} == before
    assert not (rig.tmp / "etc").exists()
    rig.recover()


def test_garbage_conversations_json(rig: Rig):
    """The shared view is garbage (a bad sync): its bytes are set aside, never lost, the hooks go on from the
    hosts' shards, and the transcript still arrives once."""
    rig.start()
    rig.turn("one")
    conv = rig.conversation()
    view = rig.home / "conversations.json"
    garbage = b'{"a1b2": {"conversationId": "conv-\x00\x01 garbage <<<<<<< HEAD'
    view.write_bytes(garbage)
    rig.hook("session-start", source="resume")  # reads the view; the other hooks need only the session file
    for event in ("user-prompt-submit", "pre-tool-use", "stop"):
        rig.hook(event)
    rig.wait_cursor(rig.transcript.line_count() - 1)
    kept = [p.read_bytes() for p in (rig.home / "quarantine").glob("conversations.json.*") if not p.name.endswith(".about.json")]
    assert garbage in kept
    assert re.search(r"state: \S+/conversations\.json could not be used \(unparseable\); its bytes are kept in \S+/quarantine/",
                     rig.log()), rig.log()
    assert rig.conversation() == conv  # the shards still knew it: resume kept the conversation
    rig.recover()


def test_garbage_session_file(rig: Rig):
    """The session file (cursor) is garbage: its bytes are set aside, the hooks log why, and the next Stop
    finds in the conversation how far delivery got: nothing lost, nothing sent twice."""
    rig.start()
    rig.turn("delivered")
    rig.hook("stop")
    rig.wait_cursor(rig.transcript.line_count() - 1)
    rig.wait_worker_idle()
    path = rig.store().session_path(rig.sid)
    garbage = b"\x00\x00\x00 not a session {{{"
    # the view and this host's own version of it (hosts/laptop/): damaging the view alone, the host's
    # version still holds the cursor and the conversation is never asked
    copies = [p for p in rig.home.rglob(path.name) if "quarantine" not in p.parts]
    assert path in copies and len(copies) >= 2, copies
    for p in copies:
        p.write_bytes(garbage)
    rig.turn("after-damage")
    for event in ("user-prompt-submit", "pre-tool-use", "stop"):
        rig.hook(event)
    kept = [p.read_bytes() for p in (rig.home / "quarantine").glob(path.name + ".*") if not p.name.endswith(".about.json")]
    assert garbage in kept
    assert re.search(r"state: \S+/" + re.escape(path.name) + r" could not be used \(unparseable\)", rig.log()), rig.log()
    rig.wait_cursor(rig.transcript.line_count() - 1)
    rig.recover()
    assert re.search(r"lines 0-\d+ had arrived already \(delivery \w+\); not sent again", rig.log()), rig.log()


def test_garbage_local_session_file(rig: Rig):
    """The machine-local session file (the worker's job) is garbage: hooks log it and go on."""
    rig.start()
    rig.turn("one")
    rig.local_session_path.write_bytes(b"]]] not json")
    for event in ("user-prompt-submit", "pre-tool-use", "stop"):
        rig.hook(event)
    assert re.search(r"session \S+: its file in \S+ is unreadable \(Expecting value", rig.log()), rig.log()
    rig.wait_cursor(rig.transcript.line_count() - 1)
    rig.recover()


def _freeze(path: Path) -> None:
    """Make ``path`` (a directory tree) unwritable, even for root (immutable attribute)."""
    if os.geteuid() == 0:
        if shutil.which("chattr") is None:
            pytest.fail("chattr (e2fsprogs) is needed to make a directory unwritable for root: apt-get install e2fsprogs")
        subprocess.run(["chattr", "-R", "+i", str(path)], check=True, capture_output=True)
    else:
        for p in [path, *path.rglob("*")]:
            p.chmod(0o500 if p.is_dir() else 0o400)


def _thaw(path: Path) -> None:
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-R", "-i", str(path)], check=False, capture_output=True)
    else:
        for p in [path, *path.rglob("*")]:
            p.chmod(0o700 if p.is_dir() else 0o600)


@pytest.fixture
def frozen():
    paths: list[Path] = []
    yield lambda p: (paths.append(p), _freeze(p))
    for p in paths:
        _thaw(p)


def test_unwritable_shared_home(rig: Rig, frozen):
    rig.start()
    rig.turn("one")
    frozen(rig.home)
    for event in ("user-prompt-submit", "pre-tool-use", "stop"):
        rig.hook(event)
    log = rig.wait_log(r"worker \S+: .*(Permission|Operation not permitted|Read-only)")
    assert re.search(r"hook user-prompt-submit: PermissionError: .*Operation not permitted", log), log
    rig.wait_worker_idle()
    _thaw(rig.home)
    rig.recover()
    # the worker had delivered but could not save the cursor: the conversation tells, nothing is sent twice
    assert re.search(r"lines 0-\d+ had arrived already \(delivery \w+\); not sent again", rig.log()), rig.log()


def test_unwritable_local_state_dir(rig: Rig, frozen):
    """No machine-local state dir can be written (not even the log): the reason goes to stderr, where
    Claude Code keeps it in its debug log, and nothing is lost once the dir is writable again."""
    rig.start()
    rig.turn("one")
    local = rig.tmp / "local"
    frozen(local)
    for event in TIMEOUTS:
        ran = rig.hook(event)
        assert re.search(r"subconscious: .*(Permission|Operation not permitted|Read-only)", ran.proc.stderr), ran.proc.stderr
    _thaw(local)
    rig.recover()


# ==================================================================== the harness itself


def test_the_proxy_relays_a_stream_as_it_arrives(proxy, letta_server, letta_agent):
    """Faults are only realistic if a stream passes through unbuffered: the first event (a ping) reaches
    the client while the model is still thinking (the scripted model sleeps 3 s)."""
    from subconscious.letta.client import LettaClient

    with LettaClient(proxy.url, "k") as client:
        conv = client.create_conversation(letta_agent["id"])["id"]
        t0, arrivals = time.monotonic(), []
        for item in client.stream_message(conv, "wait for it LLM_SLEEP 3"):
            arrivals.append((time.monotonic() - t0, item.get("message_type")))
    kinds = [k for _, k in arrivals]
    assert "assistant_message" in kinds and kinds[-1] in ("stop_reason", "usage_statistics")
    assert arrivals[-1][0] - arrivals[0][0] > 2.0, arrivals
    assert [s.action for s in proxy.seen("POST", MESSAGES)] == ["forward"]
