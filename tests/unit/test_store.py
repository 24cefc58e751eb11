"""The store on a real file system (tmp dirs): what a user of one or several machines would notice."""

from __future__ import annotations

import json
import os
import random
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from subconscious.state.ids import InvalidIdentifier
from subconscious.state.locks import host_lock
from subconscious.state.records import SessionState
from subconscious.state.store.core import Store, StoreError

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "upstream-home" / ".letta" / "claude"


def make(tmp: Path, host: str = "alpha", home: Path | None = None, **kw) -> Store:
    return Store(home or tmp / "home", host, tmp / f"local-{host}" / "locks", tmp / f"local-{host}" / "clocks", **kw)


def view(store: Store) -> dict:
    return json.loads(store.view_path.read_text())


def test_put_overwrite_delete(tmp_path):
    s = make(tmp_path)
    s.put_conversation("s1", "conv-1", "agent-a")
    s.put_conversation("s2", "conv-2", "agent-a")
    s.put_conversation("s1", "conv-1b", "agent-b")
    assert (s.conversation("s1").conversation_id, s.conversation("s1").agent_id) == ("conv-1b", "agent-b")
    s.delete_conversation("s2")
    assert s.conversation("s2") is None
    assert set(view(s)) == {"s1"}
    assert view(s)["s1"]["conversationId"] == "conv-1b" and view(s)["s1"]["host"] == "alpha"


def test_files_are_private(tmp_path):
    s = make(tmp_path)
    s.put_conversation("s1", "conv-1", "agent-a")
    s.update_session("s1", lambda cur: SessionState("s1", conversation_id="conv-1"))
    for path in [s.view_path, s.shard_path(), s.session_path("s1")]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    for d in [s.home, s.home / "hosts", s.locks_dir]:
        assert stat.S_IMODE(d.stat().st_mode) == 0o700


def test_a_delete_never_resurrects_through_a_stale_copy(tmp_path):
    s = make(tmp_path)
    s.put_conversation("s1", "conv-1", "agent-a")
    stale = s.view_path.read_bytes()
    s.delete_conversation("s1")
    s.view_path.write_bytes(stale)  # a sync engine brings back yesterday's conversations.json
    assert s.conversation("s1") is None
    s.refresh()
    assert "s1" not in view(s)


def test_a_host_whose_clock_is_behind_still_wins_with_a_later_edit(tmp_path):
    home = tmp_path / "home"
    # 20 hours behind: within ALLOWED_SKEW_MS (beyond it a stamp counts as the oldest, see test_bounds.py)
    ahead = make(tmp_path, "ahead", home, now=lambda: 1_000_000_000_000 + 20 * 3_600_000)
    behind = make(tmp_path, "behind", home, now=lambda: 1_000_000_000_000)
    ahead.put_conversation("s1", "conv-old", "agent-a")
    behind.put_conversation("s1", "conv-new", "agent-a")  # it read ahead's entry first
    assert ahead.conversation("s1").conversation_id == "conv-new"


def test_reading_an_upstream_home_keeps_every_mapping_and_upgrades_on_write(tmp_path):
    home = tmp_path / "home"
    shutil.copytree(FIXTURE, home)
    before = json.loads((home / "conversations.json").read_text())
    s = make(tmp_path, home=home)
    snap = s.read()
    mapping = {k: c.conversation_id for k, c in snap.live.items()}
    expected = {k: (v if isinstance(v, str) else v["conversationId"]) for k, v in before.items()}
    assert mapping == expected and not snap.problems
    assert all(c.legacy for c in snap.live.values())
    # upstream's session files read as they are
    sess = s.session("9e8d7c6b-5a49-4382-9170-6f5e4d3c2b1a")
    assert sess.last_processed_index == 41 and sess.last_block_values["guidance"] == "Prefer small commits."

    s.put_conversation("new-session", "conv-new", "agent-x")  # the next write upgrades
    after = view(s)
    assert {k: after[k]["conversationId"] for k in expected} == expected
    for k, v in before.items():
        if isinstance(v, dict):
            assert after[k]["agentId"] == v["agentId"]
        assert "hlc" in after[k] and "host" in after[k]
    # the upgraded legacy entries are now kept in this host's shard too: a view replaced by an old
    # upstream copy that lacks them does not lose them
    (home / "conversations.json").write_text("{}\n")
    assert {k: c.conversation_id for k, c in s.read().live.items() if k in expected} == expected

    s.update_session("9e8d7c6b-5a49-4382-9170-6f5e4d3c2b1a", lambda cur: cur.evolve(last_processed_index=50))
    raw = json.loads(s.session_path("9e8d7c6b-5a49-4382-9170-6f5e4d3c2b1a").read_text())
    assert raw["lastProcessedIndex"] == 50 and raw["startedAt"] == "2026-11-02T09:14:03.221Z"
    assert raw["lastBlockValues"]["user_preferences"] == "Uses pytest; dislikes mocks." and raw["host"] == "alpha"


