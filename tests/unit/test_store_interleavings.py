"""Issue 9's findings, each replayed at the exact moment it hurt: another host, a sync engine or
upstream's plugin acting *inside* one of our operations (through the store's file-system seam), on a
real file system. The exhaustive exploration of such moments lives in tests/simulation."""

from __future__ import annotations

import json
import os
from pathlib import Path

from subconscious.state.fs import RealFS
from subconscious.state.records import SessionState
from subconscious.state.store.core import DAY_MS, Store

DAY = DAY_MS


class HookFS(RealFS):
    """The real file system, with a callback run once just before a chosen operation on a chosen name."""

    def __init__(self):
        super().__init__()
        self.hooks: list[tuple[str, str, object]] = []

    def before(self, op: str, name: str, fn) -> None:
        self.hooks.append((op, name, fn))

    def _fire(self, op: str, path: Path) -> None:
        for i, (o, n, fn) in enumerate(self.hooks):
            if o == op and path.name == n:
                del self.hooks[i]
                fn()
                return

    def exchange(self, a, b):
        self._fire("exchange", b)
        return super().exchange(a, b)

    def link(self, src, dst):
        self._fire("link", dst)
        return super().link(src, dst)

    def replace(self, src, dst, **kw):
        self._fire("replace", dst)
        return super().replace(src, dst, **kw)


def make(tmp: Path, host: str, fs=None, home: Path | None = None, **kw) -> Store:
    extra = {"fs": fs} if fs is not None else {}
    return Store(home or tmp / "home", host, tmp / f"local-{host}" / "locks", tmp / f"local-{host}" / "clocks",
                 **extra, **kw)


def upstream_write(path: Path, change) -> None:
    """Upstream's pattern: read the whole file, change one key, write it back in place (no temp, no
    rename: Node's fs.writeFileSync)."""
    try:
        data = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        data = {}
    change(data)
    with open(path, "w") as f:  # O_TRUNC on the inode that is there now
        f.write(json.dumps(data, indent=2))


def cursor_of(store: Store, sid: str) -> int:
    state = store.session(sid)
    return -1 if state is None else state.last_processed_index


def test_a_cursor_written_by_another_host_inside_our_write_never_moves_back(tmp_path):
    fs = HookFS()
    a = make(tmp_path, "alpha", fs)
    b = make(tmp_path, "beta", home=a.home)
    a.update_session("s1", lambda cur: SessionState("s1", conversation_id="c", last_processed_index=23))
    seen = []
    # alpha has read cursor 23 and is about to publish 24; beta publishes 25 right then
    fs.before("exchange", "session-s1.json",
              lambda: seen.append(b.update_session("s1", lambda cur: cur.evolve(last_processed_index=25))))
    a.update_session("s1", lambda cur: cur.evolve(last_processed_index=24))
    assert seen and seen[0].last_processed_index == 25
    for reader in (a, b, make(tmp_path, "gamma", home=a.home)):
        assert cursor_of(reader, "s1") == 25
    assert json.loads(a.session_path("s1").read_text())["lastProcessedIndex"] == 25  # the view too
    assert not [n for n in os.listdir(a.home) if n.startswith(".subconscious-tmp-") and "displaced" not in n]


def test_a_newer_session_file_renamed_in_by_a_sync_engine_inside_our_write_is_merged(tmp_path):
    fs = HookFS()
    a = make(tmp_path, "alpha", fs)
    a.update_session("s1", lambda cur: SessionState("s1", conversation_id="c", last_processed_index=3))
    remote = json.loads(a.session_path("s1").read_text())
    # a newer version (an hour ahead: a far-future stamp would count as the oldest, see test_bounds.py)
    remote.update(lastProcessedIndex=40, hlc=f"{a.now() + 3_600_000}:0", host="remote", lastSeenMessageId="m-remote")

    def deliver():  # Syncthing: temp file, then rename over the target
        tmp = a.home / ".syncthing.session-s1.json.tmp"
        tmp.write_text(json.dumps(remote))
        os.replace(tmp, a.session_path("s1"))

    fs.before("exchange", "session-s1.json", deliver)
    a.update_session("s1", lambda cur: cur.evolve(last_processed_index=4))
    state = a.session("s1")
    assert state.last_processed_index == 40 and state.last_seen_message_id == "m-remote"
    assert json.loads(a.session_path("s1").read_text())["lastProcessedIndex"] == 40


def test_upstreams_new_entry_written_inside_our_write_is_never_dropped(tmp_path):
    fs = HookFS()
    a = make(tmp_path, "alpha", fs)
    a.put_conversation("ours-1", "conv-o1", "agent-a")
    fs.before("exchange", "conversations.json", lambda: upstream_write(
        a.view_path, lambda d: d.__setitem__("theirs-1", {"conversationId": "conv-t1", "agentId": "agent-a"})))
    a.put_conversation("ours-2", "conv-o2", "agent-a")
    for reader in (a, make(tmp_path, "beta", home=a.home)):
        snap = reader.read()
        assert {k for k, v in snap.raw.items() if not v.get("deleted")} == {"ours-1", "ours-2", "theirs-1"}
    a.refresh()
    assert set(json.loads(a.view_path.read_text())) == {"ours-1", "ours-2", "theirs-1"}
    # adopted: it lives in a shard now, stamped, so a view rewritten without it cannot lose it
    shard = json.loads(a.shard_path().read_text())["conversations"]
    assert shard["theirs-1"]["conversationId"] == "conv-t1" and shard["theirs-1"]["hlc"] != "0:0"


