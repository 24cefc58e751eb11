"""Upstream's unstamped versions count once (issue 24, item 1).

Upstream's plugin writes ``conversations.json`` and ``session-<id>.json`` the way its TypeScript does: read
the whole file, change one key, write the whole file back in place (no lock, no rename). A map it read
before our write comes back with the old unstamped entries it held. Each test drives that exact pattern
against a real home on disk, interleaved with our puts and deletes, and looks at what every host reads and
at the bytes upstream reads back.
"""

from __future__ import annotations

import json
from pathlib import Path

from subconscious.state.records import SessionState
from subconscious.state.store.core import Store
from tests.harness.sizes import examples

DAY = 86_400_000


def make(tmp: Path, host: str, now=None, **kw) -> Store:
    if now is not None:
        kw["now"] = now
    return Store(tmp / "home", host, tmp / f"local-{host}" / "locks", tmp / f"local-{host}" / "clocks", **kw)


class Upstream:
    """Upstream's plugin on the same home: ``read`` the whole file now, ``write`` it later in place with one
    key changed (what its SessionStart and worker do)."""

    def __init__(self, path: Path):
        self.path = path
        self.map: dict | None = None

    def read(self) -> "Upstream":
        try:
            value = json.loads(self.path.read_text())
        except (OSError, ValueError):
            value = {}  # upstream: a parse failure is an empty map
        self.map = value if isinstance(value, dict) else {}
        return self

    def write(self, change) -> None:
        assert self.map is not None
        change(self.map)
        with open(self.path, "r+" if self.path.exists() else "w") as f:  # in place: truncate, write
            f.truncate(0)
            f.write(json.dumps(self.map, indent=2))

    def set(self, key: str, value) -> None:
        self.write(lambda m: m.__setitem__(key, value))


def legacy_home(tmp: Path, entries: dict) -> Path:
    home = tmp / "home"
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    (home / "conversations.json").write_text(json.dumps(entries, indent=2))
    return home / "conversations.json"


def conv(store: Store, sid: str) -> str | None:
    c = store.read().get(sid)
    return None if c is None else c.conversation_id


def upstream_reads(view: Path, sid: str) -> str | None:
    value = json.loads(view.read_text()).get(sid)
    return value if value is None or isinstance(value, str) else value.get("conversationId")


# ------------------------------------------------------------------------------ conversations.json


def test_upstreams_stale_rewrite_does_not_bring_a_legacy_entry_back_after_our_put(tmp_path):
    view = legacy_home(tmp_path, {"legacy": "conv-legacy", "kept": {"conversationId": "conv-kept", "agentId": "a"}})
    a, b = make(tmp_path, "alpha"), make(tmp_path, "beta")
    up = Upstream(view).read()  # upstream's SessionStart reads the whole map ...
    a.put_conversation("legacy", "conv-new", "agent-a")  # ... we move the legacy session meanwhile ...
    up.set("fresh", {"conversationId": "conv-fresh", "agentId": "agent-up"})  # ... upstream writes its map back
    for store in (a, b, a):
        assert conv(store, "legacy") == "conv-new"
        assert conv(store, "fresh") == "conv-fresh"  # upstream's own new write counts
        assert conv(store, "kept") == "conv-kept"
    b.put_conversation("other", "conv-o", "agent-b")
    assert upstream_reads(view, "legacy") == "conv-new"  # what upstream reads next
    assert upstream_reads(view, "fresh") == "conv-fresh"


def test_upstreams_stale_rewrite_does_not_bring_a_legacy_entry_back_after_our_delete(tmp_path):
    view = legacy_home(tmp_path, {"legacy": "conv-legacy", "kept": "conv-kept"})
    a, b = make(tmp_path, "alpha"), make(tmp_path, "beta")
    up = Upstream(view).read()
    a.delete_conversation("legacy")
    up.set("fresh", {"conversationId": "conv-fresh", "agentId": "agent-up"})
    for store in (a, b):
        assert conv(store, "legacy") is None
        assert conv(store, "fresh") == "conv-fresh"
        assert conv(store, "kept") == "conv-kept"
    b.refresh()
    a.refresh()
    assert "legacy" not in json.loads(view.read_text())
    assert conv(b, "legacy") is None