def test_an_unparseable_view_is_set_aside_and_rebuilt_from_the_shards(tmp_path):
    s = make(tmp_path)
    s.put_conversation("s1", "conv-1", "agent-a")
    garbage = b'{"s1": {"conversationId": "conv-1", '  # a torn write by some other tool
    s.view_path.write_bytes(garbage)
    snap = s.read()
    assert [p.kind for p in snap.problems] == ["unparseable"]
    kept = Path(snap.problems[0].kept_at)
    assert kept.read_bytes() == garbage and kept.parent.name == "quarantine"
    assert snap.live["s1"].conversation_id == "conv-1"
    s.put_conversation("s2", "conv-2", "agent-a")
    assert set(view(s)) == {"s1", "s2"}
    copies = [p for p in kept.parent.glob("conversations.json.unparseable.*") if not p.name.endswith(".about.json")]
    assert copies == [kept]  # set aside once per distinct content, however often it is read
    assert json.loads(kept.with_name(kept.name + ".about.json").read_text())["original"] == "conversations.json"


def test_git_conflict_markers_are_resolved_by_merging_both_sides(tmp_path):
    s = make(tmp_path)
    s.put_conversation("base", "conv-base", "agent-a")
    ours, theirs = dict(view(s)), dict(view(s))
    ours["mine"] = {"conversationId": "conv-mine", "agentId": "agent-a", "hlc": "5:0", "host": "h1"}
    theirs["yours"] = {"conversationId": "conv-yours", "agentId": "agent-a", "hlc": "6:0", "host": "h2"}
    text = (
        "{\n" + f'  "base": {json.dumps(ours["base"])},\n'
        "<<<<<<< HEAD\n" + f'  "mine": {json.dumps(ours["mine"])}\n'
        "=======\n" + f'  "yours": {json.dumps(theirs["yours"])}\n'
        ">>>>>>> origin/main\n}\n"
    )
    s.view_path.write_text(text)
    snap = s.read()
    assert {"base", "mine", "yours"} <= set(snap.live)
    assert [p.kind for p in snap.problems] == ["git-conflict"]
    s.refresh()
    assert {"base", "mine", "yours"} <= set(view(s)) and "<<<<<<<" not in s.view_path.read_text()


@pytest.mark.parametrize(
    "content, kind",
    [
        ("[1, 2, 3]\n", "wrong-type"),
        ('{"s1": 42}\n', "invalid-entry"),
        ('{"../../etc/passwd": "conv-x"}\n', "invalid-entry"),
        ('{"s1": {"conversationId": 7}}\n', "invalid-entry"),
    ],
)
def test_wrong_types_and_hostile_keys_are_reported_and_kept(tmp_path, content, kind):
    s = make(tmp_path)
    s.put_conversation("good", "conv-good", "agent-a")
    s.view_path.write_text(content)
    snap = s.read()
    assert [p.kind for p in snap.problems] == [kind]
    assert Path(snap.problems[0].kept_at).read_text() == content
    assert snap.live["good"].conversation_id == "conv-good"
    assert not (tmp_path / "etc").exists()


def test_a_corrupt_session_file_is_kept_aside_and_the_session_goes_on(tmp_path):
    s = make(tmp_path)
    path = s.session_path("s1")
    s.home.mkdir(parents=True)
    path.write_text("{not json")
    assert s.session("s1") is None
    state = s.update_session("s1", lambda cur: (cur or SessionState("s1")).evolve(last_processed_index=3))
    assert state.last_processed_index == 3
    kept = [p for p in (s.home / "quarantine").glob("session-s1.json.unparseable.*") if not p.name.endswith(".about.json")]
    assert len(kept) == 1 and kept[0].read_text() == "{not json"


def test_the_cursor_never_moves_backwards(tmp_path):
    s = make(tmp_path)
    s.update_session("s1", lambda cur: SessionState("s1", last_processed_index=10))
    s.update_session("s1", lambda cur: cur.evolve(last_processed_index=4, last_seen_message_id="m9"))
    got = s.session("s1")
    assert got.last_processed_index == 10 and got.last_seen_message_id == "m9"


def test_an_unchanged_session_is_not_rewritten(tmp_path):
    s = make(tmp_path)
    s.update_session("s1", lambda cur: SessionState("s1", conversation_id="c"))
    before = s.session_path("s1").read_bytes()
    os.utime(s.session_path("s1"), (1, 1))
    s.update_session("s1", lambda cur: cur.evolve())
    assert s.session_path("s1").read_bytes() == before and s.session_path("s1").stat().st_mtime == 1


@pytest.mark.parametrize("sid", ["../escape", "a/b", "..", "x\x00y", "s" * 300])
def test_hostile_session_ids_are_refused_before_any_file_is_touched(tmp_path, sid):
    s = make(tmp_path)
    for call in (lambda: s.session(sid), lambda: s.update_session(sid, lambda c: c),
                 lambda: s.put_conversation(sid, "c", "a"), lambda: s.delete_conversation(sid)):
        with pytest.raises(InvalidIdentifier):
            call()
    assert not (tmp_path / "escape").exists() and not s.home.exists()


