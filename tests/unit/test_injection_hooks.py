"""Issue 10, the injection half, with real hook processes (``python -m subconscious hook <event>``, JSON on
stdin, as Claude Code runs them) against a fake Letta server on 127.0.0.1 (tests/harness/fake_letta.py):

- N PreToolUse hooks started at the same moment (parallel tool calls): a note appears in exactly one
  hook's output;
- a hook that dies between fetching and printing (its deadline) does not lose the note: the next hook
  shows it (on main the note was recorded as seen before it was printed);
- more new notes than one page (main read the 20 newest): all are shown, oldest first;
- a slower hook cannot move the watermark back (so nothing is shown twice);
- the session's home is decided once: after a ``cd`` into a subdirectory (LETTA_HOME unset), every hook
  uses the same conversation and no stray ``.letta/claude`` appears in the subdirectory;
- resume/compact do not queue another start message; temp orphans are swept at SessionStart.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from subconscious.hooks import run as hookrun
from subconscious.local import sessions as localsession
from subconscious.state.records import SessionState
from subconscious.state.store.core import Store
from tests.harness.fake_letta import AGENT, FakeLetta

ROOT = Path(__file__).resolve().parents[2]


def wait_workers_gone(sid: str, timeout: float = 120) -> None:
    """Until no ``subconscious worker --session SID`` process is left (the hooks start them detached)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        running = []
        for proc in Path("/proc").iterdir():
            try:
                argv = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"worker" in argv and sid.encode() in argv:
                running.append(proc.name)
        if not running:
            return
        time.sleep(0.05)
    raise AssertionError(f"workers of {sid} still running: {running}")


@pytest.fixture
def letta():
    fake = FakeLetta()
    yield fake
    fake.close()


class Session:
    """One Claude Code session on this machine, its hooks pointed at the fake server."""

    def __init__(self, tmp: Path, letta: FakeLetta, *, letta_home: bool = True, **extra: str):
        self.tmp, self.letta = tmp, letta
        self.sid = str(uuid.uuid4())
        self.project = tmp / "project"
        self.project.mkdir(exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "CLAUDE"))}
        env.update(LETTA_BASE_URL=letta.url, LETTA_AGENT_ID=AGENT, HOME=str(tmp / "user"),
                   SUBCONSCIOUS_STATE_DIR=str(tmp / "local"), SUBCONSCIOUS_HOST="laptop",
                   SUBCONSCIOUS_FETCH_TTL="0", PYTHONPATH=str(ROOT))
        if letta_home:
            env["LETTA_HOME"] = str(tmp / "shared")
        env.update(extra)
        self.env = env

    @property
    def home(self) -> Path:
        return (Path(self.env["LETTA_HOME"]) if "LETTA_HOME" in self.env else self.project) / ".letta" / "claude"

    def store(self, home: Path | None = None) -> Store:
        return Store(home or self.home, "laptop", self.tmp / "local" / "locks", self.tmp / "local" / "clocks")

    def seed(self) -> str:
        """A session whose SessionStart has run: its conversation recorded (without a server round)."""
        conv = self.letta.new_conversation()
        st = self.store()
        st.put_conversation(self.sid, conv, AGENT)
        st.update_session(self.sid, lambda cur: SessionState(self.sid, conversation_id=conv, agent_id=AGENT))
        return conv

    def data(self, event: str, cwd: Path | None = None, **extra) -> dict:
        per = {"session-start": {"hook_event_name": "SessionStart", "source": "startup"},
               "user-prompt-submit": {"hook_event_name": "UserPromptSubmit", "prompt": "next"},
               "pre-tool-use": {"hook_event_name": "PreToolUse", "tool_name": "Read",
                                "tool_input": {"file_path": "/etc/hostname"}, "tool_use_id": "toolu_01"},
               "stop": {"hook_event_name": "Stop", "stop_hook_active": False}}[event]
        return {"session_id": self.sid, "cwd": str(cwd or self.project),
                "transcript_path": str(self.tmp / "no-transcript.jsonl"), **per, **extra}

    def popen(self, event: str, cwd: Path | None = None, **extra) -> subprocess.Popen:
        p = subprocess.Popen([sys.executable, "-m", "subconscious", "hook", event], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env, cwd=str(cwd or self.project))
        p.stdin.write(json.dumps(self.data(event, cwd, **extra)).encode())
        p.stdin.close()
        p.stdin = None  # written and closed: communicate() only reads
        return p

    def hook(self, event: str, cwd: Path | None = None, **extra) -> str:
        p = self.popen(event, cwd, **extra)
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0 and b"Traceback" not in out + err, err.decode()
        return out.decode()

    def in_process(self, event: str, stdout=None, **extra) -> str:
        """The hook run in this process (hookrun.run as the CLI calls it), with our environment."""
        import logging

        old = dict(os.environ)
        logger = logging.getLogger("subconscious")
        saved = (list(logger.handlers), logger.propagate, logger.level)
        os.environ.clear()
        os.environ.update(self.env)
        try:
            out = stdout if stdout is not None else io.StringIO()
            hookrun.run(event, stdin=io.StringIO(json.dumps(self.data(event, **extra))), stdout=out)
            return out.getvalue() if isinstance(out, io.StringIO) else ""
        finally:
            os.environ.clear()
            os.environ.update(old)
            for h in logger.handlers[:]:  # hookrun set the log up for the hook's state dir: put it back
                if h not in saved[0]:
                    logger.removeHandler(h)
                    h.close()
            logger.propagate, logger.level = saved[1], saved[2]

    def log(self) -> str:
        p = self.tmp / "local" / "logs" / "subconscious.log"
        return p.read_text() if p.exists() else ""


