"""Red team, issue 24: the hook path's listing cache must see a conflict copy that arrived while the directory's
modification time was put back to the value the cache recorded (``rsync -a``, Unison ``times = true`` and
``touch -d`` restore a directory's mtime; its change time cannot be set back)."""

import json
import os
import time

from subconscious.state.records import SessionState
from subconscious.state.store.core import open_store


def _age_dirs(dirs, back_ns=10_000_000_000):
    old = {d: os.stat(d).st_mtime_ns - back_ns for d in dirs}
    for d, t in old.items():
        os.utime(d, ns=(t, t))
    return old


def test_copy_arriving_under_a_restored_directory_time_is_read(tmp_path, monkeypatch):
    from subconscious.state.sessions import listcache

    monkeypatch.setattr(listcache, "RACY_NS", 0)  # every listing trusted at once: only the token can tell
    home = tmp_path / "home"
    home.mkdir()
    store = open_store(home, "hosta", tmp_path / "local")
    store.update_session("s1", lambda cur: SessionState("s1", conversation_id="conv-1", last_processed_index=10))
    dirs = [home, *(p for p in (home / "hosts").rglob("*") if p.is_dir())]
    old = _age_dirs(dirs)  # the cache trusts a listing taken long after the last change
    assert store.session("s1").last_processed_index == 10  # listed and cached

    view = home / "session-s1.json"
    copy = json.loads(view.read_text())
    copy.update(lastProcessedIndex=50, conversationId="conv-2", hlc=f"{time.time_ns() // 10**6}:0", host="hostb")
    (home / "session-s1.sync-conflict-20261202-020000-ABCDEFG.json").write_text(json.dumps(copy))
    for d, t in old.items():  # the sync engine puts the source's directory time back
        os.utime(d, ns=(t, t))

    got = open_store(home, "hosta", tmp_path / "local").session("s1")  # a hook's read, through the cache
    assert (got.last_processed_index, got.conversation_id) == (50, "conv-2")
