"""Red team, issue 24 round 2, item 5: a lease file (``.subconscious-tmp-lock-<name>``) kept fresh by a toucher
made every put wait 10 s for it (a hook's whole budget), then publish the view without it. Now a write waits
at most LEASE_WAIT_S for a lease another holder keeps, then writes this host's files only: acknowledged
(every read has it), and the view is left alone (never published without the lease, so it cannot go back)
until a write that gets the lease publishes it. Deterministic: the file system's clock is virtual and the
toucher keeps the lease's mtime at "now"; the time a write waited is what it asked the clock to wait."""

from __future__ import annotations

import json
from pathlib import Path

from subconscious.state.fs import RealFS
from subconscious.state.records import SessionState
from subconscious.state.store.core import Store
from subconscious.state.viewlock import LEASE_WAIT_S, lock_path


class TouchedLeases(RealFS):
    """The real file system with a virtual clock; every lease file is touched as soon as anyone looks."""

    def __init__(self) -> None:
        super().__init__()
        self.t = {"clock": 1_000_000.0, "waited": 0.0}  # shared with the confined clone the store makes

    @property
    def waited(self) -> float:
        return self.t["waited"]

    def now(self) -> float:
        return self.t["clock"]

    def mtime(self, path: Path) -> float | None:
        got = super().mtime(path)
        return self.t["clock"] if got is not None and path.name.startswith(".subconscious-tmp-lock-") else got

    def wait_gone(self, path: Path, seconds: float) -> None:
        self.t["clock"] += seconds
        self.t["waited"] += seconds


def test_a_lease_kept_fresh_costs_a_write_at_most_its_budget_and_the_view_never_goes_back(tmp_path):
    home = tmp_path / "home"
    fs = TouchedLeases()
    store = Store(home, "h1", tmp_path / "l" / "locks", tmp_path / "l" / "clocks", fs=fs)
    store.put_conversation("s1", "c1", "a")
    store.update_session("s1", lambda cur: SessionState("s1", conversation_id="c1", last_processed_index=4))
    view_before = store.view_path.read_bytes()
    for view in (store.view_path, store.session_path("s1")):
        lock_path(view).write_bytes(b"evil 1 toucher\n")  # another host's lease, kept fresh
    store.put_conversation("s2", "c2", "a")
    store.update_session("s1", lambda cur: cur.evolve(last_processed_index=9))
    assert fs.waited <= 2 * LEASE_WAIT_S, fs.waited  # two writes, each at most its budget (it was 10 s each)
    other = Store(home, "h2", tmp_path / "l2" / "locks", tmp_path / "l2" / "clocks")
    assert other.conversation("s2").conversation_id == "c2"  # acknowledged: in h1's shard
    assert other.session("s1").last_processed_index == 9
    assert store.view_path.read_bytes() == view_before  # left alone, not published without the lease
    assert json.loads(store.session_path("s1").read_text())["lastProcessedIndex"] == 4
    for view in (store.view_path, store.session_path("s1")):
        lock_path(view).unlink()  # the toucher stops
    store.refresh()
    store.update_session("s1", lambda cur: cur.evolve(last_processed_index=10))
    assert set(json.loads(store.view_path.read_text())) == {"s1", "s2"}
    assert json.loads(store.session_path("s1").read_text())["lastProcessedIndex"] == 10


def test_a_bulk_write_waits_once_for_a_lease_kept_fresh_not_once_per_item(tmp_path):
    """Red team finding: a view lease kept fresh by another host made gc wait ~1 s per retirement (17 s for 15).
    A store that found a lease kept for its whole wait does not wait for it again for a while: 15 writes cost
    one wait, and each is still acknowledged in this host's files."""
    home = tmp_path / "home"
    fs = TouchedLeases()
    store = Store(home, "h1", tmp_path / "l" / "locks", tmp_path / "l" / "clocks", fs=fs)
    store.put_conversation("s0", "c0", "a")
    lock_path(store.view_path).write_bytes(b"evil 1 toucher\n")
    for i in range(1, 16):
        store.put_conversation(f"s{i}", f"c{i}", "a")
    assert fs.waited <= 1.5 * LEASE_WAIT_S, fs.waited
    other = Store(home, "h2", tmp_path / "l2" / "locks", tmp_path / "l2" / "clocks")
    assert all(other.conversation(f"s{i}").conversation_id == f"c{i}" for i in range(16))


class ServerAhead(RealFS):
    """The real file system on a file server whose clock is 5 s ahead of ours: every mtime it sets is 5 s on."""

    def mtime(self, path: Path) -> float | None:
        got = super().mtime(path)
        return None if got is None else got + 5.0


def test_a_server_clock_off_ours_cannot_take_a_live_lease(tmp_path):
    """Red team finding: a lease whose mtime was 3+ s off our clock (the server's clock, not its age) was taken
    from a live holder. Its age is now read on the server's own clock."""
    from subconscious.state.viewlock import BUSY, view_lock

    view = tmp_path / "conversations.json"
    view.write_text("{}")
    lock_path(view).write_bytes(b"h2 4242 livetoken\n")  # another host's holder, alive, holding it right now
    with view_lock(ServerAhead(), view, "h1", wait_s=0.2) as got:
        assert got is BUSY
    assert lock_path(view).read_bytes() == b"h2 4242 livetoken\n"