def test_upstream_truncating_the_view_while_we_swap_it_loses_nothing(tmp_path):
    """Upstream opened (and truncated) the view just before our swap and writes after it: its bytes go
    into the file we displaced, which is kept and merged by the next operation."""
    fs = HookFS()
    a = make(tmp_path, "alpha", fs)
    a.put_conversation("ours-1", "conv-o1", "agent-a")
    held = {}

    def upstream_opens():
        data = json.loads(a.view_path.read_text())
        data["theirs-1"] = {"conversationId": "conv-t1", "agentId": "agent-a"}
        held["f"] = open(a.view_path, "w")  # truncated now; written after our swap
        held["data"] = data

    fs.before("exchange", "conversations.json", upstream_opens)
    a.put_conversation("ours-2", "conv-o2", "agent-a")
    held["f"].write(json.dumps(held["data"]))
    held["f"].close()
    assert a.conversation("theirs-1") is not None
    a.put_conversation("ours-3", "conv-o3", "agent-a")
    assert {"ours-1", "ours-2", "ours-3", "theirs-1"} <= set(json.loads(a.view_path.read_text()))


def test_our_entries_come_back_after_upstream_rewrites_the_view_without_them(tmp_path):
    a = make(tmp_path, "alpha")
    a.put_conversation("ours-1", "conv-o1", "agent-a")
    a.view_path.write_text(json.dumps({"theirs-1": {"conversationId": "conv-t1", "agentId": "agent-a"}}))
    assert a.conversation("ours-1").conversation_id == "conv-o1"  # readers never lost it
    a.put_conversation("ours-2", "conv-o2", "agent-a")
    assert set(json.loads(a.view_path.read_text())) == {"ours-1", "ours-2", "theirs-1"}


def test_upstreams_rewrite_of_an_adopted_legacy_entry_wins(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "conversations.json").write_text(json.dumps({"s1": "conv-legacy"}))  # upstream's legacy form
    a = make(tmp_path, "alpha", home=home)
    a.refresh()  # adopts it
    assert a.conversation("s1").conversation_id == "conv-legacy"
    # upstream re-creates the conversation for an entry without agentId: read all, change one key, write
    upstream_write(a.view_path, lambda d: d.__setitem__("s1", {"conversationId": "conv-new", "agentId": "agent-u"}))
    for reader in (a, make(tmp_path, "beta", home=home)):
        assert reader.conversation("s1").conversation_id == "conv-new"
    a.refresh()
    a.put_conversation("other", "conv-x", "agent-a")
    assert a.conversation("s1").conversation_id == "conv-new"
    assert json.loads(a.view_path.read_text())["s1"]["conversationId"] == "conv-new"
    # and it loses to a later write of anyone
    a.put_conversation("s1", "conv-ours-later", "agent-a")
    assert a.conversation("s1").conversation_id == "conv-ours-later"


def test_upstreams_in_place_edit_of_our_stamped_entry_wins_over_it(tmp_path):
    a = make(tmp_path, "alpha")
    a.put_conversation("s1", "conv-1", "agent-a")
    # upstream keeps the fields it does not know (hlc, host) and changes the conversation
    upstream_write(a.view_path, lambda d: d["s1"].update(conversationId="conv-0", agentId="agent-0"))  # sorts below ours
    assert a.conversation("s1").conversation_id == "conv-0"
    a.refresh()
    assert make(tmp_path, "beta", home=a.home).conversation("s1").conversation_id == "conv-0"


def test_upstreams_session_rewrite_wins_and_the_cursor_still_only_grows(tmp_path):
    a = make(tmp_path, "alpha")
    a.update_session("s1", lambda cur: SessionState("s1", conversation_id="c", last_processed_index=10,
                                                    last_seen_message_id="m1"))
    upstream_write(a.session_path("s1"), lambda d: d.update(lastSeenMessageId="m2", lastProcessedIndex=7))
    state = a.session("s1")
    assert state.last_seen_message_id == "m2" and state.last_processed_index == 10


def _age(store: Store, days: int):
    base = store.now()
    store.now = lambda: base + days * DAY


def test_a_tombstone_outlives_retention_while_a_stale_shard_holds_the_entry(tmp_path):
    home = tmp_path / "home"
    old = make(tmp_path, "retired", home=home)
    old.put_conversation("s1", "conv-1", "agent-a")  # a machine that never writes again
    a = make(tmp_path, "alpha", home=home)
    a.delete_conversation("s1")
    _age(a, 91)
    a.refresh()
    a.refresh()
    assert a.conversation("s1") is None
    assert a.read().raw["s1"]["deleted"] is True  # kept: the retired shard has not passed it


