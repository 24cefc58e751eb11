"""`subconscious doctor`: each finding on a home that really has the problem, exit codes, --json,
--fix repairing what is safe (with backups), and never a change without --fix."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from subconscious.doctor.checks import diagnose
from subconscious.doctor.findings import KINDS
from subconscious.state.copynames import Engine, make_copy_name
from subconscious.state.records import SessionState
from subconscious.state.store.core import Store
from subconscious.state.textforms import dumps_canonical

REPO = Path(__file__).resolve().parents[2]
UPSTREAM = REPO / "tests" / "fixtures" / "upstream-home"


class Home:
    """A LETTA_HOME used by this machine (host alpha) and, through other local dirs, by other hosts."""

    def __init__(self, tmp: Path, host: str = "alpha"):
        self.tmp, self.host = tmp, host
        self.letta_home = tmp / "lh"
        self.state = self.letta_home / ".letta" / "claude"
        self.cwd = tmp / "project"
        self.cwd.mkdir(parents=True, exist_ok=True)

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "GIT_"))}
        env.update(LETTA_HOME=str(self.letta_home), SUBCONSCIOUS_HOST=self.host,
                   SUBCONSCIOUS_STATE_DIR=str(self.tmp / f"local-{self.host}"), COLUMNS="160")
        env.update(extra)
        return env

    def store(self, host: str | None = None, **kw) -> Store:
        host = host or self.host
        local = self.tmp / f"local-{host}"
        return Store(self.state, host, local / "locks", local / "clocks", **kw)

    def doctor(self, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "subconscious", "doctor", *args], cwd=self.cwd,
                              env=env or self.env(), capture_output=True, text=True, timeout=120)

    def findings(self, **kw):
        return diagnose(self.env(), str(self.cwd), **kw).findings

    def kinds(self, **kw) -> set[str]:
        return {f.kind for f in self.findings(**kw) if f.problem}


def tree(root: Path, read_caches: bool = True) -> dict[str, tuple]:
    """Every file and directory under ``root`` with its bytes' digest, mode and mtime. ``read_caches=False``:
    without the machine-local read caches (``local-<host>/cache/``, what a bulk read found last time, see
    subconscious/state/sessions/cache.py) and so without the time of the directory that holds them (a name
    created or removed beside them still shows)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = p.relative_to(root)
            if not read_caches and len(rel.parts) >= 2 and rel.parts[0].startswith("local-") and rel.parts[1] == "cache":
                continue
            st = p.lstat()
            digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            dated = not (not read_caches and len(rel.parts) == 1 and rel.parts[0].startswith("local-"))
            out[str(rel)] = (digest, st.st_mode, st.st_mtime_ns if dated else None)
    return out


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return Home(tmp_path)


