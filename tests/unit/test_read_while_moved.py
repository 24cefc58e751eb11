"""A hook's read of a session while another host moves its newest version.

Found by the simulation's full run ("hosts + upstream worker + cursor reader", random seed
20261261792266): upstream's finished write (cursor 27) sat in a displaced version; a hook read on a third
host read the view (25), took the hosts' names from its listing cache, and by the time it read the
displaced file another host had merged it into its own version and the view and removed it. The read
saw none of the three and returned 25 after 27 was acknowledged.
"""

from __future__ import annotations

import json
from pathlib import Path

from subconscious.state.fs import RealFS
from subconscious.state.records import SessionState
from subconscious.state.store.core import Store

DISPLACED = ".subconscious-tmp-displaced-session-s1.json-0000abcd"


def make(tmp: Path, host: str, fs=None) -> Store:
    kw = {} if fs is None else {"fs": fs}
    return Store(tmp / "home", host, tmp / f"local-{host}" / "locks", tmp / f"local-{host}" / "clocks", **kw)


class OtherHostMovesIt(RealFS):
    """The real file system; the first read of the displaced version lets another host's whole write run
    first (it merges that version into its own file and the view, then removes it)."""

    def __init__(self, write):
        super().__init__()
        self.write = write

    def read(self, path, *args, **kwargs):
        if Path(path).name == DISPLACED and self.write is not None:
            write, self.write = self.write, None
            write()
        return super().read(path, *args, **kwargs)


def test_a_version_moved_while_a_hook_reads_is_seen_at_least_once(tmp_path):
    home = tmp_path / "home"
    h1 = make(tmp_path, "h1")
    h1.update_session("s1", lambda cur: SessionState("s1", conversation_id="c1", last_processed_index=25))
    upstream = json.loads((home / "session-s1.json").read_text())
    upstream["lastProcessedIndex"] = 27  # upstream's finished write, into a version we displaced
    (home / DISPLACED).write_text(json.dumps(upstream, indent=2))
    reader = make(tmp_path, "h3")
    assert reader.session("s1").last_processed_index == 27  # the hook read before: the cache is warm
    h2 = make(tmp_path, "h2")
    reader = make(tmp_path, "h3", OtherHostMovesIt(
        lambda: h2.update_session("s1", lambda cur: cur.evolve(last_processed_index=max(cur.last_processed_index, 26)))))
    assert reader.session("s1").last_processed_index == 27
    assert not (home / DISPLACED).exists() and (home / "hosts" / "h2" / "session-s1.json").exists()
