"""The simulated file system keeps POSIX's semantics, and the scheduler is deterministic."""

from __future__ import annotations

from pathlib import Path

import pytest

from .sched import INF, Plan, RandomWalk, Scheduler
from .simfs import SimFS

D = Path("/h")


def test_names_and_inodes_like_posix():
    fs = SimFS()
    fs.put(D / "a", b"A")
    fs.put(D / "b", b"B")
    assert fs.exchange(D / "a", D / "b") and fs.peek(D / "a") == b"B" and fs.peek(D / "b") == b"A"
    assert fs.link(D / "a", D / "c") and not fs.link(D / "b", D / "c")
    tmp = fs.put_temp(D, "x", b"X")
    fs.replace(tmp, D / "a")
    assert fs.peek(D / "a") == b"X" and fs.peek(D / "c") == b"B"  # the old inode lives on under its other name
    assert fs.unlink(D / "c") and not fs.unlink(D / "c")
    assert not fs.rename(D / "gone", D / "a")
    with pytest.raises(FileNotFoundError):
        fs.exchange(D / "a", D / "gone")
    assert fs.read(D).status == "special" and fs.read(D / "gone").status == "missing"
    assert sorted(fs.listdir(Path("/"))) == ["h"]


def test_in_place_write_follows_the_inode():
    fs = SimFS()
    fs.put(D / "v", b"old")
    h = fs.upstream_open_trunc(D / "v")
    assert fs.read(D / "v").data == b""  # a reader between the two steps sees an empty file
    fs.rename(D / "v", D / "moved")
    fs.upstream_write(h, b"new")
    assert fs.peek(D / "moved") == b"new" and fs.peek(D / "v") is None


def test_no_swap_no_link_mode():
    fs = SimFS(exchange_ok=False, link_ok=False)
    fs.put(D / "a", b"A")
    fs.put(D / "b", b"B")
    assert fs.exchange(D / "a", D / "b") is False
    with pytest.raises(OSError):
        fs.link(D / "a", D / "c")


def _interleave(policy):
    s = Scheduler()
    fs = SimFS(s)
    log = []

    def actor(name):
        def fn():
            for i in range(3):
                with fs.lock(Path("/l"), "h", 1):
                    fs.put_temp(D, f"{name}{i}", b"")
                    log.append(name)
        return fn

    s.spawn("a", actor("a"))
    s.spawn("b", actor("b"))
    s.run(policy)
    return log, s.trace


def test_schedules_are_replayable_and_the_lock_serialises():
    assert _interleave(RandomWalk(5, 0.5)) == _interleave(RandomWalk(5, 0.5))
    log, _ = _interleave(Plan([(0, 2), (1, INF), (0, INF)]))
    assert sorted(log) == ["a"] * 3 + ["b"] * 3