def test_after_pruning_an_old_copy_or_backup_cannot_resurrect(tmp_path):
    home = tmp_path / "home"
    a = make(tmp_path, "alpha", home=home)
    a.put_conversation("s1", "conv-1", "agent-a")
    a.put_conversation("keep", "conv-k", "agent-a")
    stale_view = a.view_path.read_bytes()
    stale_shard = a.shard_path().read_bytes()
    a.delete_conversation("s1")
    _age(a, 91)
    a.refresh()
    assert "s1" not in a.read().raw  # pruned: every shard had passed it and none holds it live
    (home / "conversations.sync-conflict-20260101-101010-ABCDEFG.json").write_bytes(stale_view)
    (home / "hosts" / "alpha.sync-conflict-20260101-101010-ABCDEFG.json").write_bytes(stale_shard)
    (home / "hosts" / "restored.json").write_bytes(stale_shard.replace(b'"alpha"', b'"restored"'))
    beta = make(tmp_path, "beta", home=home)
    _age(beta, 91)  # read on the same day as alpha's prune (a floor newer than now - retention is no floor)
    for reader in (a, beta):
        assert reader.conversation("s1") is None
        assert reader.conversation("keep").conversation_id == "conv-k"
    a.fold_all()
    assert a.conversation("s1") is None and a.conversation("keep") is not None


def test_a_copy_rewritten_between_read_and_fold_is_not_filed_away_unmerged(tmp_path):
    fs = HookFS()
    a = make(tmp_path, "alpha", fs)
    a.put_conversation("s1", "conv-1", "agent-a")
    copy = a.home / "conversations.sync-conflict-20261201-101010-ABCDEFG.json"
    copy.write_text(json.dumps({"s2": {"conversationId": "conv-2", "agentId": "a", "hlc": "1:0", "host": "x"}}))

    def rewrite():  # the engine delivers a newer version of the copy after we read it
        copy.write_text(json.dumps({"s3": {"conversationId": "conv-3", "agentId": "a", "hlc": "2:0", "host": "x"}}))

    fs.before("exchange", "conversations.json", rewrite)
    a.refresh()
    a.refresh()
    assert a.conversation("s2") is not None and a.conversation("s3") is not None


def test_retiring_a_gone_hosts_shard_keeps_its_entries_and_lets_the_tombstone_go(tmp_path):
    home = tmp_path / "home"
    old = make(tmp_path, "retired", home=home)
    old.put_conversation("s1", "conv-1", "agent-a")
    old.put_conversation("kept", "conv-kept", "agent-a")
    old.update_session("kept", lambda cur: SessionState("kept", conversation_id="conv-kept", last_processed_index=7))
    a = make(tmp_path, "alpha", home=home)
    a.delete_conversation("s1")
    _age(a, 91)
    moved = a.retire_host("retired")
    assert not (home / "hosts" / "retired.json").exists() and moved
    assert all(p.is_relative_to(home / "backups") for p in moved)
    assert a.conversation("kept").conversation_id == "conv-kept"  # adopted, not lost
    assert a.session("kept").last_processed_index == 7
    a.refresh()
    assert "s1" not in a.read().raw  # the only shard that could hold it live is gone: pruned
    backup = next(p for p in moved if p.name.endswith("retired.json"))
    (home / "hosts" / "retired.json").write_bytes(backup.read_bytes())  # the old shard comes back
    assert a.conversation("s1") is None and a.conversation("kept") is not None


def test_the_prune_floor_only_rises_when_two_hosts_prune_at_once(tmp_path):
    home = tmp_path / "home"
    a, b = make(tmp_path, "alpha", home=home), make(tmp_path, "beta", home=home)
    a.put_conversation("k1", "conv-1", "agent-a")
    stale = a.view_path.read_bytes()
    b.put_conversation("k2", "conv-2", "agent-a")
    b.delete_conversation("k2")
    a.delete_conversation("k1")  # k1's tombstone is the newer one
    b.refresh()
    _age(a, 91)
    _age(b, 91)
    a.refresh()  # prunes k1 (and k2): floor at k1's tombstone
    b_shard = (home / "hosts" / "beta.json").read_bytes()
    b.refresh()
    # beta's shard from before it saw the higher floor comes back (a sync engine's older version),
    # carrying a lower floor setting with a newer stamp than alpha's
    doc = json.loads(b_shard)
    doc["settings"]["tombstone-floor"] = {"value": "1:0", "hlc": "9999999999999:0", "host": "beta"}
    (home / "hosts" / "beta.json").write_text(json.dumps(doc))
    (home / "conversations.sync-conflict-20260101-101010-ABCDEFG.json").write_bytes(stale)
    assert a.conversation("k1") is None and b.conversation("k1") is None