def test_a_shard_from_a_newer_version_is_not_overwritten(tmp_path):
    s = make(tmp_path)
    s.put_conversation("s1", "c", "a")
    data = json.loads(s.shard_path().read_text())
    data["format"] = 99
    s.shard_path().write_text(json.dumps(data))
    with pytest.raises(StoreError, match="newer subconscious"):
        s.put_conversation("s2", "c", "a")
    assert json.loads(s.shard_path().read_text())["format"] == 99


def test_a_lock_held_too_long_is_reported_with_its_holder_not_broken(tmp_path):
    s = make(tmp_path, lock_timeout=0.3)
    with host_lock(s.locks_dir, "alpha"):
        # another process of the same host tries to write meanwhile
        code = (
            "import sys; from pathlib import Path; from subconscious.state.store.core import Store;"
            f"s=Store(Path({str(s.home)!r}),'alpha',Path({str(s.locks_dir)!r}),Path({str(s.clocks_dir)!r}),lock_timeout=0.3);"
            "\ntry:\n s.put_conversation('s1','c','a')\nexcept TimeoutError as e:\n print(e); sys.exit(3)"
        )
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 3
    assert f"pid {os.getpid()}" in proc.stdout and "'alpha'" in proc.stdout and "not breaking it" in proc.stdout
    assert s.conversation("s1") is None


def test_simulated_hosts_converge_whatever_order_their_copies_meet(tmp_path):
    """Each host writes its own replica; replicas exchange files in random orders, as sync engines
    would (shards copied as they are, the contested view won by a random side). Every host ends
    with the same entries and none is lost."""
    rnd = random.Random(7)
    hosts = ["alpha", "beta", "gamma", "delta"]
    replicas = {h: make(tmp_path, h, tmp_path / f"replica-{h}") for h in hosts}
    for step in range(120):
        h = rnd.choice(hosts)
        store = replicas[h]
        sid = f"s{rnd.randrange(40)}"
        if rnd.random() < 0.15 and store.conversation(sid) is not None:
            store.delete_conversation(sid)
        else:
            store.put_conversation(sid, f"conv-{h}-{step}", f"agent-{h}")
        if rnd.random() < 0.3:  # a partial sync between two random replicas
            a, b = rnd.sample(hosts, 2)
            sync_pair(replicas[a], replicas[b], rnd)
    for _ in range(2):  # full sync in a random order
        order = hosts[:]
        rnd.shuffle(order)
        for a, b in zip(order, order[1:] + order[:1]):
            sync_pair(replicas[a], replicas[b], rnd)
    results = []
    for h in hosts:
        replicas[h].refresh()
        snap = replicas[h].read()
        results.append({k: (c.conversation_id, c.stamp, c.host) for k, c in snap.live.items()})
    assert all(r == results[0] for r in results)
    # every replica's final answer is the newest write made anywhere for that session
    newest = {}
    for h in hosts:
        for path in (tmp_path / f"replica-{h}" / "hosts").glob(f"{h}.json"):
            for k, v in json.loads(path.read_text())["conversations"].items():
                if k not in newest or (tuple(map(int, v["hlc"].split(":"))), v["host"]) > newest[k][0]:
                    newest[k] = ((tuple(map(int, v["hlc"].split(":"))), v["host"]), v)
    live = {k: v["conversationId"] for k, (_, v) in newest.items() if not v.get("deleted")}
    assert {k: c for k, (c, _, _) in results[0].items()} == live


def sync_pair(a: Store, b: Store, rnd: random.Random) -> None:
    for src, dst in ((a, b), (b, a)):
        for shard in (src.home / "hosts").glob("*.json"):
            target = dst.home / "hosts" / shard.name
            if shard.stem != dst.host:  # a host's own shard only ever flows outwards
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(shard, target)
    winner, loser = (a, b) if rnd.random() < 0.5 else (b, a)
    if winner.view_path.exists():
        shutil.copyfile(winner.view_path, loser.view_path)


def test_a_host_that_lost_a_race_takes_the_winner_into_its_shard(tmp_path):
    home = tmp_path / "home"
    a = make(tmp_path, "alpha", home, now=lambda: 1_000_000)
    b = make(tmp_path, "beta", home, now=lambda: 2_000_000)
    a.put_conversation("s1", "conv-a", "agent-1")
    b.put_conversation("s1", "conv-b", "agent-1")  # later: wins
    assert json.loads(a.shard_path().read_text())["conversations"]["s1"]["conversationId"] == "conv-a"
    a.put_conversation("other", "conv-o", "agent-1")  # any later write by alpha
    shard_a = json.loads(a.shard_path().read_text())["conversations"]
    shard_b = json.loads(b.shard_path().read_text())["conversations"]
    assert shard_a["s1"] == shard_b["s1"] and shard_a["s1"]["conversationId"] == "conv-b"