def shown(out: str, text: str) -> int:
    return out.count(text)


# --------------------------------------------------------------------------- parallel hooks


def test_parallel_pre_tool_hooks_show_a_note_in_exactly_one_output(tmp_path, letta):
    s = Session(tmp_path, letta)
    conv = s.seed()
    letta.delay = 0.3  # every hook is inside its fetch at the same time
    n, rounds = 6, 3
    for r in range(rounds):
        note = f"note-{r}-{uuid.uuid4().hex[:6]}"
        letta.say(conv, note)
        procs = [s.popen("pre-tool-use") for _ in range(n)]
        outs = []
        for p in procs:
            out, err = p.communicate(timeout=60)
            assert p.returncode == 0 and b"Traceback" not in out + err, err.decode()
            outs.append(out.decode())
        counts = [shown(o, note) for o in outs]
        assert sum(counts) == 1, (note, counts, s.log()[-3000:])
        for o in outs:  # whoever printed, printed valid hook JSON
            if o.strip():
                assert "additionalContext" in json.loads(o)["hookSpecificOutput"]


def test_parallel_hooks_with_the_ttl_fetch_once(tmp_path, letta):
    s = Session(tmp_path, letta, SUBCONSCIOUS_FETCH_TTL="30")
    conv = s.seed()
    letta.say(conv, "only once")
    letta.delay = 0.3
    procs = [s.popen("pre-tool-use") for _ in range(5)]
    outs = [p.communicate(timeout=60)[0].decode() for p in procs]
    # hooks that fetched: first pages (one hook pages on to the empty page that ends the listing)
    fetches = [r for r in letta.requests if "/messages" in r and "before=" not in r]
    # the TTL check and the new fetch time are one compare-and-set; a hook whose first page came too late
    # for its deadline gives the TTL back (logged), and the next hook fetches instead
    handed = s.log().count("the next hook looks again")
    assert len(fetches) == 1 + handed, (fetches, handed)
    assert sum(shown(o, "only once") for o in outs) == 1


# --------------------------------------------------------------------------- recorded after printing


class DiesOnWrite(io.StringIO):
    """stdout of a hook killed (its deadline) after it fetched, before its output got out."""

    def write(self, text):
        raise BrokenPipeError("killed before printing")


def test_a_hook_that_dies_before_printing_loses_no_note(tmp_path, letta):
    s = Session(tmp_path, letta)
    conv = s.seed()
    letta.say(conv, "survives the deadline")
    assert s.in_process("pre-tool-use", stdout=DiesOnWrite()) == ""
    d = tmp_path / "local" / "shown"
    if d.exists():  # in-process the claim's owner (this pid) lives on: release it as a dead process's would be
        from subconscious.local import claims

        st = claims.state(d, s.sid)
        assert not st["printed"]
        (d / f"{s.sid}.json").write_text(json.dumps({**st, "claims": {}}))
    out = s.hook("pre-tool-use")
    assert shown(out, "survives the deadline") == 1, s.log()[-2000:]
    assert shown(s.hook("pre-tool-use"), "survives the deadline") == 0


