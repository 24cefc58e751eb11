"""A sync engine's conflict copy of a host's own session file (hosts/<host>/session-<id> (conflicted
copy …).json) is folded by fold_all -- what `watch` and `doctor --fix` run -- like a copy of the view.
Before, only fold_session found it: fold_all left it in place for good (seen in the randomized mesh,
seed 26: two replicas kept the copies, two did not, and the mesh never converged)."""

from __future__ import annotations

import logging
import os

from subconscious.state.copynames import Engine, make_copy_name
from subconscious.state.records import SessionState
from subconscious.state.store.core import Store
from subconscious.sync.watcher import Watcher


def _host_session_with_an_older_version(home, local, sid):
    """Host h1's store, its own version of session ``sid`` (cursor 20) and the bytes of the version before
    it (cursor 10), which a sync engine keeps beside it as a copy."""
    a = Store(home, "h1", local / "locks", local / "clocks")
    a.update_session(sid, lambda cur: (cur or SessionState(sid)).evolve(last_processed_index=10))
    own = home / "hosts" / "h1" / f"session-{sid}.json"
    older = own.read_bytes()
    a.update_session(sid, lambda cur: cur.evolve(last_processed_index=20))
    return a, own, older


def test_fold_all_folds_copies_of_a_hosts_session_file_and_keeps_the_higher_cursor(tmp_path):
    home = tmp_path / "claude"
    a, own, older = _host_session_with_an_older_version(home, tmp_path / "l1", "s1")
    for engine in (Engine.DROPBOX, Engine.NEXTCLOUD):  # the older version, kept beside it by the engine
        (own.parent / make_copy_name(engine, own.name, device="ABCDEFG", host="h2", user="h2")).write_bytes(older)
    assert len(os.listdir(own.parent)) == 3
    w = Watcher(a, logging.getLogger("test"), say=lambda line: None)
    assert w.fold_if_needed() == 2  # watch sees them and folds them
    assert os.listdir(own.parent) == ["session-s1.json"]
    assert a.session("s1").last_processed_index == 20
    backups = [p.name for p in (home / "backups").rglob("*") if p.is_file()]
    assert len(backups) == 2, backups  # kept, not deleted


def test_onedrives_copy_of_a_hosts_session_file_is_folded_though_it_is_also_a_valid_session_name(tmp_path):
    """``session-<id>-<PC>-2.json`` reads as a session of its own too (seen in the mesh, seed 13: the
    copy stayed on every replica): with the original beside it and the same session inside, a copy."""
    home = tmp_path / "claude"
    a, own, older = _host_session_with_an_older_version(home, tmp_path / "l1", "cur-6")
    (own.parent / "session-cur-6-H2-2.json").write_bytes(older)
    w = Watcher(a, logging.getLogger("test"), say=lambda line: None)
    assert w.fold_if_needed() == 1
    assert os.listdir(own.parent) == ["session-cur-6.json"]
    assert a.session("cur-6").last_processed_index == 20


def test_a_copy_that_arrives_while_watch_folds_is_folded_on_the_next_wake(tmp_path):
    """rclone bisync writes ``X..path2`` and then ``X..path1``: a fold woken by the first can run while
    the second arrives. The copy it never looked at was marked as tried (the listing after the fold
    said so) and no later wake folded it; it stayed for good (CI, test_engines_end_to_end[rclone])."""
    home = tmp_path / "claude"
    a, own, older = _host_session_with_an_older_version(home, tmp_path / "l1", "s1")
    first = own.parent / make_copy_name(Engine.DROPBOX, own.name, device="ABCDEFG", host="h2", user="h2")
    first.write_bytes(older)
    second = own.parent / make_copy_name(Engine.NEXTCLOUD, own.name, device="ABCDEFG", host="h2", user="h2")
    fold_all = a.fold_all

    def arriving_during_the_fold():
        result = fold_all()
        second.write_bytes(older)  # lands after the fold listed the directory, before watch looks again
        return result

    a.fold_all = arriving_during_the_fold
    w = Watcher(a, logging.getLogger("test"), say=lambda line: None)
    assert w.fold_if_needed() == 1
    a.fold_all = fold_all
    assert w.fold_if_needed() == 1  # the wake its arrival caused
    assert os.listdir(own.parent) == ["session-s1.json"]
    assert w.fold_if_needed() == 0  # and nothing is folded twice


def test_a_copy_a_fold_left_is_tried_again_by_the_periodic_scan(tmp_path):
    """A fold can leave a copy for a passing reason (another writer kept the view's lease): its stat
    does not change, so no event names it again. The periodic scan tries it again."""
    import threading
    import time

    home = tmp_path / "claude"
    a, own, older = _host_session_with_an_older_version(home, tmp_path / "l1", "s1")
    copy = own.parent / make_copy_name(Engine.DROPBOX, own.name, device="ABCDEFG", host="h2", user="h2")
    copy.write_bytes(older)
    fold_all, calls = a.fold_all, []

    def busy_at_first():
        calls.append(1)
        return fold_all() if len(calls) > 2 else {"conversations": 0, "sessions": 0}  # left for later

    a.fold_all = busy_at_first
    w = Watcher(a, logging.getLogger("test"), say=lambda line: None, interval=0.2, recheck=0.05)
    t = threading.Thread(target=w.run, daemon=True)
    t.start()
    try:
        deadline = time.monotonic() + 20
        while copy.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not copy.exists(), f"the copy stayed ({len(calls)} folds)"
    finally:
        w.request_stop()
        t.join(10)
    assert a.session("s1").last_processed_index == 20


def test_a_copy_a_fold_left_is_tried_again_while_events_keep_coming(tmp_path):
    """The periodic scan ran only on a wait that timed out: on a home where something changes more often
    than once a ``recheck`` (sessions in progress write their files on every prompt and tool call), every
    wait was a wake and the scan never came, so a copy a fold left (a lease kept busy) stayed as long as
    the home stayed busy."""
    import threading
    import time

    home = tmp_path / "claude"
    a, own, older = _host_session_with_an_older_version(home, tmp_path / "l1", "s1")
    copy = own.parent / make_copy_name(Engine.DROPBOX, own.name, device="ABCDEFG", host="h2", user="h2")
    copy.write_bytes(older)
    fold_all, calls = a.fold_all, []

    def busy_at_first():
        calls.append(1)
        return fold_all() if len(calls) > 2 else {"conversations": 0, "sessions": 0}  # left for later

    a.fold_all = busy_at_first
    w = Watcher(a, logging.getLogger("test"), say=lambda line: None, interval=0.2, recheck=0.05, debounce=0.01,
                max_delay=0.02)
    t = threading.Thread(target=w.run, daemon=True)
    t.start()
    busy = home / "notes.txt"  # some file of the home that keeps changing
    try:
        deadline = time.monotonic() + 20
        n = 0
        while copy.exists() and time.monotonic() < deadline:
            n += 1
            busy.write_text(str(n))
            time.sleep(0.01)
        assert not copy.exists(), f"the copy stayed ({len(calls)} folds)"
    finally:
        w.request_stop()
        t.join(10)
    assert a.session("s1").last_processed_index == 20
