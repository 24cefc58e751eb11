"""The sync model (subconscious.demo.replicas) on a kernel with coarse timestamps: every file written in
one clock tick has the same mtime and ctime (a jiffy on most Linux kernels before 6.13, a second on
ext3/HFS+, two on FAT), and a rewrite in place keeps the inode. A same-size rewrite inside the tick must
still travel: the model's digest cache must not take it for the version it hashed before."""

from __future__ import annotations

import os
import time
from types import SimpleNamespace

from subconscious.demo import replicas
from subconscious.demo.replicas import Network
from subconscious.state.copynames import Engine


def inside_one_tick(monkeypatch) -> None:
    """The whole test inside one tick of a coarse clock: os.stat reports every file's mtime and ctime as
    the tick's start, and the wall clock reads a millisecond later."""
    real = os.stat
    tick = time.time_ns() // 10**9 * 10**9

    def stat(path, *args, **kwargs):
        st = real(path, *args, **kwargs)
        fields = {k: getattr(st, k) for k in dir(st) if k.startswith("st_")}
        for k in ("st_mtime", "st_ctime"):
            fields[k + "_ns"], fields[k] = tick, tick / 1e9
        return SimpleNamespace(**fields)

    monkeypatch.setattr(os, "stat", stat)
    monkeypatch.setattr(time, "time_ns", lambda: tick + 1_000_000)


def rewrite_in_place(path, data: bytes) -> None:
    with open(path, "r+b") as f:  # same inode, same size: only the bytes differ
        f.write(data)


def test_a_same_size_rewrite_inside_one_clock_tick_reaches_the_other_replica(tmp_path, monkeypatch):
    replicas._DIGESTS.clear()
    inside_one_tick(monkeypatch)
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    net = Network({"a": a, "b": b})
    net.connect("a", "b", Engine.SYNCTHING)
    (a / "conversations.json").write_bytes(b'{"s1": {"conversationId": "c-1"}}')
    net.sync_all()
    assert (b / "conversations.json").read_bytes() == b'{"s1": {"conversationId": "c-1"}}'
    rewrite_in_place(a / "conversations.json", b'{"s1": {"conversationId": "c-2"}}')
    net.sync_all()
    assert (b / "conversations.json").read_bytes() == b'{"s1": {"conversationId": "c-2"}}'
    assert net.identical()


def test_a_quiet_file_is_hashed_once(tmp_path, monkeypatch):
    """The cache still works for what does not change (backups/: most of a long run's files)."""
    replicas._DIGESTS.clear()
    p = tmp_path / "old.json"
    p.write_bytes(b"{}")
    past = time.time_ns() - 10 * 10**9
    os.utime(p, ns=(past, past))
    monkeypatch.setattr(replicas, "RACY_NS", -10**12)  # ctime is now (utime sets it): count it as quiet
    first = replicas.digest(p)
    opened = []
    real_open = open
    monkeypatch.setattr("builtins.open", lambda *a, **k: opened.append(a[0]) or real_open(*a, **k))
    assert replicas.digest(p) == first and not opened
