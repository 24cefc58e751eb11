"""Issue 24 item 5: a hook's read after a Stop finds the listing cache fresh, because the worker (after its
last write) and ``subconscious watch`` (after a change) list the home again once it has been quiet for
RACY_NS — and never trust a listing a hook's own would not: a copy that arrives in the same tick of the
directory's clock as a refresh is still found. Listings are counted through the file-system seam."""

from __future__ import annotations

import argparse
import json
import logging
import os
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from subconscious.delivery import worker
from subconscious.state.sessions import listcache
from subconscious.state.clock import Stamp
from subconscious.state.fs import RealFS
from subconscious.state.records import SessionState
from subconscious.state.store.core import Store
from subconscious.sync.watcher import Watcher

HOST = "alpha"
SID = "00000003-aaaa-4bbb-8ccc-dddddddddddd"


class CountingFS(RealFS):
    def __init__(self):
        super().__init__()
        self.listed: Counter = Counter()

    def listdir(self, directory):
        self.listed[Path(directory).name] += 1
        return super().listdir(directory)


class SameTickFS(RealFS):
    """A directory clock whose tick has not moved since ``freeze`` (FAT's 2 s, a file server's second): a
    name created now leaves the directory's times as they were."""

    frozen: dict

    def __init__(self):
        super().__init__()
        self.frozen = {}

    def freeze(self, directory: Path) -> None:
        self.frozen[str(directory)] = RealFS.listing_token(self, directory)

    def listing_token(self, directory):
        return self.frozen.get(str(directory)) or super().listing_token(directory)


def build(tmp: Path, n: int) -> Path:
    """A home of ``n`` sessions (views only), its directories dated a minute back."""
    home = tmp / "lh" / ".letta" / "claude"
    (home / "hosts").mkdir(parents=True)
    now = int(time.time() * 1000)
    for i in range(n):
        sid = f"{i:08d}-aaaa-4bbb-8ccc-dddddddddddd"
        body = {"sessionId": sid, "conversationId": f"conv-{i}", "lastProcessedIndex": i, "host": "beta",
                "hlc": f"{now - 1000}:0"}
        (home / f"session-{sid}.json").write_text(json.dumps(body))
    past = time.time_ns() - 60 * 10**9
    for d in (home, home / "hosts"):
        os.utime(d, ns=(past, past))
    return home


def local(tmp: Path) -> Path:
    return tmp / "local"


def store(tmp: Path, home: Path, fs=None, read_only: bool = True) -> Store:
    return Store(home, HOST, local(tmp) / "locks", local(tmp) / "clocks", read_only=read_only, fs=fs or RealFS())


def stop_write(tmp: Path, home: Path, cursor: int) -> None:
    """What a Stop's worker writes: the session's cursor, published into the home (the view renamed in)."""
    store(tmp, home, read_only=False).update_session(
        SID, lambda cur: cur.evolve(last_processed_index=cursor) if cur else None)


def hooks_read(tmp: Path, home: Path, fs=None) -> tuple[SessionState, Counter]:
    fs = fs or CountingFS()
    got = store(tmp, home, fs).session(SID)
    return got, getattr(fs, "listed", Counter())


def session_dirs_listed(listed: Counter) -> int:
    return listed["claude"] + listed[HOST]


def fresh(tmp: Path, home: Path) -> bool:
    """Is the machine's listing cache trusted for every session directory as it is now (no listing taken)?"""
    cache = listcache.ListingCache(RealFS(), home, local(tmp) / "cache")
    dirs = [home, *(p for p in (home / "hosts").iterdir() if p.is_dir())]
    return all(cache._fresh(cache._key(d), RealFS().listing_token(d)) is not None for d in dirs)


def test_after_a_stop_and_the_workers_run_the_next_hooks_read_lists_no_session_directory(tmp_path, monkeypatch):
    from subconscious.commands import worker as worker_cmd

    home = build(tmp_path, worker.REFRESH_FROM + 20)  # a home large enough for the worker to wait for
    for k, v in {"LETTA_HOME": str(home.parents[1]), "SUBCONSCIOUS_STATE_DIR": str(local(tmp_path)),
                 "SUBCONSCIOUS_HOST": HOST, "LETTA_BASE_URL": "http://127.0.0.1:9", "LETTA_API_KEY": "sk-test"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(tmp_path)
    # the delivery itself needs a Letta server; what matters here is that it ends with the Stop's write
    monkeypatch.setattr(worker, "deliver", lambda rt, sid: stop_write(tmp_path, home, 5000) or worker.Delivery(sid))

    assert worker_cmd.run(argparse.Namespace(session=SID)) == 0

    got, listed = hooks_read(tmp_path, home)
    assert got.last_processed_index == 5000
    assert session_dirs_listed(listed) == 0, f"the hook listed the home after the worker's run: {dict(listed)}"


def test_watch_refreshes_the_listing_after_a_change_so_the_next_hooks_read_lists_nothing(tmp_path):
    home = build(tmp_path, 50)
    w = Watcher(store(tmp_path, home, read_only=False), logging.getLogger("test"), say=lambda line: None)
    thread = threading.Thread(target=w.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not fresh(tmp_path, home):  # the home as it was when watch started
            assert time.monotonic() < deadline, "watch never listed the home it started on"
            time.sleep(0.1)
        stop_write(tmp_path, home, 6000)  # a Stop on this machine (or a sync engine's rename)
        deadline = time.monotonic() + 30
        while not fresh(tmp_path, home):
            assert time.monotonic() < deadline, "watch never refreshed the listing after the change"
            time.sleep(0.1)
    finally:
        w.request_stop()
        thread.join(10)
    got, listed = hooks_read(tmp_path, home)
    assert got.last_processed_index == 6000
    assert session_dirs_listed(listed) == 0, f"the hook listed the home although watch refreshed it: {dict(listed)}"


def refresh_by_worker(tmp: Path, home: Path, fs) -> None:
    worker.settle_listings(store(tmp, home, fs), patience=0.0, large=0)


def refresh_by_watch(tmp: Path, home: Path, fs) -> None:
    Watcher(store(tmp, home, fs, read_only=False), logging.getLogger("test"), say=lambda line: None).refresh_listings()


@pytest.mark.parametrize("refresh", [refresh_by_worker, refresh_by_watch], ids=["worker", "watch"])
def test_a_copy_arriving_in_the_same_tick_as_a_refresh_is_still_found(tmp_path, monkeypatch, refresh):
    # a long racy window, so that a slow machine cannot make the refresh below come after it
    monkeypatch.setattr(listcache, "RACY_NS", 600 * 10**9)
    home = build(tmp_path, 30)
    stop_write(tmp_path, home, 7000)
    fs = SameTickFS()
    for d in (home, home / "hosts" / HOST):
        fs.freeze(d)
    refresh(tmp_path, home, fs)  # right after the change: within the racy window

    # a sync engine's conflict copy from another machine, in the same tick: the directory's times stay
    view = json.loads((home / f"session-{SID}.json").read_text())
    view.update(lastProcessedIndex=9000, conversationId="conv-other", host="beta",
                hlc=f"{Stamp(int(time.time() * 1000) + 5000, 0)}")
    (home / f"session-{SID}.sync-conflict-20261202-020000-ABCDEFG.json").write_text(json.dumps(view))
    assert fs.listing_token(home) == fs.frozen[str(home)]

    got, _ = hooks_read(tmp_path, home, fs)
    assert (got.last_processed_index, got.conversation_id) == (9000, "conv-other"), \
        "a listing taken within the racy window was trusted: the copy beside the view was not read"
