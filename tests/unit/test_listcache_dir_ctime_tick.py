"""Red team (R2): the listing cache a hook's read goes through trusts a listing by the directory's
modification time alone (state/listcache.py ``_list``), while the session cache's racily-clean rule takes
the later of the modification and change time. A sync engine that puts a directory's modification time
back (``rsync -a``, Unison ``times = true``) leaves only the change time saying the directory changed, and
on a file system with a coarse clock (ext2/ext3 with 128-byte inodes: 1 s; FAT: 2 s) a second copy that
arrives in the same tick keeps the whole token: the hook's read misses its newer cursor. The directory
times here are a model (a 2 s tick on a clock the test moves), as test_session_cache's file times are."""

from __future__ import annotations

import json
import os
import types

from subconscious.state.sessions import listcache
from subconscious.state.fs import RealFS
from subconscious.state.records import SessionState
from subconscious.state.store.core import Store

TICK = 2_000_000_000
SID = "00000005-aaaa-4bbb-8ccc-dddddddddddd"


class DirTimes(RealFS):
    """The real file system whose directories' times are a model: (mtime, ctime) as the test set them, cut
    to a 2 s tick; device and inode are the real ones."""

    def __init__(self, world: dict):
        super().__init__()
        self.world = world

    def listing_token(self, directory):
        token = super().listing_token(directory)
        if token is None:
            return None
        m, c = self.world["dirs"].get(os.fspath(directory), (0, 0))
        return (*token[:2], m - m % TICK, c - c % TICK)


def test_a_second_copy_in_the_same_tick_under_a_restored_directory_time_is_read(tmp_path, monkeypatch):
    world = {"now": 1_800_000_000 * 10**9, "dirs": {}}
    monkeypatch.setattr(listcache, "time", types.SimpleNamespace(time_ns=lambda: world["now"]))
    home, local = tmp_path / "home", tmp_path / "local"
    writer = Store(home, "alpha", local / "locks", local / "clocks")
    writer.update_session(SID, lambda cur: SessionState(SID, conversation_id="conv-1", last_processed_index=10))
    old = world["now"] - 3600 * 10**9  # the directory's time on the machine the sync engine copies from
    world["dirs"][os.fspath(home)] = (old, world["now"])

    def read() -> int:
        store = Store(home, "alpha", local / "locks", local / "clocks", read_only=True, fs=DirTimes(world))
        return store.session(SID).last_processed_index

    view = home / f"session-{SID}.json"
    base = json.loads(view.read_text())
    wall = int(base["hlc"].split(":")[0])

    def arrive(name: str, cursor: int) -> None:
        """A conflict copy delivered by a sync engine that then puts the directory's mtime back."""
        copy = dict(base, lastProcessedIndex=cursor, hlc=f"{wall + cursor}:0", host="beta")
        (home / name).write_text(json.dumps(copy))
        world["dirs"][os.fspath(home)] = (old, world["now"])  # mtime restored, ctime now

    world["now"] += 10 * TICK
    arrive(f"session-{SID}.sync-conflict-20261202-020000-ABCDEFG.json", 20)
    world["now"] += TICK // 4
    assert read() == 20  # listed (the modification time is old: the listing is trusted) and cached
    arrive(f"session-{SID}.sync-conflict-20261202-020001-HIJKLMN.json", 30)  # the same tick of the directory's clock
    world["now"] += 10 * TICK
    assert read() == 30