def test_stale_rewrites_of_two_upstream_sessions_one_after_the_other(tmp_path):
    """Two upstream SessionStarts, each reading before one of our writes and writing after it."""
    view = legacy_home(tmp_path, {"s1": "conv-1", "s2": "conv-2"})
    a = make(tmp_path, "alpha")
    first = Upstream(view).read()
    a.put_conversation("s1", "conv-1b", "agent-a")
    first.set("u1", "conv-u1")  # brings back the legacy s1 it read
    second = Upstream(view).read()  # reads that: the stale s1, the legacy s2, its own u1
    a.delete_conversation("s2")
    second.set("u2", {"conversationId": "conv-u2", "agentId": "agent-up"})
    assert (conv(a, "s1"), conv(a, "s2"), conv(a, "u1"), conv(a, "u2")) == ("conv-1b", None, "conv-u1", "conv-u2")


def test_upstreams_new_write_of_an_adopted_key_still_counts(tmp_path):
    view = legacy_home(tmp_path, {"legacy": "conv-legacy"})
    a, b = make(tmp_path, "alpha"), make(tmp_path, "beta")
    a.refresh()  # adopted (stamped into alpha's shard)
    Upstream(view).read().set("legacy", {"conversationId": "conv-up2", "agentId": "agent-up"})  # a fresh read: new bytes
    assert conv(a, "legacy") == conv(b, "legacy") == "conv-up2"
    b.refresh()
    Upstream(view).read().set("legacy", {"conversationId": "conv-up3", "agentId": "agent-up"})
    assert conv(a, "legacy") == "conv-up3"


def test_a_restored_pre_install_view_brings_nothing_back_after_the_tombstones_were_pruned(tmp_path):
    clock = [1_790_000_000_000]
    now = lambda: clock[0]  # noqa: E731
    view = legacy_home(tmp_path, {"gone": "conv-gone", "moved": "conv-old", "kept": "conv-kept"})
    pre_install = view.read_bytes()
    a = make(tmp_path, "alpha", now, retention_ms=DAY)
    a.refresh()
    a.delete_conversation("gone")
    a.put_conversation("moved", "conv-moved", "agent-a")
    clock[0] += 3 * DAY
    a.put_conversation("later", "conv-later", "agent-a")  # prunes the old tombstone
    shard = json.loads(a.shard_path().read_text())
    assert "gone" not in shard["conversations"]  # the tombstone is gone: only the record is left
    view.write_bytes(pre_install)  # a backup of the pre-install file restored in place
    b = make(tmp_path, "beta", now, retention_ms=DAY)
    for store in (a, b):
        assert conv(store, "gone") is None
        assert conv(store, "moved") == "conv-moved"
        assert conv(store, "kept") == "conv-kept"
        assert conv(store, "later") == "conv-later"
    b.refresh()
    assert upstream_reads(view, "gone") is None and upstream_reads(view, "moved") == "conv-moved"


def test_the_adoption_record_is_small_and_in_the_adopting_hosts_shard(tmp_path):
    legacy_home(tmp_path, {f"s{i}": f"conv-{i}" for i in range(50)})
    a = make(tmp_path, "alpha")
    a.refresh()
    record = json.loads(a.shard_path().read_text())["adopted"]
    assert set(record) == {f"s{i}" for i in range(50)}
    assert all(len(v) == 1 and len(v[0]) == 16 for v in record.values())
    a.put_conversation("s1", "conv-x", "agent-a")
    assert json.loads(a.shard_path().read_text())["adopted"] == record  # a put of ours records nothing


def test_a_rewrite_keeping_our_fields_counts_once_too(tmp_path):
    """Upstream's object spread keeps the fields it found (our hlc and host) and changes conversationId."""
    legacy_home(tmp_path, {})
    a, b = make(tmp_path, "alpha"), make(tmp_path, "beta")
    a.put_conversation("s1", "conv-a", "agent-a")
    view = a.view_path
    Upstream(view).read().write(lambda m: m["s1"].update(conversationId="conv-up"))
    assert conv(b, "s1") == "conv-up"
    stale = Upstream(view).read()  # upstream's next read-change-write starts here ...
    b.refresh()  # ... beta adopts upstream's edit ...
    b.put_conversation("s1", "conv-b", "agent-b")  # ... and moves the session on
    stale.set("other", "conv-other")  # the stale map still holds upstream's edit with alpha's old stamp
    assert conv(a, "s1") == conv(b, "s1") == "conv-b"


