"""``subconscious gc`` on real directories: two machines (host ids with their own state dirs) share a home,
or keep replicas of it that a sync engine copies between; what a user of both notices."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from subconscious import localsession
from subconscious.gc import run_gc
from subconscious.state.records import SessionState
from subconscious.state.retention import DAY_MS, parse_age
from subconscious.state.store import Store

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
    gc(tmp_path, "alpha")
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
    from subconscious import notices

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

    from subconscious.gc import daily
    from subconscious.watcher import Watcher

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
    found = gc_notes("old")
    assert len(found) == 1 and found[0].details["sessions"] == ["old"] and "subconscious gc" in found[0].message
    run_gc(store(tmp_path, "alpha", home=old_home), tmp_path / "local-alpha", age_ms=parse_age("30d"))
    assert gc_notes("old") == []
