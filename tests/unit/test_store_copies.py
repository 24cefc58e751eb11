"""Conflict copies left by every sync engine are merged into what the store reads and folded away
into backups/ by the next write, with nothing lost and the same result on every host."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from subconscious.state.copynames import Engine, make_copy_name
from subconscious.state.records import SessionState
from subconscious.state.store.core import Store

ENGINES = list(Engine)


def make(tmp: Path, host: str, home: Path) -> Store:
    return Store(home, host, tmp / f"local-{host}" / "locks", tmp / f"local-{host}" / "clocks")


def backups(home: Path) -> list[Path]:
    return sorted(p for p in (home / "backups").rglob("*") if p.is_file()) if (home / "backups").exists() else []


@pytest.mark.parametrize("engine", ENGINES, ids=[e.value for e in ENGINES])
def test_a_view_copy_from_every_engine_is_merged_and_folded(tmp_path, engine):
    home = tmp_path / "home"
    a, b = make(tmp_path, "alpha", home), make(tmp_path, "beta", tmp_path / "other")
    a.put_conversation("shared", "conv-a", "agent-1")
    b.put_conversation("only-b", "conv-b", "agent-1")  # written on another machine, its view arrives as a copy
    copy = home / make_copy_name(engine, "conversations.json", host="BETA-PC")
    shutil.copyfile(b.view_path, copy)
    snap = a.read()
    assert {"shared", "only-b"} <= set(snap.live) and [c.path for c in snap.copies] == [copy]
    a.put_conversation("next", "conv-n", "agent-1")  # any write folds
    assert not copy.exists()
    kept = backups(home)
    assert [p.name for p in kept] == [copy.name] and kept[0].read_bytes() == b.view_path.read_bytes()
    # the entry survives the copy's removal: it now lives in alpha's shard, not only in the view
    (home / "conversations.json").unlink()
    assert a.conversation("only-b").conversation_id == "conv-b"


@pytest.mark.parametrize("engine", ENGINES, ids=[e.value for e in ENGINES])
def test_a_session_copy_is_merged_cursor_first_and_folded(tmp_path, engine):
    home = tmp_path / "home"
    s = make(tmp_path, "alpha", home)
    s.update_session("abc-123", lambda cur: SessionState("abc-123", conversation_id="conv-1", last_processed_index=7))
    copy = home / make_copy_name(engine, "session-abc-123.json", host="BETA-PC")
    older = json.loads(s.session_path("abc-123").read_text())
    older.update(lastProcessedIndex=30, hlc="1:0", lastSeenMessageId="msg-9")  # further along, older clock
    copy.write_text(json.dumps(older))
    got = s.session("abc-123")
    assert got.last_processed_index == 30  # the cursor never moves back, whichever copy had it
    s.update_session("abc-123", lambda cur: cur.evolve(last_seen_message_id="msg-10"))
    assert not copy.exists() and [p.name for p in backups(home)] == [copy.name]
    got = s.session("abc-123")
    assert (got.last_processed_index, got.last_seen_message_id) == (30, "msg-10")


def test_a_shard_copy_is_merged_and_its_entries_adopted_before_folding(tmp_path):
    home = tmp_path / "home"
    a = make(tmp_path, "alpha", home)
    twin = make(tmp_path, "beta", tmp_path / "twin")  # two machines that share host id "beta" (a cloned VM)
    beta = make(tmp_path, "beta", home)
    beta.put_conversation("b1", "conv-b1", "agent-1")
    twin.put_conversation("b2", "conv-b2", "agent-1")
    copy = home / "hosts" / make_copy_name(Engine.SYNCTHING, "beta.json")
    shutil.copyfile(twin.shard_path(), copy)
    assert {"b1", "b2"} <= set(a.read().live)
    assert "beta.sync-conflict" not in " ".join(a.read().shards)  # a copy is not a host of its own
    a.put_conversation("a1", "conv-a1", "agent-1")
    assert not copy.exists() and a.conversation("b2").conversation_id == "conv-b2"
    assert "b2" in json.loads(a.shard_path().read_text())["conversations"]


def test_weak_names_count_only_when_the_content_is_ours(tmp_path):
    home = tmp_path / "home"
    s = make(tmp_path, "alpha", home)
    s.put_conversation("s1", "conv-1", "agent-1")
    lookalike = home / "conversations 2.json"  # iCloud-style name, but a user's unrelated file
    lookalike.write_text('{"totally": ["unrelated", 1]}')
    snap = s.read()
    assert snap.problems == [] and snap.copies == []
    s.put_conversation("s2", "conv-2", "agent-1")
    assert lookalike.exists() and not (home / "quarantine").exists()


def test_copies_fold_to_the_same_result_on_every_host(tmp_path):
    """Two replicas each receive the other's view as a copy (as Syncthing does on both sides)."""
    ha, hb = tmp_path / "a", tmp_path / "b"
    a, b = make(tmp_path, "alpha", ha), make(tmp_path, "beta", hb)
    for i in range(20):
        a.put_conversation(f"s{i}", f"conv-a{i}", "agent-1")
        if i % 2:
            b.put_conversation(f"s{i}", f"conv-b{i}", "agent-1")
        b.put_conversation(f"b{i}", f"conv-b{i}", "agent-1")
    b.delete_conversation("s3")
    shutil.copyfile(hb / "conversations.json", ha / make_copy_name(Engine.SYNCTHING, "conversations.json"))
    shutil.copyfile(ha / "conversations.json", hb / make_copy_name(Engine.DROPBOX, "conversations.json"))
    for side, other in ((ha, hb), (hb, ha)):  # shards travel as they are
        (side / "hosts").mkdir(exist_ok=True)
        for shard in (other / "hosts").glob("*.json"):
            shutil.copyfile(shard, side / "hosts" / shard.name)
    a.fold_all()
    b.fold_all()
    va, vb = (json.loads((h / "conversations.json").read_text()) for h in (ha, hb))
    assert va == vb and "s3" not in va and len(va) == 39
    assert not [p for p in ha.iterdir() if "conflict" in p.name] and not [p for p in hb.iterdir() if "conflict" in p.name]


