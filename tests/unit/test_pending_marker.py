"""Red team of the deferred view's marker (``.subconscious-tmp-pending-<view>``, issue 24): whatever sits at
that name (a FIFO, a symlink to the view, a directory: a hostile peer on the same share, a broken tool), a
write neither hangs nor fails, nothing is read through the link, and the views hold every write. A directory
there made every put_conversation on the host raise IsADirectoryError after its write (the hooks and the
worker took the acknowledged write as failed). Real files in a tmp dir, through the Store API."""

from __future__ import annotations

import json
import os

from subconscious.state.records import SessionState
from subconscious.state.store.core import Store
from subconscious.state.viewlock import pending_path


def _store(tmp_path) -> Store:
    store = Store(tmp_path / "home", "h1", tmp_path / "l" / "locks", tmp_path / "l" / "clocks")
    store.put_conversation("s0", "c0", "a")
    store.update_session("s0", lambda cur: SessionState("s0", conversation_id="c0", last_processed_index=3))
    return store


def test_a_fifo_or_a_symlink_at_the_marker_name_neither_hangs_nor_is_followed(tmp_path):
    store = _store(tmp_path)
    for view in (store.view_path, store.session_path("s0")):
        os.mkfifo(pending_path(view))
    store.put_conversation("s1", "c1", "a")
    store.update_session("s0", lambda cur: cur.evolve(last_processed_index=5))
    assert set(json.loads(store.view_path.read_text())) == {"s0", "s1"}
    assert json.loads(store.session_path("s0").read_text())["lastProcessedIndex"] == 5
    os.symlink(store.view_path, pending_path(store.view_path))
    store.put_conversation("s2", "c2", "a")
    assert store.view_path.is_file() and not store.view_path.is_symlink()
    assert set(json.loads(store.view_path.read_text())) == {"s0", "s1", "s2"}


def test_a_directory_at_the_marker_name_fails_no_write(tmp_path):
    store = _store(tmp_path)
    for view in (store.view_path, store.session_path("s0")):
        os.mkdir(pending_path(view))
    store.put_conversation("s1", "c1", "a")  # raised IsADirectoryError
    store.update_session("s0", lambda cur: cur.evolve(last_processed_index=5))
    store.delete_conversation("s0")
    assert set(json.loads(store.view_path.read_text())) == {"s1"}
    assert json.loads(store.session_path("s0").read_text())["lastProcessedIndex"] == 5
    other = Store(tmp_path / "home", "h2", tmp_path / "l2" / "locks", tmp_path / "l2" / "clocks")
    assert set(other.read().live) == {"s1"}