KILLED_AT_PRINT = """
import os, sys
class Killed:  # the process dies (its deadline, SIGKILL) the moment it would print
    def write(self, text):
        os._exit(0)
    def flush(self):
        os._exit(0)
from subconscious.hooks import run as hookrun
sys.exit(hookrun.run("pre-tool-use", stdin=sys.stdin, stdout=Killed()))
"""


def test_a_claim_of_a_hook_killed_before_printing_is_released(tmp_path, letta):
    s = Session(tmp_path, letta)
    conv = s.seed()
    letta.say(conv, "claimed then killed")
    p = subprocess.run([sys.executable, "-c", KILLED_AT_PRINT], input=json.dumps(s.data("pre-tool-use")).encode(),
                       capture_output=True, env=s.env, cwd=str(s.project), timeout=60)
    assert p.returncode == 0 and p.stdout == b"", p.stderr.decode()
    out = s.hook("pre-tool-use")
    assert shown(out, "claimed then killed") == 1, s.log()[-2000:]


# --------------------------------------------------------------------------- look-back by id


def test_more_new_notes_than_a_page_are_all_shown_oldest_first(tmp_path, letta):
    s = Session(tmp_path, letta)
    conv = s.seed()
    letta.say(conv, "first note")
    assert shown(s.hook("pre-tool-use"), "first note") == 1
    notes = [f"burst-{i:03d}" for i in range(130)]  # > 2 pages of PreToolUse (50), > main's window (20)
    for i, text in enumerate(notes):
        letta.say(conv, text)
        letta.say(conv, f"user {i}", message_type="user_message")
    first = json.loads(s.hook("pre-tool-use"))["hookSpecificOutput"]["additionalContext"]
    # Claude Code keeps 10,000 characters of what a hook adds: the newest notes wait for the next hook
    assert len(first) <= 10_000 and "follow with the next prompt or tool call" in first
    out = first + s.hook("user-prompt-submit")
    positions = [out.find(f"\n{t}\n") for t in notes]
    assert all(p >= 0 for p in positions), [t for t, p in zip(notes, positions) if p < 0][:5]
    assert positions == sorted(positions)
    assert all(out.count(f"\n{t}\n") == 1 for t in notes)
    assert "first note" not in out
    assert s.hook("user-prompt-submit") == ""


def test_a_message_less_row_in_the_newest_page_does_not_hide_a_note(tmp_path, letta):
    """Issue 25: ``limit`` counts rows and a row can carry no message. With one such row among the newest
    50, the first page is short while the note is on the next one: three real hooks show it exactly once
    and the watermark never moves past it unshown (main ended the look-back at the short page)."""
    s = Session(tmp_path, letta)
    conv = s.seed()
    letta.say(conv, "old note")
    assert shown(s.hook("pre-tool-use"), "old note") == 1
    note = letta.say(conv, "the note behind the page edge")
    for i in range(55):
        letta.say(conv, f"user {i}", message_type="user_message")
        if i == 40:
            letta.row(conv)
    out = [s.hook("pre-tool-use"), s.hook("user-prompt-submit"), s.hook("pre-tool-use")]
    assert sum(shown(o, "the note behind the page edge") for o in out) == 1, out
    ids = [m["id"] for m in letta.conversations[conv] if not m.get("_no_message")]
    mark = s.store().session(s.sid).last_seen_message_id
    assert ids.index(mark) >= ids.index(note)


@pytest.mark.parametrize("since", [10, 60, 160])
def test_after_a_compaction_the_last_note_shown_is_shown_again_however_far_back(tmp_path, letta, since):
    """Issue 25: the re-injection looked for the watermark in one page of 50 and cleared its mark anyway
    (10 messages after the note: shown again; 60: nothing, for good). Now it pages back (by rows, a
    message-less row on the way), and the mark is cleared only once the text was printed."""
    s = Session(tmp_path, letta)
    conv = s.seed()
    letta.say(conv, "the note to keep")
    assert shown(s.hook("pre-tool-use"), "the note to keep") == 1
    for i in range(since):
        letta.say(conv, f"user {i}", message_type="user_message")
        if i == since - 5:
            letta.row(conv)
    out = s.hook("session-start", source="compact")
    assert shown(out, "the note to keep") == 1, (out, s.log()[-2000:])
    assert "compacted this session" in out
    sessions = tmp_path / "local" / "sessions"
    assert localsession.load(sessions, s.sid).reinject is None
    assert s.hook("session-start", source="resume") == ""  # shown once: the mark is gone