def test_a_copy_that_changes_after_it_was_read_is_left_for_the_next_fold(tmp_path):
    home = tmp_path / "home"
    s = make(tmp_path, "alpha", home)
    s.put_conversation("s1", "c", "a")
    copy = home / make_copy_name(Engine.SYNCTHING, "conversations.json")
    copy.write_text(s.view_path.read_text())
    found = s._read().folds  # what a write read, and would file away once merged
    changed = s.view_path.read_text() + " "
    copy.write_text(changed)  # the engine rewrote it meanwhile
    assert s._fold(found) == [] and copy.read_text() == changed


def test_a_onedrive_copy_of_a_shard_is_a_copy_not_a_new_host(tmp_path):
    """OneDrive names a copy of hosts/beta.json "beta-LAPTOP.json" — also a valid host's shard name. The
    content decides: it says host "beta", so it is folded as beta's copy; a real host named
    "beta-LAPTOP" keeps its shard."""
    home = tmp_path / "home"
    a = make(tmp_path, "alpha", home)
    beta = make(tmp_path, "beta", home)
    twin = make(tmp_path, "beta", tmp_path / "twin")
    beta.put_conversation("b1", "conv-b1", "agent-1")
    twin.put_conversation("b2", "conv-b2", "agent-1")
    copy = home / "hosts" / make_copy_name(Engine.ONEDRIVE, "beta.json", host="LAPTOP")
    assert copy.name == "beta-LAPTOP.json"
    shutil.copyfile(twin.shard_path(), copy)
    real = make(tmp_path, "beta-LAPTOP2", home)  # a genuine host whose name only looks like a copy
    real.put_conversation("r1", "conv-r1", "agent-1")
    snap = a.read()
    assert "beta-LAPTOP" not in snap.shards and "beta-LAPTOP2" in snap.shards
    assert {"b1", "b2", "r1"} <= set(snap.live)
    a.put_conversation("a1", "conv-a1", "agent-1")
    assert not copy.exists() and real.shard_path().exists()
    assert a.conversation("b2").conversation_id == "conv-b2"
