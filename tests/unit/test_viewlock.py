"""The lease on a shared view (subconscious.state.viewlock) on the real file system: taken and given back,
a stale one (its holder killed) taken over, and every odd case — held too long, no hard links, a lock name
that is a symlink or a directory — ends in writing without it, never in an error or a hang."""

from __future__ import annotations

import os
import time

from subconscious.state.fs import RealFS
from subconscious.state.store.core import Store
from subconscious.state.viewlock import lock_path, view_lock


def _names(d):
    return sorted(os.listdir(d))


def test_taken_released_and_reentrant(tmp_path):
    fs, view = RealFS(), tmp_path / "conversations.json"
    held: set[str] = set()
    with view_lock(fs, view, "h1", held) as got:
        assert got and lock_path(view).exists()
        with view_lock(fs, view, "h1", held, wait_s=0.05) as again:  # nested: never waits for itself
            assert again
        assert lock_path(view).exists()
    assert _names(tmp_path) == []  # lock and candidate gone


def test_a_held_lease_is_waited_for_then_written_without(tmp_path, caplog):
    fs, view = RealFS(), tmp_path / "conversations.json"
    with view_lock(fs, view, "h1"):
        t0 = time.monotonic()
        with view_lock(fs, view, "h2", wait_s=0.2) as got:
            assert not got
        assert time.monotonic() - t0 >= 0.2
        assert lock_path(view).exists()  # h1's lease is left alone
    assert "writing without it" in caplog.text
    assert _names(tmp_path) == []


def test_a_stale_lease_is_taken_over(tmp_path):
    fs, view = RealFS(), tmp_path / "session-s1.json"
    lock_path(view).write_bytes(b"h9 123 dead\n")
    old = time.time() - 120
    os.utime(lock_path(view), (old, old))
    with view_lock(fs, view, "h1", wait_s=0.2) as got:
        assert got and b"h1 " in lock_path(view).read_bytes()
    assert _names(tmp_path) == []


def test_odd_lock_names_write_without_it_and_no_hard_links_are_needed(tmp_path):
    fs = RealFS()
    secret = tmp_path / "secret"
    secret.write_text("ssh key")
    view = tmp_path / "home" / "conversations.json"
    view.parent.mkdir()
    lock_path(view).symlink_to(secret)
    with view_lock(fs, view, "h1", wait_s=0.05) as got:
        assert not got
    assert secret.read_text() == "ssh key" and lock_path(view).is_symlink()
    lock_path(view).unlink()
    lock_path(view).mkdir()
    with view_lock(fs, view, "h1", wait_s=0.05) as got:
        assert not got

    class NoLinks(RealFS):
        def link(self, src, dst):
            raise OSError(1, "Operation not permitted")

    other = tmp_path / "home" / "session-s1.json"
    with view_lock(NoLinks(), other, "h1", wait_s=0.05) as got:
        assert got  # O_EXCL, not link: SMB and Windows take turns too
    assert not lock_path(other).exists()


def test_writes_go_on_when_the_lease_is_held_by_a_dead_writer(tmp_path):
    """A writer of another host killed while it held the lease: the next write waits at most LEASE_WAIT_S
    and is acknowledged (in this host's shard); the view is left alone until a write gets the lease, which
    happens once the dead writer's lease is stale (STALE_S)."""
    import json

    from subconscious.state.viewlock import STALE_S

    home = tmp_path / "home"
    store = Store(home, "h1", tmp_path / "l" / "locks", tmp_path / "l" / "clocks")
    store.put_conversation("s1", "c1", "a")
    lock_path(store.view_path).write_bytes(b"h2 1 killed\n")
    store.put_conversation("s2", "c2", "a")
    assert store.conversation("s2").conversation_id == "c2"
    assert set(json.loads(store.view_path.read_text())) == {"s1"}  # not published without the lease
    old = time.time() - STALE_S - 10
    os.utime(lock_path(store.view_path), (old, old))
    store.put_conversation("s3", "c3", "a")
    assert set(json.loads(store.view_path.read_text())) == {"s1", "s2", "s3"}


def test_hostile_lock_files_cost_at_most_the_wait(tmp_path):
    """A lock file dated far in the future is taken over like a stale one; one too large to be ours is
    never read whole (every poll would read it) and means writing without the lease at once."""
    fs, view = RealFS(), tmp_path / "conversations.json"
    lock_path(view).write_bytes(b"x\n")
    future = time.time() + 10 ** 6
    os.utime(lock_path(view), (future, future))
    with view_lock(fs, view, "h1", wait_s=0.2) as got:
        assert got
    lock_path(view).write_bytes(b"x" * (1 << 20))
    t0 = time.monotonic()
    with view_lock(fs, view, "h1", wait_s=5) as got:
        assert not got
    assert time.monotonic() - t0 < 5
    assert lock_path(view).stat().st_size == 1 << 20  # not ours: left alone


def test_a_lease_this_host_left_in_a_killed_process_is_taken_at_once(tmp_path, monkeypatch, caplog):
    """A hook cut off at its timeout between taking and giving back the lease: the host's next write (which
    holds the host lock, as every writer of the host does while it holds a lease) takes it over without
    waiting for it to go stale (it waited 10 s: 100 kill trials of test_crash_safety took 496 s)."""
    from subconscious.state import viewlock

    home = tmp_path / "claude"
    s = Store(home, "h1", tmp_path / "locks", tmp_path / "clocks")
    s.put_conversation("s1", "conv-1", "agent-1")
    lock_path(home / "conversations.json").write_bytes(b"h1 999999999 00112233aabbccdd\n")  # a dead pid's

    def no_wait(*a, **k):
        raise AssertionError("waited for a lease its own host left")

    monkeypatch.setattr(viewlock.FS, "wait_gone", no_wait, raising=False)
    monkeypatch.setattr(type(s.fs), "wait_gone", no_wait, raising=False)
    s.put_conversation("s2", "conv-2", "agent-1")
    assert s.read().live["s2"].conversation_id == "conv-2"
    assert "left by a writer of this host" in caplog.text
    assert not lock_path(home / "conversations.json").exists()
