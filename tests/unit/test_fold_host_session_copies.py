"""A sync engine's conflict copy of a host's own session file (hosts/<host>/session-<id> (conflicted
copy …).json) is folded by fold_all -- what `watch` and `doctor --fix` run -- like a copy of the view.
Before, only fold_session found it: fold_all left it in place for good (seen in the randomized mesh,
seed 26: two replicas kept the copies, two did not, and the mesh never converged)."""

from __future__ import annotations

import logging
import os

from subconscious.state.conflicts import Engine, make_copy_name
from subconscious.state.records import SessionState
from subconscious.state.store import Store
from subconscious.watcher import Watcher


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
