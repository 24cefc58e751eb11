"""``subconscious gc`` on real directories: two machines (host ids with their own state dirs) share a home,
or keep replicas of it that a sync engine copies between; what a user of both notices."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from subconscious.local import sessions as localsession
from subconscious.sync.gc import run_gc
from subconscious.state.records import SessionState
from subconscious.state.store.retention import DAY_MS, parse_age
from subconscious.state.store.core import Store

NOW = int(time.time() * 1000)
OLD = NOW - 40 * DAY_MS
RECENT = NOW - 2 * DAY_MS


def store(tmp: Path, host: str, home: Path | None = None, at: int | None = None) -> Store:
    local = tmp / f"local-{host}"
    return Store(home or tmp / "home", host, local / "locks", local / "clocks",
                 now=(lambda: at) if at is not None else (lambda: int(time.time() * 1000)))


def session(s: Store, sid: str, cursor: int, conv: str | None = None) -> None:
    s.put_conversation(sid, conv or f"conv-{sid}", "agent-a")
    s.update_session(sid, lambda cur: (cur or SessionState(sid)).evolve(
        conversation_id=conv or f"conv-{sid}", last_processed_index=cursor))


def gc(tmp: Path, host: str, age: str = "30d", home: Path | None = None, **kw):
    return run_gc(store(tmp, host, home), tmp / f"local-{host}", age_ms=parse_age(age), **kw)


def session_files(home: Path, sid: str) -> list[str]:
    return sorted(str(p.relative_to(home)) for p in home.rglob(f"*{sid}*") if "backups" not in p.parts)


def test_gc_retires_idle_sessions_of_both_machines_and_keeps_recent_ones(tmp_path):
    home = tmp_path / "home"
    session(store(tmp_path, "alpha", at=OLD), "old-a", 5)
    session(store(tmp_path, "beta", at=OLD), "old-a", 7)  # worked on on both machines, 40 days ago
    session(store(tmp_path, "beta", at=OLD + 1000), "old-b", 3)
    session(store(tmp_path, "beta", at=RECENT), "fresh", 9)
    assert session_files(home, "old-a") == ["hosts/alpha/session-old-a.json", "hosts/beta/session-old-a.json",
                                            "session-old-a.json"]

    result = gc(tmp_path, "alpha")

    assert sorted(result.plan.retire) == ["old-a", "old-b"]
    for host in ("alpha", "beta"):  # what either machine reads now
        s = store(tmp_path, host)
        assert s.session("old-a") is None and s.session("old-b") is None
        assert s.conversation("old-a") is None and s.conversation("old-b") is None
        assert s.session("fresh").last_processed_index == 9 and s.conversation("fresh") is not None
        assert [sid for sid, _, _ in s.sessions()] == ["fresh"]
    assert session_files(home, "old-a") == [] and session_files(home, "old-b") == []
    view = json.loads((home / "conversations.json").read_text())
    assert set(view) == {"fresh"}
    assert gc(tmp_path, "beta").plan.retire == {}  # the other machine's gc finds nothing more to do


def test_nothing_comes_back_from_a_conflict_copy_a_stale_shard_or_a_backup(tmp_path):
    home = tmp_path / "home"
    session(store(tmp_path, "alpha", at=OLD), "s1", 5)
    session(store(tmp_path, "beta", at=OLD), "s1", 6)
    view_bytes = (home / "session-s1.json").read_bytes()
    beta_bytes = (home / "hosts/beta/session-s1.json").read_bytes()
    shard_bytes = (home / "hosts/beta.json").read_bytes()
    gc(tmp_path, "alpha", trust_clock=True)  # beta idle as long: its newest write is 40 days old too
    # Syncthing's copy of the old view, beta's old version restored from a backup, beta's old shard back
    (home / "session-s1.sync-conflict-20261130-090000-ABCDEFG.json").write_bytes(view_bytes)
    (home / "hosts/beta/session-s1.json").write_bytes(beta_bytes)
    (home / "hosts/beta.json").write_bytes(shard_bytes)
    (home / "conversations.sync-conflict-20261130-090000-ABCDEFG.json").write_bytes(
        json.dumps({"s1": json.loads(shard_bytes)["conversations"]["s1"]}).encode())
    for host in ("alpha", "beta", "gamma"):
        s = store(tmp_path, host)
        assert s.session("s1") is None and s.conversation("s1") is None
        assert list(s.sessions()) == []
    store(tmp_path, "beta").fold_all()  # beta's watcher folds the copies: still nothing comes back
    store(tmp_path, "gamma").update_session("other", lambda cur: SessionState("other", last_processed_index=1))
    assert store(tmp_path, "alpha").session("s1") is None
    gc(tmp_path, "beta")  # and the next gc clears the stale files away
    assert session_files(home, "s1") == []


def test_a_machine_that_had_not_synced_brings_back_only_what_it_did_after_the_gc(tmp_path):
    """Two replicas of the home, copied by a "sync engine" (shutil). beta works offline: a version it wrote
    before the gc arrives late and stays retired; its work after the gc is activity and brings the session
    back as beta has it."""
    home, offline = tmp_path / "home", tmp_path / "beta-replica"
    session(store(tmp_path, "alpha", at=OLD), "s1", 5)
    session(store(tmp_path, "alpha", at=OLD), "s2", 5)
    shutil.copytree(home, offline)
    session(store(tmp_path, "beta", home=offline, at=OLD + 1000), "s1", 8)  # before the gc, not synced yet
    gc(tmp_path, "alpha")
    time.sleep(0.002)
    session(store(tmp_path, "beta", home=offline), "s2", 11)  # after the gc: the user works on s2 on beta
    (home / "hosts/beta").mkdir()
    for sid in ("s1", "s2"):  # beta's files arrive
        shutil.copy2(offline / "hosts/beta" / f"session-{sid}.json", home / "hosts/beta" / f"session-{sid}.json")
    shutil.copy2(offline / "hosts/beta.json", home / "hosts/beta.json")
    a = store(tmp_path, "alpha")
    assert a.session("s1") is None and a.conversation("s1") is None  # stale: stays retired
    assert a.session("s2").last_processed_index == 11  # activity: back, with beta's cursor
    assert a.conversation("s2").conversation_id == "conv-s2"  # beta wrote the entry again too


def test_a_session_a_process_is_still_working_on_is_kept_even_with_0d(tmp_path):
    session(store(tmp_path, "alpha", at=OLD), "busy", 4)
    session(store(tmp_path, "alpha", at=OLD), "idle", 4)
    session(store(tmp_path, "alpha", at=OLD), "hook", 4)
    sessions_dir = tmp_path / "local-alpha" / "sessions"
    localsession.mark_pending(sessions_dir, "busy", time.time() + 60, "server down")
    localsession.save(sessions_dir, localsession.LocalSession("hook", cwd="/x"))  # a hook ran just now
    session(store(tmp_path, "alpha", at=OLD), "ended", 4)
    store(tmp_path, "alpha").update_session("ended", lambda cur: cur.with_end("2026-12-01T10:00:00Z", "clear"))
    localsession.save(sessions_dir, localsession.LocalSession("ended", cwd="/x"))  # its SessionEnd hook, just now
    idle = localsession.LocalSession("idle", cwd="/x")
    localsession.save(sessions_dir, idle)
    os.utime(localsession.path_for(sessions_dir, "idle"), (OLD / 1000, OLD / 1000))
    from subconscious.delivery import notices

    notices.add(sessions_dir, "idle", "subagent", 3, text="an old subagent's report")  # never delivered
    os.utime(localsession.path_for(sessions_dir, "idle"), (OLD / 1000, OLD / 1000))

    result = gc(tmp_path, "alpha", "0d")

    assert sorted(result.plan.retire) == ["ended", "idle"] and sorted(result.plan.keep) == ["busy", "hook"]
    for host in ("alpha", "beta"):
        s = store(tmp_path, host)
        assert s.session("busy").last_processed_index == 4 and s.conversation("busy") is not None
        assert s.session("hook").last_processed_index == 4
        assert s.session("idle") is None
    assert not localsession.path_for(sessions_dir, "idle").exists()  # its machine-local file went too
    assert not (sessions_dir / notices.NOTICES / "idle").exists()  # and what it had queued beside the transcript
    assert localsession.path_for(sessions_dir, "hook").exists()


def test_a_retired_session_written_again_starts_afresh(tmp_path):
    session(store(tmp_path, "alpha", at=OLD), "s1", 30)
    gc(tmp_path, "alpha")
    s = store(tmp_path, "alpha")
    seen = []
    s.update_session("s1", lambda cur: seen.append(cur) or SessionState("s1", conversation_id="conv-new"))
    assert seen == [None]  # the next hook finds no state: a new session, not the retired one's cursor
    assert s.session("s1").last_processed_index == -1
    assert store(tmp_path, "beta").session("s1").conversation_id == "conv-new"


def test_dry_run_changes_nothing_and_backups_and_quarantine_are_pruned_by_age(tmp_path):
    home = tmp_path / "home"
    session(store(tmp_path, "alpha", at=OLD), "s1", 1)
    old_day = time.strftime("%Y-%m-%d", time.gmtime(OLD / 1000))
    new_day = time.strftime("%Y-%m-%d", time.gmtime(NOW / 1000))
    for day in (old_day, new_day):
        (home / "backups" / day / "alpha").mkdir(parents=True)
        (home / "backups" / day / "alpha" / "x.json").write_text("{}")
    for day in (old_day, new_day):  # the daily budget's shards (budget.py)
        (home / "budget" / day).mkdir(parents=True)
        (home / "budget" / day / "alpha.json").write_text("{}")
    (home / "quarantine").mkdir()
    for name, at in (("old.unparseable.abc", OLD), ("new.unparseable.def", NOW)):
        (home / "quarantine" / name).write_text("{")
        os.utime(home / "quarantine" / name, (at / 1000, at / 1000))
    before = sorted(str(p) for p in home.rglob("*"))

    dry = gc(tmp_path, "alpha", dry_run=True)
    assert sorted(dry.plan.retire) == ["s1"] and f"backups/{old_day}" in dry.plan.prune
    assert sorted(str(p) for p in home.rglob("*")) == before and store(tmp_path, "beta").session("s1") is not None

    gc(tmp_path, "alpha")
    assert not (home / "backups" / old_day).exists() and (home / "backups" / new_day / "alpha" / "x.json").exists()
    assert sorted(os.listdir(home / "budget")) == [new_day]
    assert sorted(os.listdir(home / "quarantine")) == ["new.unparseable.def"]


def test_a_machine_whose_clock_is_behind_still_writes_above_the_floor(tmp_path):
    session(store(tmp_path, "alpha", at=OLD), "s1", 1)
    gc(tmp_path, "alpha", "0d")
    behind = store(tmp_path, "beta", at=NOW - 3_600_000)  # an hour slow
    behind.update_session("new", lambda cur: SessionState("new", conversation_id="c", last_processed_index=2))
    assert store(tmp_path, "alpha").session("new").last_processed_index == 2  # not retired by the floor
    assert store(tmp_path, "alpha").session("s1") is None


def test_watch_runs_gc_once_a_day(tmp_path):
    import logging
    import threading

    from subconscious.sync.gc import daily
    from subconscious.sync.watcher import Watcher

    session(store(tmp_path, "alpha", at=OLD), "s1", 1)
    local = tmp_path / "local-alpha"
    t0 = time.time()
    assert daily(store(tmp_path, "alpha"), local, age_ms=30 * DAY_MS, now=t0) is None  # first call: sets the mark
    assert daily(store(tmp_path, "alpha"), local, age_ms=30 * DAY_MS, now=t0 + 3600) is None
    assert store(tmp_path, "beta").session("s1") is not None
    assert "retired 1 sessions" in daily(store(tmp_path, "alpha"), local, age_ms=30 * DAY_MS, now=t0 + 86_401)
    assert store(tmp_path, "beta").session("s1") is None

    calls = []
    (tmp_path / "home").mkdir(exist_ok=True)
    w = Watcher(store(tmp_path, "alpha"), logging.getLogger("test"), interval=0.05, recheck=0.02, say=lambda _: None,
                gc=lambda: calls.append(1))
    thread = threading.Thread(target=w.run)
    thread.start()
    while len(calls) < 2:
        time.sleep(0.01)
    w.request_stop()
    thread.join(10)
    assert not thread.is_alive()


def test_doctor_notes_a_home_that_needs_gc_and_not_one_that_does_not(tmp_path):
    from subconscious.doctor.checks import diagnose

    def gc_notes(name: str) -> list:
        env = {"LETTA_HOME": str(tmp_path / name), "SUBCONSCIOUS_STATE_DIR": str(tmp_path / "local-alpha"),
               "SUBCONSCIOUS_HOST": "alpha", "HOME": str(tmp_path)}
        return [f for f in diagnose(env, str(tmp_path)).findings if f.kind == "gc-due"]

    session(store(tmp_path, "alpha", home=tmp_path / "recent" / ".letta" / "claude", at=RECENT), "fresh", 1)
    assert gc_notes("recent") == []
    old_home = tmp_path / "old" / ".letta" / "claude"
    session(store(tmp_path, "beta", home=old_home, at=OLD), "old", 1)
    session(store(tmp_path, "gamma", home=old_home, at=RECENT), "gamma-s", 1)  # another machine works on
    found = gc_notes("old")
    assert len(found) == 1 and found[0].details["sessions"] == ["old"] and "subconscious gc" in found[0].message
    run_gc(store(tmp_path, "alpha", home=old_home), tmp_path / "local-alpha", age_ms=parse_age("30d"))
    assert gc_notes("old") == []


def test_gc_on_the_desktop_keeps_what_the_laptop_wrote_minutes_ago_even_with_0d(tmp_path):
    """Issue 23: 'in use' on another machine is known here only by what it writes: its newest write to a
    session within the last 10 minutes keeps the session (its local locks are not visible here)."""
    now = int(time.time() * 1000)
    session(store(tmp_path, "laptop", at=now - 25 * 60_000), "idle-25-minutes", 4)  # oldest first (one clock)
    session(store(tmp_path, "laptop", at=now - 5 * 60_000), "five-minutes", 3)
    session(store(tmp_path, "laptop", at=now - 10_000), "delivered-10s-ago", 12)

    result = gc(tmp_path, "desktop", "0d")

    assert sorted(result.plan.retire) == ["idle-25-minutes"]
    assert "laptop wrote to it 290 s ago (in use there)" in result.plan.keep["five-minutes"]
    s = store(tmp_path, "laptop")
    assert s.session("delivered-10s-ago").last_processed_index == 12
    assert s.conversation("delivered-10s-ago").conversation_id == "conv-delivered-10s-ago"
    assert s.session("five-minutes").last_processed_index == 3 and s.session("idle-25-minutes") is None


def test_a_desktop_whose_clock_runs_31_days_ahead_retires_nothing_the_laptop_wrote_recently(tmp_path):
    now = int(time.time() * 1000)
    session(store(tmp_path, "laptop", at=now - 45 * DAY_MS), "45-days-ago", 2)  # oldest first (one clock)
    session(store(tmp_path, "laptop", at=now - 2 * DAY_MS), "two-days-ago", 5)
    session(store(tmp_path, "laptop", at=now - 3_600_000), "an-hour-ago", 7)
    ahead = now + 31 * DAY_MS
    desktop = Store(tmp_path / "home", "desktop", tmp_path / "ld" / "locks", tmp_path / "ld" / "clocks",
                    now=lambda: ahead)

    result = run_gc(desktop, tmp_path / "ld", age_ms=parse_age("30d"), now_ms=ahead)

    assert sorted(result.plan.retire) == ["45-days-ago"]  # 30 days older than the laptop's newest write
    out = result.to_json()
    assert out["clock_ahead_ms"] >= 31 * DAY_MS
    from subconscious.commands.gc import render

    assert "counted from the newest write of another machine, 31.0 d before this machine's clock" in render(out)
    s = store(tmp_path, "laptop")
    assert s.session("an-hour-ago").last_processed_index == 7 and s.session("two-days-ago").last_processed_index == 5
    assert s.conversation("two-days-ago") is not None
    # a later write of the laptop (its clock right) still counts: the floor is not in the future
    session(store(tmp_path, "laptop"), "new-on-laptop", 1)
    assert store(tmp_path, "desktop").session("new-on-laptop").last_processed_index == 1


def test_gc_leaves_a_retirement_record_with_the_conversation_and_the_cursor(tmp_path):
    session(store(tmp_path, "alpha", at=OLD), "s1", 30)
    gc(tmp_path, "alpha")
    for host in ("alpha", "beta"):
        s = store(tmp_path, host)
        assert s.conversation("s1") is None and s.session("s1") is None
        assert s.retired_conversation("s1") == {"conversationId": "conv-s1", "agentId": "agent-a", "cursor": 30}
    assert store(tmp_path, "beta").retired_conversation("never") is None


def _conversation_for(tmp_path, agent: str):
    from types import SimpleNamespace

    from subconscious.hooks.events.session_start import conversation_for

    made = []
    client = SimpleNamespace(create_conversation=lambda a: made.append(a) or {"id": "conv-new"})
    return conversation_for(SimpleNamespace(store=store(tmp_path, "laptop"), session_id="s1"), client, agent), made


def test_a_retired_session_that_comes_back_keeps_its_conversation_but_only_for_its_own_agent(tmp_path):
    session(store(tmp_path, "alpha", at=OLD), "s1", 30)
    gc(tmp_path, "alpha")
    assert _conversation_for(tmp_path, "agent-other") == ("conv-new", ["agent-other"])  # another agent: new one


def test_a_retirement_record_from_the_shared_home_is_reused_only_when_it_is_sound(tmp_path):
    """A record the home holds (a hostile or damaged one included) decides where a session's transcript goes:
    one without its agent, or with an id that is no Letta id (it goes into a URL path), is not reused."""
    from subconscious.state.clock import Stamp
    from subconscious.state.records import Tombstone

    for retired in ({"conversationId": "conv-s1", "agentId": None, "cursor": 3},
                    {"conversationId": "../agents/agent-x/messages", "agentId": "agent-a", "cursor": 3}):
        s = store(tmp_path, "mallory")
        s.put_conversation("s1", "conv-s1", "agent-a")
        s._write(lambda stamp, r=retired: ({"s1": Tombstone(stamp, "mallory", json.dumps({"retired": r}))}, {}))
        assert store(tmp_path, "laptop").retired_conversation("s1") == retired
        assert _conversation_for(tmp_path, "agent-a") == ("conv-new", ["agent-a"])
    s = store(tmp_path, "mallory")
    good = {"conversationId": "conv-s1", "agentId": "agent-a", "cursor": 3}
    s._write(lambda stamp: ({"s1": Tombstone(stamp, "mallory", json.dumps({"retired": good}))}, {}))
    assert _conversation_for(tmp_path, "agent-a") == ("conv-s1", [])  # a sound record: the same conversation
    assert store(tmp_path, "beta").conversation("s1").conversation_id == "conv-s1"


def test_lines_still_due_on_the_laptop_when_the_desktop_retired_the_session_go_to_its_conversation(
        tmp_path, monkeypatch):
    """The laptop's server was down for an hour: its lines wait behind a retry marker (which only the laptop
    sees) and the session's last write is an hour old, so the desktop's gc retires it. The laptop's next
    worker run (no hook needed) brings it back in the same conversation and sends only the waiting lines."""
    from subconscious.delivery import worker
    from subconscious.local.runtime import runtime
    from tests.harness.fake_letta_conv import FakeLetta
    from tests.harness.transcripts import Transcript

    for k, v in {"LETTA_HOME": str(tmp_path / "shared"), "SUBCONSCIOUS_HOST": "laptop", "HOME": str(tmp_path),
                 "SUBCONSCIOUS_STATE_DIR": str(tmp_path / "local-laptop"), "LETTA_API_KEY": "k"}.items():
        monkeypatch.setenv(k, v)
    for var in ("SUBCONSCIOUS_DAILY_CHARS", "SUBCONSCIOUS_DAILY_TURNS", "SUBCONSCIOUS_DAILY_CHARS_TOTAL",
                "SUBCONSCIOUS_DAILY_TURNS_TOTAL"):
        monkeypatch.delenv(var, raising=False)
    rt = runtime()
    sid, sessions = "s-laptop", tmp_path / "local-laptop" / "sessions"
    tr = Transcript(tmp_path / "t.jsonl", sid, str(tmp_path)).user("TURN-1 make").assistant("ok")
    rt.store().put_conversation(sid, "conv-1", "agent-1")
    rt.store().update_session(sid, lambda cur: SessionState(sid, conversation_id="conv-1", agent_id="agent-1"))
    local = localsession.load(sessions, sid)
    local.transcript_path, local.start_for = str(tr.path), "conv-1"
    localsession.save(sessions, local)
    server = FakeLetta()
    assert worker.deliver(rt, sid, client=server).error is None
    tr.user("TURN-2 fly").assistant("ok")  # the server is down now: the lines wait here
    desktop = Store(tmp_path / "shared" / ".letta" / "claude", "desktop", tmp_path / "ld" / "locks",
                    tmp_path / "ld" / "clocks")
    later = int(time.time() * 1000) + 3_600_000
    result = run_gc(desktop, tmp_path / "ld", age_ms=parse_age("30m"), now_ms=later, trust_clock=True)
    assert sid in result.plan.retire and rt.store().session(sid) is None

    assert worker.deliver(rt, sid, client=server).error is None
    assert rt.store().session(sid).conversation_id == "conv-1" and rt.store().conversation(sid) is not None
    users = [m.get("content") for m, _ in server.turns() if m.get("message_type") == "user_message"]
    assert sum("TURN-1" in str(u) for u in users) == 1 and sum("TURN-2" in str(u) for u in users) == 1
