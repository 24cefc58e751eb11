"""Red team of the quarantine bound (issue 24): quarantine/ is synced like the rest of the home, and
Syncthing, Dropbox and rclone carry a file's mtime with it, so another machine's set-aside versions may be
dated after this machine's clock (a clock ahead, or crafted files). Keeping "the newest 8 by mtime" must
never remove the version just set aside: its bytes are the only copy of a file that could not be parsed
(the view is published over it), and the warning and doctor point to it."""

from __future__ import annotations

import os
import time

from subconscious.state.sources import QUARANTINE_KEEP
from subconscious.state.store.core import Store


def test_bytes_just_set_aside_stay_whatever_the_other_versions_mtimes(tmp_path):
    home = tmp_path / "home"
    store = Store(home, "h1", tmp_path / "l" / "locks", tmp_path / "l" / "clocks")
    store.put_conversation("s0", "c0", "a")
    qdir = home / "quarantine"
    qdir.mkdir(mode=0o700)
    later = time.time() + 3600  # another machine's, an hour ahead (its mtimes travel with the files)
    for i in range(QUARANTINE_KEEP):
        other = qdir / f"conversations.json.unparseable.{i:012x}"
        other.write_bytes(b"{ torn elsewhere " + str(i).encode())
        (qdir / (other.name + ".about.json")).write_text('{"host": "ahead"}\n')
        os.utime(other, (later, later))
    torn = b'{"s0": {"conversationId": "c0", "agentId": "a"}, "s-up": {"conversationId": "only-here"'
    store.view_path.write_bytes(torn)
    os.utime(store.view_path, (time.time() - 60, time.time() - 60))  # torn a minute ago: nobody writing it
    store.put_conversation("s1", "c1", "a")
    kept = [p for p in qdir.iterdir() if not p.name.endswith(".about.json") and p.read_bytes() == torn]
    assert len(kept) == 1, sorted(p.name for p in qdir.iterdir())  # the only copy of upstream's torn file
    assert (qdir / (kept[0].name + ".about.json")).exists()
    assert len([p for p in qdir.iterdir() if not p.name.endswith(".about.json")]) <= QUARANTINE_KEEP
