"""Hostile files in the shared home (issue 9): FIFOs and links to /dev/zero named like state files, links
to files outside the home, JSON nested 200,000 deep, 5,000-digit integers, a Notepad BOM, over-long
names, session ids that read as conflict copies, and hostile hook input. Whatever is there, status and
doctor answer in seconds, hooks exit 0 without a traceback, and no byte of a file outside the home
ever lands inside it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from subconscious.state.copynames import ConflictCopy, classify
from subconscious.state.files import ASIDE_NAME_MAX, NAME_MAX, UNSAFE, fit_name, read_json, set_aside
from subconscious.state.ids import InvalidIdentifier, check_session_id
from subconscious.state.records import SessionState
from subconscious.state.sources import Read, copy_source
from subconscious.state.store.core import Store

SECRET = b"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA-hostile-test\n"
DEEP = b"[" * 200_000 + b"]" * 200_000
DEEP_OBJ = b'{"a":' * 200_000 + b"1" + b"}" * 200_000
HUGE_INT = b'{"sessionId": "int", "lastProcessedIndex": ' + b"9" * 5000 + b"}"
LONG_COPY_OWNER = "Jürgen Müller-Lüdenscheidt" * 2
pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")


class Rig:
    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.state = tmp / "lh" / ".letta" / "claude"
        (self.state / "hosts").mkdir(parents=True)
        self.outside = tmp / "outside"
        self.outside.mkdir()
        self.key = self.outside / "id_ed25519"
        self.key.write_bytes(SECRET)
        self.project = tmp / "project"
        self.project.mkdir()

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "CLAUDE", "GIT_"))}
        env.update(HOME=str(self.tmp / "user"), LETTA_HOME=str(self.tmp / "lh"), SUBCONSCIOUS_HOST="laptop",
                   SUBCONSCIOUS_STATE_DIR=str(self.tmp / "local"), LETTA_BASE_URL="http://127.0.0.1:9",
                   COLUMNS="200", **extra)
        return env

    @property
    def log_path(self) -> Path:
        return self.tmp / "local" / "logs" / "subconscious.log"

    def log(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""

    def store(self, **kw) -> Store:
        return Store(self.state, "laptop", self.tmp / "local" / "locks", self.tmp / "local" / "clocks", **kw)

    def run(self, *args: str, stdin: bytes = b"", timeout: float = 30) -> tuple[subprocess.CompletedProcess, float]:
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "subconscious", *args], input=stdin, capture_output=True,
                              env=self.env(), cwd=self.project, timeout=timeout)
        return proc, time.monotonic() - t0

    def hostile(self) -> None:
        """Every kind of hostile file at once, each under a name the store reads."""
        os.mkfifo(self.state / "conversations.json")
        os.mkfifo(self.state / "session-fifo.json")
        os.mkfifo(self.state / "hosts" / "h.json")
        os.symlink("/dev/zero", self.state / "session-zero.json")
        os.symlink("/dev/zero", self.state / "hosts" / "zero.json")
        os.symlink(self.key, self.state / "session-key.json")
        os.symlink(self.key, self.state / "hosts" / "key.json")
        os.symlink(self.key, self.state / "session-key.sync-conflict-20261130-063049-ZV4TXD3.json")
        (self.state / "session-deep.json").write_bytes(DEEP)
        (self.state / "hosts" / "deep.json").write_bytes(DEEP_OBJ)
        (self.state / "session-int.json").write_bytes(HUGE_INT)
        (self.state / "session-bom.json").write_bytes(b'\xef\xbb\xbf{"sessionId": "bom", "lastProcessedIndex": 3}')
        (self.state / "quarantine").mkdir()
        os.mkfifo(self.state / "quarantine" / "x.unparseable.0123456789ab.about.json")  # doctor lists these

    def inside_bytes(self) -> bytes:
        """Every byte of every regular file under the home (links not followed)."""
        out = b""
        for dirpath, _, names in os.walk(self.tmp / "lh"):
            for name in names:
                p = Path(dirpath) / name
                if p.is_file() and not p.is_symlink():
                    out += p.read_bytes()
        return out


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    return Rig(tmp_path)


# ------------------------------------------------------------------ status and doctor as a user runs them


def test_status_and_doctor_answer_within_seconds_on_a_hostile_home(rig: Rig, record_property):
    rig.hostile()
    out, seconds = rig.run("status", "--json")
    assert out.returncode == 0, out.stderr
    assert seconds < 10, f"status took {seconds:.1f} s"
    assert b"Traceback" not in out.stdout + out.stderr
    kinds = {(Path(p["path"]).name, p["kind"]) for p in json.loads(out.stdout)["problems"]}
    for name in ("conversations.json", "session-fifo.json", "h.json", "session-zero.json", "zero.json",
                 "session-key.json", "key.json"):
        assert (name, UNSAFE) in kinds, (name, kinds)
    assert ("session-deep.json", "unparseable") in kinds and ("session-int.json", "unparseable") in kinds
    assert ("deep.json", "unparseable") in kinds
    print(f"status on the hostile home: {seconds:.2f} s")
    record_property("status_seconds", round(seconds, 2))

    doc, seconds = rig.run("doctor", "--json")
    assert doc.returncode == 1 and seconds < 10, (doc.returncode, seconds, doc.stderr[-2000:])
    assert b"Traceback" not in doc.stdout + doc.stderr
    findings = {(Path(f["path"]).name, f["kind"]) for f in json.loads(doc.stdout)["findings"]}
    for name in ("conversations.json", "session-fifo.json", "h.json", "session-zero.json", "session-key.json"):
        assert (name, UNSAFE) in findings, (name, findings)
    assert ("session-deep.json", "unparseable") in findings and ("session-int.json", "unparseable") in findings
    print(f"doctor on the hostile home: {seconds:.2f} s")
    record_property("doctor_seconds", round(seconds, 2))
    assert SECRET not in rig.inside_bytes()


def test_doctor_fix_and_the_hooks_never_copy_a_linked_file_into_the_home(rig: Rig):
    rig.hostile()
    fixed, seconds = rig.run("doctor", "--fix", timeout=60)
    assert seconds < 20 and b"Traceback" not in fixed.stdout + fixed.stderr, fixed.stderr[-2000:]
    for sid in ("key", "zero", "fifo", "deep", "int", "bom"):
        data = {"session_id": sid, "cwd": str(rig.project), "transcript_path": str(rig.tmp / "t.jsonl")}
        for event in ("session-start", "stop"):
            ran, seconds = rig.run("hook", event, stdin=json.dumps(data).encode())
            assert ran.returncode == 0 and ran.stdout == b"", (event, sid, ran.stderr[-2000:])
            assert b"Traceback" not in ran.stderr and seconds < 15, (event, sid, seconds)
    assert SECRET not in rig.inside_bytes()
    assert rig.key.read_bytes() == SECRET  # and the target itself is untouched


# ------------------------------------------------------------------ the reader, in-process


@pytest.mark.parametrize("make", ["fifo", "dev-zero", "outside", "directory"])
def test_read_json_reports_links_and_special_files_and_never_copies_them(rig: Rig, make: str):
    path = rig.state / "session-x.json"
    if make == "fifo":
        os.mkfifo(path)
    elif make == "dev-zero":
        os.symlink("/dev/zero", path)
    elif make == "outside":
        os.symlink(rig.key, path)
    else:
        path.mkdir()
    result = read_json(path, root=rig.state, host="laptop", keep=True)
    assert result.values == [] and result.raw == b"" and [p.kind for p in result.problems] == [UNSAFE]
    assert not (rig.state / "quarantine").exists()


def test_nothing_is_read_through_or_set_aside_into_a_linked_directory(rig: Rig):
    (rig.outside / "id.json").write_bytes(SECRET)
    os.rmdir(rig.state / "hosts")
    os.symlink(rig.outside, rig.state / "hosts")
    result = read_json(rig.state / "hosts" / "id.json", root=rig.state, host="laptop")
    assert [p.kind for p in result.problems] == [UNSAFE] and result.raw == b""
    elsewhere = rig.tmp / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, rig.state / "quarantine")
    (rig.state / "session-s1.json").write_bytes(b"garbage")
    result = read_json(rig.state / "session-s1.json", root=rig.state, host="laptop")  # reported, not kept
    assert [p.kind for p in result.problems] == ["unparseable"] and result.problems[0].kept_at is None
    assert not list(elsewhere.iterdir())
    assert SECRET not in rig.inside_bytes()


def test_an_over_large_file_is_refused_unread(rig: Rig, monkeypatch):
    from subconscious.state import fs

    path = rig.state / "conversations.json"
    path.write_bytes(b"{}" + b" " * 100)
    monkeypatch.setattr(fs.RealFS.read, "__defaults__", (50,))  # the cap, as a smaller number
    result = read_json(path, root=rig.state, host="laptop")
    assert [p.kind for p in result.problems] == [UNSAFE] and "limit" in result.problems[0].message
    assert not (rig.state / "quarantine").exists()


@pytest.mark.parametrize("raw", [DEEP, DEEP_OBJ, HUGE_INT, b"NaN", b'{"a": "\\udc00"}'],
                         ids=["deep", "deep-object", "huge-int", "nan", "surrogate"])
def test_every_json_failure_is_unparseable_set_aside_and_the_store_goes_on(rig: Rig, raw: bytes):
    store = rig.store()
    store.put_conversation("s1", "conv-1", "agent-1")
    (rig.state / "conversations.json").write_bytes(raw)
    (rig.state / "session-s1.json").write_bytes(raw)
    assert store.read().get("s1").conversation_id == "conv-1"  # recovered from this host's shard
    assert store.session("s1") is None
    assert any(p.kind == "unparseable" for p in store.session_problems("s1"))
    result = read_json(rig.state / "session-s1.json", root=rig.state, host="laptop")
    assert [p.kind for p in result.problems] == ["unparseable"] and result.values == []
    kept = [p.read_bytes() for p in (rig.state / "quarantine").iterdir() if not p.name.endswith(".about.json")]
    assert raw in kept
    store.put_conversation("s2", "conv-2", "agent-1")  # one bad file does not block writes
    assert {"s1", "s2"} <= set(store.read().live)


def test_a_notepad_bom_is_read(rig: Rig):
    store = rig.store()
    (rig.state / "conversations.json").write_bytes(b'\xef\xbb\xbf{"s1": "conv-legacy"}')
    (rig.state / "session-s1.json").write_bytes(b'\xef\xbb\xbf{"sessionId": "s1", "lastProcessedIndex": 7}')
    assert store.read().get("s1").conversation_id == "conv-legacy"
    assert store.session("s1").last_processed_index == 7
    got = read_json(rig.state / "conversations.json", root=rig.state, host="laptop")
    assert got.values == [{"s1": "conv-legacy"}] and not got.problems


def test_the_store_never_copies_a_file_from_behind_a_linked_hosts_directory(rig: Rig):
    (rig.outside / "id.json").write_bytes(SECRET)
    os.rmdir(rig.state / "hosts")
    os.symlink(rig.outside, rig.state / "hosts")
    rig.store().read()
    assert SECRET not in rig.inside_bytes()


def test_the_store_never_writes_through_a_linked_hosts_directory(rig: Rig):
    before = sorted(p.name for p in rig.outside.iterdir())
    os.rmdir(rig.state / "hosts")
    os.symlink(rig.outside, rig.state / "hosts")
    with pytest.raises(OSError):
        rig.store().put_conversation("s1", "conv-1", "agent-a")
    with pytest.raises(OSError):
        rig.store().update_session("s1", lambda cur: SessionState("s1", last_processed_index=1))
    assert sorted(p.name for p in rig.outside.iterdir()) == before


def test_a_copy_whose_name_is_not_utf8_does_not_crash_the_store(rig: Rig):
    (rig.state / "session-s1.json").write_text('{"sessionId": "s1", "lastProcessedIndex": 1}')
    (rig.state / os.fsdecode(b"session-s1 (J\xfcrgen's conflicted copy 2026-11-30).json")).write_bytes(b"garbage")
    assert rig.store().session("s1").last_processed_index == 1


# ------------------------------------------------------------------ names under NAME_MAX


def test_names_made_from_long_names_stay_under_name_max(rig: Rig):
    copy = f"session-{'s' * 128} ({LONG_COPY_OWNER}'s conflicted copy 2026-11-30) (12).json"
    assert len(copy.encode()) <= NAME_MAX
    kept = set_aside(rig.state / copy, b"garbage", "invalid-entry", rig.state, "laptop")
    assert len(kept.name.encode()) <= ASIDE_NAME_MAX and kept.read_bytes() == b"garbage"
    assert Path(str(kept) + ".about.json").exists()
    other = set_aside(rig.state / (copy[:-6] + "x.json"), b"garbage", "invalid-entry", rig.state, "laptop")
    assert other != kept  # shortened names of different files stay different
    short = fit_name("é" * 200, 101)
    assert len(short.encode()) <= 101 and short.startswith("é" * 40)  # no character cut in two


def test_a_long_session_id_with_a_long_copy_name_reads(rig: Rig):
    sid = "s" * 128
    store = rig.store()
    store.update_session(sid, lambda cur: SessionState(sid, last_processed_index=1))
    copy = f"session-{sid} ({LONG_COPY_OWNER}'s conflicted copy 2026-11-30) (12).json"
    assert isinstance(classify(copy, [copy, f"session-{sid}.json"]), ConflictCopy)
    (rig.state / copy).write_bytes(b"\x00 not json")
    assert store.session(sid).last_processed_index == 1  # no OSError 36
    assert (rig.state / "quarantine").is_dir()


def test_fold_names_stay_under_name_max(rig: Rig):
    (rig.state / "hosts" / ("x" * 60 + ".json")).write_text("{}")
    long_copy = rig.state / "hosts" / ("x" * 60 + " (" + "y" * 155 + "'s conflicted copy 2026-11-30).json")
    long_copy.write_text("{}")
    found = classify(long_copy.name, where="hosts")
    assert isinstance(found, ConflictCopy)
    read = Read(copy_source(long_copy, found, "x" * 60), raw=b"{}", values=[{}])  # as a write read it
    moved = rig.store()._fold([read])
    assert moved and len(moved[0].name.encode()) <= NAME_MAX and moved[0].read_bytes() == b"{}"


def test_fold_never_moves_or_reads_what_is_no_longer_a_regular_file(rig: Rig):
    name = "session-a.sync-conflict-20261130-063049-ZV4TXD3.json"
    os.symlink(rig.key, rig.state / name)
    read = Read(copy_source(rig.state / name, classify(name)), raw=SECRET, values=[{}])  # read as a file, now a link
    assert rig.store()._fold([read]) == []
    assert (rig.state / name).is_symlink()
    assert SECRET not in rig.inside_bytes()


# ------------------------------------------------------------------ session ids at the hook boundary


@pytest.mark.parametrize("sid", ["abc_conflict-20261130-063049", "abc-laptop-safeBackup-0001"])
def test_session_ids_that_read_as_a_conflict_copy_are_refused(rig: Rig, sid: str):
    with pytest.raises(InvalidIdentifier, match="conflict copy"):
        check_session_id(sid)
    data = {"session_id": sid, "cwd": str(rig.project), "transcript_path": str(rig.tmp / "t.jsonl")}
    ran, _ = rig.run("hook", "session-start", stdin=json.dumps(data).encode())
    assert ran.returncode == 0 and b"Traceback" not in ran.stdout + ran.stderr
    assert "conflict copy" in rig.log() and sid in rig.log()
    assert not list(rig.state.glob("session-*.json"))


@pytest.mark.parametrize("sid", ["abc_conflict-20261330-063049", "abc-safeBackup-0001", "a_conflict-x",
                                 "6f1c2a0e-1b2c-4d5e-8f90-123456789abc"])
def test_ids_near_the_patterns_are_still_fine(sid: str):
    assert check_session_id(sid) == sid


# ------------------------------------------------------------------ hook stdin, as Claude Code runs the hook


@pytest.mark.parametrize("name,raw", [pytest.param(*case, id=case[0]) for case in [
    ("deep", b'{"session_id": "s", "x": ' + DEEP + b"}"),
    ("deep-open", b"[" * 200_000),
    ("huge-int", b'{"session_id": ' + b"7" * 5000 + b"}"),
    ("nan", b'{"session_id": NaN}'),
    ("bom", b'\xef\xbb\xbf{"session_id": "../x"}'),
    ("binary", bytes(range(256)) * 4),
    ("array", b"[1, 2, 3]"),
    ("surrogate", b'{"session_id": "s", "cwd": "\\ud800"}'),
    ("over-8-mib", b'{"x": "' + b"a" * (8 * 1024 * 1024 + 10) + b'"}'),
]])
def test_any_hook_stdin_exits_0_with_a_logged_reason_and_no_traceback(rig: Rig, name: str, raw: bytes):
    for event in ("session-start", "user-prompt-submit", "pre-tool-use", "stop"):
        before = rig.log()
        ran, seconds = rig.run("hook", event, stdin=raw)
        assert ran.returncode == 0 and ran.stdout == b"", (event, name, ran.stderr[-1000:])
        assert b"Traceback" not in ran.stderr and seconds < 15, (event, name)
        added = rig.log()[len(before):]
        assert f"hook {event}:" in added, (event, name, added)
        assert "Traceback" not in added and len(added.strip().splitlines()) == 1, added


# ------------------------------------------------------------------ git's merge driver


def test_the_merge_driver_merges_around_a_deep_side(rig: Rig):
    repo = rig.tmp / "repo"
    repo.mkdir()
    base, ours, theirs = (repo / n for n in ("base", "ours", "theirs"))

    def driver() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "subconscious", "merge-driver", str(base), str(ours), str(theirs),
                               "conversations.json"], cwd=repo, capture_output=True, env=rig.env(), timeout=60)

    base.write_bytes(b"{}")
    ours.write_bytes(json.dumps({"s1": {"conversationId": "c1", "agentId": "a", "hlc": "1:0", "host": "h"}}).encode())
    theirs.write_bytes(DEEP)
    ran = driver()
    assert b"Traceback" not in ran.stderr and ran.returncode == 0, ran.stderr[-2000:]
    assert json.loads(ours.read_bytes())["s1"]["conversationId"] == "c1"
    ours.write_bytes(DEEP)
    theirs.write_bytes(HUGE_INT)
    ran = driver()
    assert b"Traceback" not in ran.stderr and ran.returncode == 1, ran.stderr[-2000:]  # both kept, markers
