"""Red team (R2): a hook's read goes through the listing cache, which keeps only a directory's unusual names
and takes every plain name as present (state/session_reading.py ``Listing(complete=False)``). A weak
copy name (iCloud's ``session-<id> 2.json``) counts as a copy only when its original is in the listing;
with the view gone (deleted on another machine, the deletion synced, the copy left), the hook's read took
the view as present and merged the lookalike, while ``status`` and every write — which list the directory —
do not: the hook saw a cursor nothing else of ours sees."""

from __future__ import annotations

import json
import os

from subconscious.state.records import SessionState
from subconscious.state.store.core import Store

SID = "00000001-1111-4222-8333-444444444444"


def test_a_hooks_read_agrees_with_a_full_read_on_a_weak_copy_whose_view_is_gone(tmp_path):
    home, local = tmp_path / "home", tmp_path / "local"
    writer = Store(home, "alpha", local / "locks", local / "clocks")
    writer.update_session(SID, lambda cur: SessionState(SID, conversation_id="conv-1", last_processed_index=7))
    view = home / f"session-{SID}.json"
    base = json.loads(view.read_text())
    wall = int(base["hlc"].split(":")[0])
    lookalike = dict(base, lastProcessedIndex=9, conversationId="conv-2", hlc=f"{wall + 5}:0", host="beta")
    (home / f"session-{SID} 2.json").write_text(json.dumps(lookalike))
    view.unlink()
    reader = Store(home, "alpha", local / "locks", local / "clocks", read_only=True)
    full = reader.session_files.read(SID, os.listdir(home))[0]
    assert {sid: s for sid, s, _ in reader.sessions()}[SID] == full  # status: the directory listed
    assert reader.session(SID) == full  # a hook's read, through the listing cache
    assert reader.session(SID) == full  # (and once the cache holds the listing)


def test_a_hooks_read_still_merges_a_weak_copy_beside_its_view(tmp_path):
    home, local = tmp_path / "home", tmp_path / "local"
    writer = Store(home, "alpha", local / "locks", local / "clocks")
    writer.update_session(SID, lambda cur: SessionState(SID, conversation_id="conv-1", last_processed_index=7))
    base = json.loads((home / f"session-{SID}.json").read_text())
    wall = int(base["hlc"].split(":")[0])
    copy = dict(base, lastProcessedIndex=9, conversationId="conv-2", hlc=f"{wall + 5}:0", host="beta")
    (home / f"session-{SID} 2.json").write_text(json.dumps(copy))
    reader = Store(home, "alpha", local / "locks", local / "clocks", read_only=True)
    full = reader.session_files.read(SID, os.listdir(home))[0]
    assert full.last_processed_index == 9
    assert reader.session(SID) == full