def test_a_slower_hook_never_moves_the_watermark_back(tmp_path, letta, monkeypatch):
    """Hook A fetches (sees note one) and stalls; meanwhile note two arrives and hook B (another process)
    shows both and records; then A goes on. On main A showed note one again and wrote its older last-seen
    id over B's, so note two was shown a second time by the next hook."""
    s = Session(tmp_path, letta)
    conv = s.seed()
    letta.say(conv, "note one")
    from subconscious.letta import lite

    real = lite.get_json
    outs: dict[str, str] = {}

    def stalls(*a, **k):
        got = real(*a, **k)
        if "/messages" in str(a[1]) and "B" not in outs:
            letta.say(conv, "note two")
            outs["B"] = s.hook("pre-tool-use")
        return got

    monkeypatch.setattr(lite, "get_json", stalls)
    outs["A"] = s.in_process("pre-tool-use")
    total = outs["A"] + outs["B"]
    assert shown(total, "note one") == 1 and shown(total, "note two") == 1, outs
    assert s.store().session(s.sid).last_seen_message_id == letta.conversations[conv][-1]["id"]
    monkeypatch.setattr(lite, "get_json", real)
    later = s.hook("pre-tool-use") + s.hook("user-prompt-submit")
    assert "note one" not in later and "note two" not in later


# --------------------------------------------------------------------------- one home per session


def test_a_moved_cwd_keeps_the_session_home(tmp_path, letta):
    s = Session(tmp_path, letta, letta_home=False)  # LETTA_HOME unset: the home is the project directory
    s.hook("session-start")
    conv = s.store().conversation(s.sid).conversation_id
    sub = s.project / "packages" / "lib"
    sub.mkdir(parents=True)
    letta.say(conv, "seen from the subdirectory")
    before = len(letta.conversations)
    out = s.hook("pre-tool-use", cwd=sub) + s.hook("user-prompt-submit", cwd=sub)
    s.hook("stop", cwd=sub)  # no transcript: Stop stops after looking the session up
    assert shown(out, "seen from the subdirectory") == 1, s.log()[-3000:]
    assert len(letta.conversations) == before, "a second conversation was created for the session"
    assert not (sub / ".letta").exists(), "a stray .letta/claude in the subdirectory"
    local = localsession.load(tmp_path / "local" / "sessions", s.sid)
    assert local.home == str(s.project)
    from subconscious.hooks.pipeline import session_runtime

    rt, _ = session_runtime(s.sid, s.env, cwd=str(sub))  # what the worker is to use
    assert rt.settings.letta_home == s.project


def test_the_worker_delivers_to_the_home_recorded_at_session_start(tmp_path, letta, monkeypatch):
    """The worker is started with the environment of the Stop that spawned it: a CLAUDE_PROJECT_DIR (or
    cwd) in a subdirectory must not give it another home than the session's."""
    import argparse

    from subconscious.delivery import worker
    from subconscious.commands import worker as worker_cmd

    s = Session(tmp_path, letta, letta_home=False)
    s.hook("session-start")
    sub = s.project / "packages" / "lib"
    sub.mkdir(parents=True)
    homes = []
    monkeypatch.setattr(worker, "deliver", lambda rt, sid: homes.append(rt.settings.letta_home)
                        or worker.Delivery(sid))
    for k, v in s.env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(sub))
    monkeypatch.chdir(sub)
    assert worker_cmd.run(argparse.Namespace(session=s.sid)) == 0
    assert homes == [s.project]
    assert not (sub / ".letta").exists()


# --------------------------------------------------------------------------- start message, temp files


def test_resume_and_compact_queue_no_second_start_message(tmp_path, letta):
    s = Session(tmp_path, letta)
    sessions = tmp_path / "local" / "sessions"
    s.hook("session-start")
    first = localsession.load(sessions, s.sid)
    assert first.pending_start
    done = localsession.load(sessions, s.sid)  # the worker delivered it
    done.pending_start = None
    localsession.save(sessions, done)
    for source in ("resume", "compact", "startup"):  # startup twice: the plugin and `install` both hooked
        s.hook("session-start", source=source)
        assert localsession.load(sessions, s.sid).pending_start is None, source


