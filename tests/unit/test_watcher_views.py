"""``watch --rebuild-views``: a shard that arrives (a sync engine that keeps the views out, like rclone
bisync with the kit's filters) is written into this machine's views; nothing changed, nothing written."""

from __future__ import annotations

import json
import logging
import shutil

from subconscious.state.records import SessionState
from subconscious.state.store.core import Store
from subconscious.sync.watcher import Watcher, changed_views


def store(tmp_path, home, host):
    return Store(home, host, tmp_path / f"local-{host}" / "locks", tmp_path / f"local-{host}" / "clocks")


def test_an_arriving_shard_reaches_this_machines_views_and_nothing_else_is_written(tmp_path):
    here, there = tmp_path / "here", tmp_path / "there"
    mine, theirs = store(tmp_path, here, "h1"), store(tmp_path, there, "h2")
    mine.put_conversation("mine", "conv-mine", "a")
    theirs.put_conversation("theirs", "conv-theirs", "a")
    theirs.update_session("theirs", lambda cur: (cur or SessionState("theirs")).evolve(last_processed_index=41))
    w = Watcher(mine, logging.getLogger("test"), say=lambda line: None, rebuild_views=True)
    assert w.rebuild_views_if_needed() > 0  # the first look: every view checked
    assert w.rebuild_views_if_needed() == 0
    # the sync engine brings h2's shards, and no view
    shutil.copytree(there / "hosts", here / "hosts", dirs_exist_ok=True)
    assert "theirs" not in json.loads((here / "conversations.json").read_text())
    assert w.rebuild_views_if_needed() == 2  # conversations.json and session-theirs.json
    assert json.loads((here / "conversations.json").read_text())["theirs"]["conversationId"] == "conv-theirs"
    assert json.loads((here / "session-theirs.json").read_text())["lastProcessedIndex"] == 41
    before = {p: p.read_bytes() for p in here.rglob("*") if p.is_file()}
    stats = {p: p.stat().st_mtime_ns for p in before}
    for _ in range(3):  # our own writes wake it once more: nothing to do, nothing rewritten
        w.rebuild_views_if_needed()
    assert {p: p.read_bytes() for p in here.rglob("*") if p.is_file()} == before
    assert {p: p.stat().st_mtime_ns for p in before} == stats


def test_without_the_option_nothing_is_rebuilt(tmp_path):
    mine = store(tmp_path, tmp_path / "here", "h1")
    mine.put_conversation("mine", "conv-mine", "a")
    w = Watcher(mine, logging.getLogger("test"), say=lambda line: None)
    assert w.rebuild_views_if_needed() == 0


def test_which_views_a_changed_source_feeds():
    a = {"conversations.json": (1, 1, 1), "hosts/h1.json": (1, 1, 2), "hosts/h1/session-s1.json": (1, 1, 3),
         "session-s1.json": (1, 1, 4)}
    assert changed_views(a, a) == (False, [])
    assert changed_views(a, {**a, "hosts/h2.json": (1, 1, 5)}) == (True, [])
    assert changed_views(a, {**a, "hosts/h2/session-s2.json": (1, 1, 6)}) == (False, ["s2"])
    assert changed_views(a, {k: v for k, v in a.items() if k != "session-s1.json"}) == (False, ["s1"])
    assert changed_views(a, {**a, "conversations.json": (2, 1, 1)}) == (True, [])  # upstream wrote it: adopt
    assert changed_views(None, a) == (True, ["s1"])