# ------------------------------------------------------------------------------ session-<id>.json


def test_upstreams_stale_session_write_keeps_our_fields_and_its_cursor(tmp_path):
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    path = home / "session-s1.json"
    path.write_text(json.dumps({"sessionId": "s1", "conversationId": "conv-old", "lastProcessedIndex": 3,
                                "startedAt": "2026-11-01T10:00:00.000Z", "lastBlockValues": None,
                                "lastSeenMessageId": None}, indent=2))
    a, b = make(tmp_path, "alpha"), make(tmp_path, "beta")
    worker = Upstream(path).read()  # upstream's worker reads the session ...
    a.update_session("s1", lambda cur: cur.evolve(conversation_id="conv-new"))  # ... our SessionStart moves it on
    worker.set("lastProcessedIndex", 7)  # ... the worker writes its stale map back with its cursor
    for store in (a, b):
        s = store.session("s1")
        assert (s.conversation_id, s.last_processed_index) == ("conv-new", 7)
    b.update_session("s1", lambda cur: cur.evolve(last_processed_index=8))
    on_disk = json.loads(path.read_text())
    assert (on_disk["conversationId"], on_disk["lastProcessedIndex"]) == ("conv-new", 8)
    assert a.session("s1").conversation_id == "conv-new"


def test_upstreams_new_session_write_still_counts(tmp_path):
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    path = home / "session-s1.json"
    path.write_text(json.dumps({"sessionId": "s1", "conversationId": "conv-old", "lastProcessedIndex": 3}))
    a = make(tmp_path, "alpha")
    a.update_session("s1", lambda cur: cur.evolve(last_processed_index=4))  # adopted
    Upstream(path).read().write(lambda m: m.update(conversationId="conv-up", lastProcessedIndex=9))
    s = a.session("s1")
    assert (s.conversation_id, s.last_processed_index) == ("conv-up", 9)


# ------------------------------------------------------------------------------ the merge driver agrees

import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from subconscious.state.conflicts.filemerge import merge_bytes, render  # noqa: E402
import hashlib  # noqa: E402

KEYS = ("s1", "s2", "s3")


def _stamped(conv_id: str, host: str, wall: int) -> dict:
    return {"agentId": "agent", "conversationId": conv_id, "hlc": f"{wall}:0", "host": host}