def git(cwd: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


# --------------------------------------------------------------------------- clean, exit codes, json


def test_a_clean_home_exits_0_with_a_short_report(home):
    home.store().put_conversation("s1", "conv-1", "agent-1")
    r = home.doctor()
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no problems found" in r.stdout and "1 conversations, 1 hosts" in r.stdout
    data = json.loads(home.doctor("--json").stdout)
    assert data["ok"] is True and data["counts"]["conversations"] == 1 and data["host"] == "alpha"


def test_usage_errors_exit_2(home):
    assert home.doctor("--no-such-flag").returncode == 2
    r = home.doctor("--skew-threshold", "-5")
    assert r.returncode == 2 and "positive" in r.stderr


def test_json_findings_carry_kind_severity_path_message_fixable(home):
    home.store().put_conversation("s1", "conv-1", "agent-1")
    shutil.copyfile(home.state / "conversations.json", home.state / make_copy_name(Engine.SYNCTHING, "conversations.json"))
    r = home.doctor("--json")
    assert r.returncode == 1
    data = json.loads(r.stdout)
    assert data["ok"] is False
    (f,) = [f for f in data["findings"] if f["kind"] == "conflict-copy"]
    assert {"kind", "severity", "path", "message", "fixable"} <= set(f)
    assert f["engine"] == "syncthing" and f["fixable"] is True and f["severity"] == "warning"
    assert f["path"].startswith("conversations.sync-conflict-")
    assert all(x["kind"] in KINDS or x["kind"] for x in data["findings"])


# --------------------------------------------------------------------------- conflict copies


@pytest.mark.parametrize("engine", list(Engine), ids=[e.value for e in Engine])
def test_conflict_copies_of_every_engine_are_reported_and_folded(home, engine):
    a, b = home.store(), Home(home.tmp / "elsewhere", "beta").store()
    a.put_conversation("s-a", "conv-a", "agent-1")
    a.update_session("s-x", lambda cur: SessionState("s-x", conversation_id="conv-x", last_processed_index=3))
    b.put_conversation("s-b", "conv-b", "agent-1")  # another machine's view arrives as a copy
    view_copy = home.state / make_copy_name(engine, "conversations.json", host="BETA-PC", user="bob")
    shutil.copyfile(b.view_path, view_copy)
    further = json.loads(a.session_path("s-x").read_text()) | {"lastProcessedIndex": 40, "hlc": "1:0"}
    session_copy = home.state / make_copy_name(engine, "session-s-x.json", host="BETA-PC", user="bob")
    session_copy.write_text(json.dumps(further))

    found = [f for f in home.findings() if f.kind == "conflict-copy"]
    assert sorted(f.path for f in found) == sorted([view_copy.name, session_copy.name])
    assert {f.engine for f in found} == {engine.value} and all(f.fixable for f in found)

    r = home.doctor("--fix")
    assert r.returncode == 0, r.stdout
    assert "folded 2 conflict copies" in r.stdout
    assert not view_copy.exists() and not session_copy.exists()
    kept = sorted(p.name for p in (home.state / "backups").rglob("*") if p.is_file())
    assert kept == sorted([view_copy.name, session_copy.name])
    assert {"s-a", "s-b"} <= set(home.store().read().live)  # nothing lost
    assert home.store().session("s-x").last_processed_index == 40  # the cursor never moved back


def test_a_lookalike_that_is_not_ours_is_not_a_finding(home):
    home.store().put_conversation("s1", "conv-1", "agent-1")
    (home.state / "conversations 2.json").write_text('{"a user": ["file"]}')
    assert home.kinds() == set() and home.doctor().returncode == 0


# --------------------------------------------------------------------------- git conflict markers


def _markers(a: dict, b: dict, expand: int = 1) -> str:
    return "<<<<<<< HEAD\n" + dumps_canonical(a, expand) + "=======\n" + dumps_canonical(b, expand) + ">>>>>>> theirs\n"


def test_conflict_markers_in_view_session_and_another_hosts_shard_are_merged_by_fix(home):
    a, beta = home.store(), home.store("beta")
    a.put_conversation("s1", "conv-1", "agent-1")
    beta.put_conversation("s2", "conv-2", "agent-1")
    a.update_session("s9", lambda cur: SessionState("s9", conversation_id="conv-9", last_processed_index=5))
    view = json.loads(a.view_path.read_text())
    only_ours = {"s1": view["s1"]}
    only_theirs = {"s2": view["s2"], "s3": {"agentId": "agent-1", "conversationId": "conv-3", "hlc": "5:0", "host": "gamma"}}
    a.view_path.write_text(_markers(only_ours, only_theirs))
    sess = json.loads(a.session_path("s9").read_text())
    a.session_path("s9").write_text(_markers(sess, sess | {"lastProcessedIndex": 12, "hlc": "1:0"}))
    shard = json.loads(beta.shard_path().read_text())
    twin = shard | {"conversations": {"s4": {"agentId": "agent-1", "conversationId": "conv-4", "hlc": "6:0", "host": "beta"}}}
    beta.shard_path().write_text(_markers(shard, twin, 2))

    found = {f.path: f for f in home.findings() if f.kind == "git-conflict-markers"}
    assert set(found) == {"conversations.json", "session-s9.json", "hosts/beta.json"}
    assert all(f.fixable and f.severity == "error" for f in found.values())

    r = home.doctor("--fix")
    assert r.returncode == 0, r.stdout
    for rel in found:
        text = (home.state / rel).read_text()
        assert "<<<<<<<" not in text and json.loads(text)
    assert set(home.store().read().live) == {"s1", "s2", "s3", "s4"}
    assert home.store().session("s9").last_processed_index == 12
    kept = {p.name.split(".git-conflict.")[0] for p in (home.state / "quarantine").iterdir() if ".about." not in p.name}
    assert kept == {"conversations.json", "session-s9.json", "beta.json"}


# --------------------------------------------------------------------------- unparseable files


def test_an_unparseable_view_is_regenerated_and_kept_in_quarantine(home):
    home.store().put_conversation("s1", "conv-1", "agent-1")
    (home.state / "conversations.json").write_text('{"s1": {"conversationId": ')  # torn by some tool
    (f,) = [f for f in home.findings() if f.kind == "unparseable"]
    assert f.fixable and f.path == "conversations.json"
    r = home.doctor("--fix")
    assert r.returncode == 0, r.stdout
    assert json.loads((home.state / "conversations.json").read_text())["s1"]["conversationId"] == "conv-1"
    (q,) = [f for f in home.findings() if f.kind == "quarantined"]
    assert q.severity == "info" and "conversations.json (unparseable" in q.message


def test_another_hosts_unparseable_shard_is_reported_but_not_touched(home):
    home.store().put_conversation("s1", "conv-1", "agent-1")
    home.store("beta").put_conversation("s2", "conv-2", "agent-1")
    bad = home.state / "hosts" / "beta.json"
    bad.write_bytes(b"\x00\x01 not json")
    (f,) = [f for f in home.findings() if f.kind == "unparseable"]
    assert not f.fixable and f.host == "beta"
    r = home.doctor("--fix")
    assert r.returncode == 1 and "unparseable" in r.stdout.split("after:")[1]
    assert bad.read_bytes() == b"\x00\x01 not json"
    assert home.store().conversation("s2").conversation_id == "conv-2"  # adopted from the view by the fix


def test_a_shard_of_a_newer_format_is_an_error(home):
    home.store().put_conversation("s1", "conv-1", "agent-1")
    shard = json.loads(home.store().shard_path().read_text())
    (home.state / "hosts" / "future.json").write_text(json.dumps(shard | {"host": "future", "format": 9}))
    assert "shard-format" in home.kinds()


# --------------------------------------------------------------------------- across hosts


def test_the_same_session_mapped_to_different_conversations_by_two_hosts(home):
    home.store().put_conversation("s1", "conv-from-alpha", "agent-1")
    home.store("beta").put_conversation("s1", "conv-from-beta", "agent-1")
    (f,) = [f for f in home.findings() if f.kind == "session-split"]
    assert "conv-from-alpha on alpha" in f.message and "conv-from-beta on beta" in f.message
    assert "conv-from-beta (the newest) is used" in f.message and not f.fixable


def test_hosts_using_different_agents_are_a_split_brain(home):
    home.store().put_conversation("s1", "c1", "agent-one")
    home.store("beta").put_conversation("s2", "c2", "agent-one")
    assert "split-brain" not in home.kinds()
    home.store("gamma").put_conversation("s3", "c3", "agent-two")
    (f,) = [f for f in home.findings() if f.kind == "split-brain"]
    assert "agent-one on alpha, beta" in f.message and "agent-two on gamma" in f.message
    home.store("gamma").put_setting("agentId", "agent-one")  # gamma pins back to the shared agent
    assert "split-brain" not in home.kinds()


def test_clock_skew_between_hosts(home):
    hour = 3_600_000
    home.store().put_conversation("s1", "c1", "agent-1")
    ahead = home.store("fast", now=lambda: int(time.time() * 1000) + hour)
    ahead.put_conversation("s2", "c2", "agent-1")
    behind = home.store("slow", now=lambda: int(time.time() * 1000) - hour)
    behind.put_conversation("s3", "c3", "agent-1")  # reads fast's stamps: its clock jumps ahead of its wall
    rows = {f.host: f for f in home.findings() if f.kind == "clock-skew"}
    assert set(rows) == {"fast", "slow"}
    assert "in the future" in rows["fast"].message and "behind the newest stamp" in rows["slow"].message
    assert not [f for f in home.findings(skew_threshold_s=3 * 3600) if f.kind == "clock-skew"]


def test_legacy_upstream_entries_are_adopted_by_fix(home):
    shutil.copytree(UPSTREAM / ".letta", home.letta_home / ".letta")
    (f,) = [f for f in home.findings() if f.kind == "legacy-entry"]
    assert f.fixable and "upstream" in f.message
    r = home.doctor("--fix")
    assert r.returncode == 0, r.stdout
    shard = json.loads(home.store().shard_path().read_text())
    assert set(f.details["sessions"]) <= set(shard["conversations"])


def test_old_temp_files_are_removed_by_fix_and_fresh_ones_left(home):
    home.store().put_conversation("s1", "c1", "agent-1")
    old = home.state / ".subconscious-tmp-conversations.json-1-aa"
    fresh = home.state / ".subconscious-tmp-conversations.json-2-bb"
    old.write_text("{")
    fresh.write_text("{")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    assert [f.path for f in home.findings() if f.kind == "temp-file"] == [old.name]
    assert home.doctor("--fix").returncode == 0
    assert not old.exists() and fresh.exists()


def test_a_lock_held_past_its_timeout_is_reported_with_its_holder(home):
    home.store().put_conversation("s1", "c1", "agent-1")
    lock = home.tmp / "local-alpha" / "locks" / "alpha.lock"
    holder = subprocess.Popen([sys.executable, "-c", f"""
import fcntl, json, os, sys, time
fd = os.open({str(lock)!r}, os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
os.ftruncate(fd, 0)
os.write(fd, json.dumps({{"pid": os.getpid(), "host": "alpha", "since": "earlier", "since_epoch": time.time() - 300}}).encode())
print("held", flush=True)
sys.stdin.read()
"""], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        (f,) = [f for f in home.findings() if f.kind == "stale-lock"]
        assert f"pid {holder.pid}" in f.message and not f.fixable
    finally:
        holder.stdin.close()
        holder.wait(10)
    assert "stale-lock" not in home.kinds()


# --------------------------------------------------------------------------- LETTA_HOME


def test_an_unexpanded_letta_home_is_an_error_not_a_crash(home):
    r = home.doctor("--json", env=home.env(LETTA_HOME="$DROPBOX/state"))
    assert r.returncode == 1
    (f,) = json.loads(r.stdout)["findings"]
    assert f["kind"] == "letta-home" and f["severity"] == "error" and "$DROPBOX" in f["message"]
    assert not (home.cwd / "$DROPBOX").exists()


@pytest.mark.parametrize("value,words", [
    ("relative/dir", "relative"),
    ("{tmp}/sync/.letta/claude", "already ends in .letta/claude"),
    ("{tmp}/sync/.letta", "already ends in .letta"),
])
def test_odd_letta_homes_are_warned_about(home, value, words):
    env = home.env(LETTA_HOME=value.format(tmp=home.tmp))
    rows = [f for f in diagnose(env, str(home.cwd)).findings if f.kind == "letta-home"]
    assert any(words in f.message and f.severity == "warning" for f in rows), rows


def test_state_left_in_a_directory_literally_named_HOME_is_found(home):
    (home.cwd / "$HOME" / ".letta" / "claude").mkdir(parents=True)
    rows = [f for f in home.findings() if f.kind == "letta-home"]
    assert any("literally named '$HOME'" in f.message for f in rows)


# --------------------------------------------------------------------------- git


def test_a_git_clone_without_the_driver_is_reported_and_fixed(home):
    home.store().put_conversation("s1", "c1", "agent-1")
    git(home.letta_home, "init", "-q")
    kinds = home.kinds()
    assert {"git-driver-missing", "git-attributes-missing"} <= kinds
    r = home.doctor("--fix", env=home.env(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull))
    assert r.returncode == 0, r.stdout
    assert "merge-driver %O %A %B %P" in git(home.letta_home, "config", "--get", "merge.subconscious.driver")
    attrs = git(home.letta_home, "check-attr", "merge", "--", ".letta/claude/conversations.json")
    assert attrs.strip().endswith("subconscious")
    git(home.letta_home, "config", "merge.subconscious.driver", "/nonexistent/subconscious merge-driver %O %A %B")
    assert "git-driver-broken" in home.kinds()


# --------------------------------------------------------------------------- never a change without --fix


def test_without_fix_nothing_changes_even_in_a_home_full_of_problems(home):
    shutil.copytree(UPSTREAM / ".letta", home.letta_home / ".letta")
    a, beta = home.store(), home.store("beta", now=lambda: int(time.time() * 1000) + 7_200_000)
    a.put_conversation("s1", "c1", "agent-1")
    beta.put_conversation("s1", "c-other", "agent-2")
    shutil.copyfile(a.view_path, home.state / make_copy_name(Engine.DROPBOX, "conversations.json"))
    a.update_session("s5", lambda cur: SessionState("s5", last_processed_index=1))
    sess = json.loads(a.session_path("s5").read_text())
    a.session_path("s5").write_text(_markers(sess, sess | {"lastProcessedIndex": 3}))
    (home.state / "session-broken.json").write_text("{nope")
    (home.state / "hosts" / "gamma.json").write_text("[1, 2")
    old = home.state / ".subconscious-tmp-x"
    old.write_text("")
    os.utime(old, (1, 1))
    git(home.letta_home, "init", "-q")
    before = tree(home.tmp, read_caches=False)
    for args in ((), ("--json",)):
        r = home.doctor(*args)
        assert r.returncode == 1
    kinds = home.kinds()
    assert {"conflict-copy", "git-conflict-markers", "unparseable", "session-split", "split-brain", "clock-skew",
            "temp-file", "git-driver-missing"} <= kinds
    # not a byte, name, mode or mtime changed (home, local dirs, .git), but for the machine's read cache
    assert tree(home.tmp, read_caches=False) == before
    assert not (home.state / "quarantine").exists()


# --------------------------------------------------------------------------- encryption (issue 5's hook)


def test_values_sealed_with_a_key_this_machine_lacks_are_reported(home):
    from subconscious.state.seal import Key, seal

    elsewhere = Key.generate()  # a key only another machine holds
    envelope = seal(elsewhere, "guidance text", session_id="s7", label="guidance")
    home.store().update_session("s7", lambda cur: SessionState("s7", last_block_values={"guidance": envelope}))
    rows = [f for f in home.findings() if f.kind == "unknown-key"]
    assert len(rows) == 1 and rows[0].path == "session-s7.json" and rows[0].details["key_id"] == elsewhere.id
    assert "guidance text" not in json.dumps(json.loads(home.doctor("--json").stdout))