def test_a_start_message_queued_while_one_is_in_flight_survives(tmp_path, monkeypatch):
    from subconscious.delivery import worker

    sessions = tmp_path / "sessions"
    sid = str(uuid.uuid4())
    st = localsession.load(sessions, sid)
    st.pending_start = "<start>old</start>"
    localsession.save(sessions, st)

    def send(client, conv, text, rt, cwd):  # while the old one is sent, a SessionStart queues a new one
        newer = localsession.load(sessions, sid)
        newer.pending_start, newer.start_attempted = "<start>new</start>", False
        localsession.save(sessions, newer)

    monkeypatch.setattr(worker, "_send", send)
    class Client:  # the conversation holds nothing yet
        def list_messages(self, *a, **k):
            return []

        def iter_messages_newest_first(self, *a, **k):  # the worker reads the newest message by rows
            return iter(())

    worker._deliver_start(Client(), "conv-x", localsession.load(sessions, sid), sessions, None)
    assert localsession.load(sessions, sid).pending_start == "<start>new</start>"


def test_session_start_sweeps_old_temp_files_in_machine_local_dirs(tmp_path, letta):
    s = Session(tmp_path, letta)
    local = tmp_path / "local"
    old, fresh = [], []
    for sub in ("sessions", "clocks", "keys", "locks", "shown"):
        (local / sub).mkdir(parents=True, exist_ok=True)
        o = local / sub / ".subconscious-tmp-x.json-1-dead"
        o.write_text("{")
        os.utime(o, (time.time() - 3600, time.time() - 3600))
        old.append(o)
        f = local / sub / ".subconscious-tmp-y.json-2-live"
        f.write_text("{")
        fresh.append(f)
    s.hook("session-start")
    assert not any(p.exists() for p in old), [p for p in old if p.exists()]
    assert all(p.exists() for p in fresh)
    # never on the per-tool path (the worker SessionStart started sweeps too: let it finish first, or on a
    # loaded machine it sweeps the file below after the PreToolUse has run)
    wait_workers_gone(s.sid)
    o = local / "clocks" / ".subconscious-tmp-z-3-dead"
    o.write_text("{")
    os.utime(o, (time.time() - 3600, time.time() - 3600))
    s.hook("pre-tool-use")
    assert o.exists()


def test_session_start_tells_the_user_when_the_shared_encryption_setting_is_not_followed(tmp_path, letta):
    """Issue 29: a folder writer turning encryption off is not followed (this machine's pin), and the user
    hears it: SessionStart's systemMessage says so (it was only in the machine's log), once per session
    start; while the setting is followed nothing is said."""
    s = Session(tmp_path, letta)
    r = subprocess.run([sys.executable, "-m", "subconscious", "key", "init"], env=s.env, cwd=str(s.project),
                       capture_output=True, text=True, timeout=120, input="")
    assert r.returncode == 0, r.stderr
    assert "systemMessage" not in s.hook("session-start")
    mallory = Store(s.home, "mallory", tmp_path / "mallory" / "locks", tmp_path / "mallory" / "clocks")
    mallory.put_setting("encryption", {"enabled": False, "keyId": None, "kdf": None, "rotation": None})
    out = json.loads(s.hook("session-start"))
    assert "not followed" in out["systemMessage"] and "key disable" in out["systemMessage"], out


def test_the_worker_reads_the_projects_private_text_when_the_session_begins(tmp_path, letta):
    """Red team finding: a line printed by a tool and then changed in its file before the first Stop was missed,
    the index being built at the first delivery. The start message's delivery builds it (and its cache, which
    keeps a changed file's lines), before any tool runs."""
    s = Session(tmp_path, letta, SUBCONSCIOUS_PRIVATE_PATHS="secrets/**")
    (s.project / "secrets").mkdir(parents=True, exist_ok=True)
    (s.project / "secrets" / "db.txt").write_text("acquisition target: Initech in Q3\n")
    s.hook("session-start")
    sessions = tmp_path / "local" / "sessions"
    deadline = time.monotonic() + 60  # the worker's run for the start message (this fake refuses the send)
    while not localsession.load(sessions, s.sid).failures and time.monotonic() < deadline:
        time.sleep(0.1)
    assert localsession.load(sessions, s.sid).failures, s.log()
    from subconscious.privacy.projectindex import project_index

    (s.project / "secrets" / "db.txt").write_text("acquisition target: Globex in Q4 now\n")  # changed after
    idx = project_index(str(s.project), ["secrets/**"], tmp_path / "local" / "private-index", write=False)
    assert idx.hit("acquisition target: Initech in Q3")