def _digest(unstamped) -> str:
    """The record's digest: sha256 of the version's content (no hlc/host) as canonical JSON, 16 hex."""
    content = {"conversationId": unstamped} if isinstance(unstamped, str) else unstamped
    return hashlib.sha256(json.dumps(content, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


@st.composite
def histories(draw):
    """One home's history of a key on two clones: the ancestor's version, what ours and theirs made of it,
    and the adoption records (a writer that replaced an unstamped version adopted it first)."""
    base, ours, theirs, shards, records = {}, {}, {}, {"h1": {}, "h2": {}}, {"h1": {}, "h2": {}}
    for key in KEYS:
        b = draw(st.sampled_from(["absent", "legacy", "legacy-object", "stamped"]))
        bv = {"absent": None, "legacy": f"conv-legacy-{key}",
              "legacy-object": {"conversationId": f"conv-lo-{key}", "agentId": "agent-up"},
              "stamped": _stamped(f"conv-0-{key}", "h1", 10)}[b]
        o = draw(st.sampled_from(["same", "put"]))
        t = draw(st.sampled_from(["same", "as-ours", "upstream-new", "other-host", "stale-restore"]))
        ov = bv if o == "same" else _stamped(f"conv-a-{key}", "h1", 20)
        if o == "put" and bv is not None and b != "stamped":
            records["h1"].setdefault(key, []).append(_digest(bv))
        tv = {"same": bv, "as-ours": ov, "upstream-new": {"conversationId": f"conv-u-{key}", "agentId": "agent-up"},
              "other-host": _stamped(f"conv-b-{key}", "h2", draw(st.sampled_from([15, 30]))),
              "stale-restore": bv}[t]
        if t == "other-host" and bv is not None and b != "stamped":
            records["h2"].setdefault(key, []).append(_digest(bv))
        if t == "stale-restore" and b != "stamped" and bv is not None and o == "same":
            # an old pre-install file restored over a version adopted and rewritten since
            records["h2"].setdefault(key, []).append(_digest(bv))
            ov = _stamped(f"conv-r-{key}", "h2", 25)
        for m, v in ((base, bv), (ours, ov), (theirs, tv)):
            if v is not None:
                m[key] = v
        for v in (bv, ov, tv):  # every stamped version lives in its writer's shard (the newest it wrote)
            if isinstance(v, dict) and "hlc" in v:
                have = shards[v["host"]].get(key)
                if have is None or have["hlc"] < v["hlc"]:
                    shards[v["host"]][key] = v
    return base, ours, theirs, shards, records


def _store_reads(shards: dict, records: dict, view: dict) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        (home / "hosts").mkdir(parents=True, mode=0o700)
        for host, convs in shards.items():
            shard = {"format": 1, "host": host, "name": host, "clock": "40:0", "written": 40,
                     "conversations": convs, "settings": {}}
            if records[host]:
                shard["adopted"] = records[host]
            (home / "hosts" / f"{host}.json").write_text(json.dumps(shard))
        (home / "conversations.json").write_text(json.dumps(view, indent=2))
        store = Store(home, "reader", Path(tmp) / "l" / "locks", Path(tmp) / "l" / "clocks", read_only=True)
        return {k: c.conversation_id for k, c in store.read().live.items()}


def _ids(view: dict) -> dict:
    return {k: v if isinstance(v, str) else v["conversationId"] for k, v in view.items()}


@given(histories())
@settings(max_examples=examples(300), deadline=None)
def test_the_merge_driver_and_the_store_pick_the_same_winner(history):
    base, ours, theirs, shards, records = history
    adopted: dict = {}
    for r in records.values():
        for k, d in r.items():
            adopted[k] = adopted.get(k, frozenset()) | frozenset(d)
    result = merge_bytes(render("view", base).encode(), render("view", ours).encode(), render("view", theirs).encode(),
                         ".letta/claude/conversations.json", adopted)
    merged = json.loads(result.text)
    # the store reading the driver's result beside the shards reads what the driver chose
    assert _store_reads(shards, records, merged) == _ids(merged)
    # where one side did not touch the view, the store of the side that did reads the driver's result
    if ours == base:
        assert _store_reads(shards, records, theirs) == _ids(merged)
    if theirs == base:
        assert _store_reads(shards, records, ours) == _ids(merged)


def test_the_merge_driver_keeps_upstreams_rewrite_as_the_store_reads_it(tmp_path):
    """The finding: ancestor and ours ``cA`` (ours), theirs upstream's unstamped ``cU``. Through the real
    command, as git runs it (worktree root, %P relative), with the hosts' shards in the worktree."""
    home = tmp_path / ".letta" / "claude"
    home.mkdir(parents=True)
    store = Store(home, "alpha", tmp_path / "l" / "locks", tmp_path / "l" / "clocks")
    store.put_conversation("s1", "cA", "agent-a")
    store.put_conversation("s2", "c2", "agent-a")
    ca = store.view_path.read_bytes()
    (tmp_path / "O").write_bytes(ca)
    (tmp_path / "A").write_bytes(ca)
    cu = json.loads(ca)
    cu["s1"] = {"conversationId": "cU", "agentId": "agent-up"}
    (tmp_path / "B").write_text(json.dumps(cu, indent=2))
    store.view_path.write_text(json.dumps(cu, indent=2))
    assert conv(store, "s1") == "cU"  # what the store reads
    got = subprocess.run([sys.executable, "-m", "subconscious", "merge-driver", "O", "A", "B",
                          ".letta/claude/conversations.json"], cwd=tmp_path, capture_output=True, text=True,
                         env=dict(os.environ))
    assert got.returncode == 0, got.stderr
    assert json.loads((tmp_path / "A").read_text())["s1"]["conversationId"] == "cU"


def test_the_merge_driver_counts_an_adopted_legacy_version_once(tmp_path):
    """theirs is a clone where upstream wrote its stale map back (the legacy ``conv-legacy``); ours moved
    the session on after adopting it: the driver reads the record in the worktree's shards."""
    home = tmp_path / ".letta" / "claude"
    home.mkdir(parents=True)
    legacy = json.dumps({"s1": "conv-legacy", "s2": "conv-2"}, indent=2)
    (home / "conversations.json").write_text(legacy)
    store = Store(home, "alpha", tmp_path / "l" / "locks", tmp_path / "l" / "clocks")
    store.refresh()
    adopted_view = store.view_path.read_bytes()
    store.put_conversation("s1", "conv-new", "agent-a")
    (tmp_path / "O").write_bytes(adopted_view)
    (tmp_path / "A").write_bytes(store.view_path.read_bytes())
    (tmp_path / "B").write_text(json.dumps({"s1": "conv-legacy", "s2": "conv-2", "s3": "conv-3"}, indent=2))
    got = subprocess.run([sys.executable, "-m", "subconscious", "merge-driver", "O", "A", "B",
                          ".letta/claude/conversations.json"], cwd=tmp_path, capture_output=True, text=True)
    assert got.returncode == 0, got.stderr
    merged = _ids(json.loads((tmp_path / "A").read_text()))
    assert merged == {"s1": "conv-new", "s2": "conv-2", "s3": "conv-3"}
    store.view_path.write_text(json.dumps({"s1": "conv-legacy", "s2": "conv-2", "s3": "conv-3"}, indent=2))
    assert {k: c.conversation_id for k, c in store.read().live.items()} == merged


def test_a_hostile_adoption_record_is_bounded_and_cannot_crash_a_read(tmp_path):
    """A conflict copy of a shard with a record of junk: wrong types, names that are no session id, a
    key with 5,000 digests. Reads and writes go on; what is carried into this host's shard is well formed
    and bounded (16 digests a key); upstream's new write of another key still counts."""
    view = legacy_home(tmp_path, {"s1": "conv-1"})
    a = make(tmp_path, "alpha")
    a.refresh()
    hosts = tmp_path / "home" / "hosts"
    junk = {"s1": [f"{i:016x}" for i in range(5000)], "../x": ["0" * 16], "s2": "nope", "s3": [1, None, {}],
            "s4": ["ZZZZZZZZZZZZZZZZ", "0123456789abcdef"]}
    copy = {"format": 1, "host": "beta", "name": "beta", "clock": "1:0", "written": 1, "conversations": {},
            "settings": {}, "adopted": junk}
    (hosts / "beta.sync-conflict-20261201-100000-ABCDEFG.json").write_text(json.dumps(copy))
    (hosts / "gamma.json").write_text(json.dumps({**copy, "host": "gamma", "adopted": ["not", "a", "map"]}))
    Upstream(view).read().set("s5", {"conversationId": "conv-5", "agentId": "agent-up"})
    assert conv(a, "s1") == "conv-1" and conv(a, "s5") == "conv-5"
    a.put_conversation("s6", "conv-6", "agent-a")
    record = json.loads(a.shard_path().read_text())["adopted"]
    assert set(record) <= {"s1", "s4", "s5"} and all(len(v) <= 16 for v in record.values())
    assert record["s4"] == ["0123456789abcdef"]
    assert conv(a, "s5") == "conv-5"


def test_the_merge_driver_joins_two_versions_of_a_shards_adoption_record():
    def shard(clock, adopted):
        return json.dumps({"format": 1, "host": "alpha", "name": "alpha", "clock": clock, "written": 1,
                           "conversations": {}, "settings": {}, "adopted": adopted}).encode()

    d1, d2, d3 = "0" * 16, "1" * 16, "2" * 16
    base = shard("1:0", {"s1": [d1]})
    result = merge_bytes(base, shard("2:0", {"s1": [d1, d2]}), shard("3:0", {"s1": [d1], "s2": [d3]}),
                         ".letta/claude/hosts/alpha.json")
    assert json.loads(result.text)["adopted"] == {"s1": [d1, d2], "s2": [d3]}
