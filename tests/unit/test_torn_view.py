"""Our write while upstream is half-way through its in-place write of ``conversations.json``.

Upstream writes the view in place: open with truncate, then write. In a legacy home (upstream alone used it:
no shards yet) that file is the only copy of upstream's entries. If our put swapped its view in over the torn
file, upstream's finished write would land in the displaced inode and the view upstream reads next would
have no entry for its session (it would start a new conversation) until a later merge put it back. The
simulation found it (legacy start, "upstream new key / our put of the same key"); this is that schedule on a
real home.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from subconscious.state.fs import RealFS
from subconscious.state.records import SessionState
from subconscious.state.store.core import Store


def make(tmp: Path, host: str, fs=None) -> Store:
    kw = {} if fs is None else {"fs": fs}
    return Store(tmp / "home", host, tmp / f"local-{host}" / "locks", tmp / f"local-{host}" / "clocks", **kw)


class UpstreamFinishes(RealFS):
    """The real file system; upstream's in-place write goes on while our write waits on the torn view."""

    def __init__(self, rest):
        super().__init__()
        self.rest = rest  # upstream's remaining write(2) calls, one per wait

    def wait_changed(self, path, seconds):
        if self.rest:
            self.rest.pop(0)()


def legacy_view(tmp: Path, entries: dict) -> Path:
    home = tmp / "home"
    home.mkdir(mode=0o700, parents=True)
    view = home / "conversations.json"
    view.write_text(json.dumps(entries, indent=2))
    return view


def upstream_reads(view: Path) -> dict:
    return {k: (v if isinstance(v, str) else v.get("conversationId")) for k, v in json.loads(view.read_text()).items()}


def test_our_put_during_upstreams_in_place_write_never_hides_its_entries(tmp_path):
    view = legacy_view(tmp_path, {"s1": {"conversationId": "c0", "agentId": "a"}})
    upstream_map = json.loads(view.read_text())
    upstream_map["s3"] = {"conversationId": "c-up", "agentId": "a"}  # upstream's new key ...
    text = json.dumps(upstream_map, indent=2)
    with open(view, "r+") as f:  # written in place: truncate, the first part, (our put), the rest
        f.truncate(0)
        f.write(text[: len(text) // 2])
        f.flush()
        a = make(tmp_path, "alpha", UpstreamFinishes([lambda: (f.write(text[len(text) // 2:]), f.flush())]))
        a.put_conversation("s2", "c-ours", "agent-a")  # acknowledged: in alpha's shard, and in the view
    assert upstream_reads(view) == {"s1": "c0", "s2": "c-ours", "s3": "c-up"}  # upstream's next read
    assert a.read().get("s2").conversation_id == "c-ours"  # our acknowledged write was not lost
    assert a.read().get("s1").conversation_id == "c0"
    assert a.read().get("s3").conversation_id == "c-up"
    a.refresh()
    assert upstream_reads(view) == {"s1": "c0", "s2": "c-ours", "s3": "c-up"}
    assert not [n for n in os.listdir(view.parent) if "displaced" in n]


def test_a_torn_view_left_by_a_writer_that_died_is_published_over(tmp_path):
    view = legacy_view(tmp_path, {})
    view.write_text('{\n  "s1": {"conversationId": "c')  # torn, and nobody is writing it any more
    old = time.time() - 60
    os.utime(view, (old, old))
    a = make(tmp_path, "alpha")
    a.put_conversation("s2", "c-ours", "agent-a")
    assert upstream_reads(view) == {"s2": "c-ours"}  # repaired at once (the torn bytes are quarantined)
    assert list((view.parent / "quarantine").iterdir())


def test_a_torn_view_that_nobody_finishes_is_published_over_after_a_short_wait(tmp_path):
    view = legacy_view(tmp_path, {})
    view.write_text('{\n  "s1": {"conversationId": "c')  # torn just now, and nobody writes on
    waits = []
    fs = UpstreamFinishes([])
    fs.wait_changed = lambda path, seconds: waits.append(seconds)
    a = make(tmp_path, "alpha", fs)
    a.put_conversation("s2", "c-ours", "agent-a")
    assert upstream_reads(view) == {"s2": "c-ours"}
    assert 0 < sum(waits) <= 0.1  # bounded: never hangs a hook on a file that stays torn


def test_a_torn_conflict_copy_is_not_filed_away_while_upstreams_write_may_still_be_going_into_it(tmp_path):
    """Syncthing finds ``session-s5.json`` in conflict while upstream's worker is half-way through its
    in-place write (``lastProcessedIndex`` 14): it renames the local file to a ``.sync-conflict-`` name and
    installs the remote version; upstream's open file descriptor now writes into the copy. Our Stop's
    cursor write (13) then reads the copy torn. The simulation's full run found that the write filed the
    torn copy into ``backups/``, so upstream's finished write (acknowledged: its file still had a name)
    landed where nobody reads it and the cursor stayed at 13 on every host. The copy now stays until it
    parses whole, and its cursor counts."""
    home = tmp_path / "home"
    a = make(tmp_path, "alpha")
    a.update_session("s5", lambda cur: SessionState("s5", conversation_id="c5", last_processed_index=12))
    view = home / "session-s5.json"
    upstream = json.loads(view.read_text())
    upstream["lastProcessedIndex"] = 14
    text = json.dumps(upstream, indent=2)
    copy = home / "session-s5.sync-conflict-20261201-100002-BBBBBBB.json"
    with open(view, "r+") as f:  # upstream: truncate, first part ...
        f.truncate(0)
        f.write(text[: len(text) // 2])
        f.flush()
        os.rename(view, copy)  # ... Syncthing moves it aside as a conflict copy and delivers the remote version
        view.write_text(json.dumps({"sessionId": "s5", "conversationId": "c5", "lastProcessedIndex": 12}, indent=2))
        a.update_session("s5", lambda cur: cur.evolve(last_processed_index=13))
        f.write(text[len(text) // 2:])  # ... upstream's write goes on into the copy and ends
        f.flush()
    b = make(tmp_path, "beta")
    assert b.session("s5").last_processed_index == 14
    a.update_session("s5", lambda cur: cur)  # the next write merges the finished copy and files it away
    assert not copy.exists() and a.session("s5").last_processed_index == 14
