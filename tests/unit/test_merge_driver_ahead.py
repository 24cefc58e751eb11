"""The git merge driver keeps both sides' ahead records of one host's shard (issue 24). A host far ahead
(two hours, inside the 24 h bound) wrote two keys; a correct host replaced one key in one clone of the
dotfiles repo and the other key in another clone, each time recording the version it did not follow as
*ahead*. ``git merge`` of the two clones runs ``subconscious merge-driver %O %A %B %P`` on the correct
host's shard. Before, the driver kept one side's record only: the other key's far-ahead version won
again, and that acknowledged update was lost on every reader."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from test_clock_follow import Clock, live  # noqa: E402

from subconscious.state.store.core import Store

TWO_HOURS = 2 * 3600_000


def _store(home: Path, local: Path, host: str, now) -> Store:
    return Store(home, host, local / f"local-{host}" / "locks", local / f"local-{host}" / "clocks", now=now)


def test_the_merge_driver_keeps_both_sides_ahead_records(tmp_path):
    clock = Clock()
    base_home = tmp_path / "base"
    ahead = _store(base_home, tmp_path, "zahead", clock.of(TWO_HOURS))
    ahead.put_conversation("k1", "conv-ahead-1", "agent-a")
    ahead.put_conversation("k2", "conv-ahead-2", "agent-a")
    clock.real += 1_000
    right = _store(base_home, tmp_path, "right", clock.of(0))
    right.put_conversation("other", "conv-other", "agent-a")  # right's shard exists in the common ancestor
    shard = right.shard_path().relative_to(base_home)
    homes = {}
    for side, key in (("ours", "k1"), ("theirs", "k2")):
        homes[side] = tmp_path / side
        shutil.copytree(base_home, homes[side])
        clone = _store(homes[side], tmp_path / side, "right", clock.of(0))
        clone.put_conversation(key, f"conv-right-{key}", "agent-a")
        assert key in json.loads((homes[side] / shard).read_text())["ahead"]
        clock.real += 1_000

    files = {n: tmp_path / f"{n}.json" for n in ("O", "A", "B")}
    shutil.copy(base_home / shard, files["O"])
    shutil.copy(homes["ours"] / shard, files["A"])
    shutil.copy(homes["theirs"] / shard, files["B"])
    r = subprocess.run([sys.executable, "-m", "subconscious", "merge-driver", str(files["O"]), str(files["A"]),
                        str(files["B"]), str(shard)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    merged = json.loads(files["A"].read_text())  # git's %A holds the result
    assert set(merged["ahead"]) >= {"k1", "k2"}, merged.get("ahead")

    (homes["ours"] / shard).write_bytes(files["A"].read_bytes())  # the merge commit, checked out
    reader = _store(homes["ours"], tmp_path / "reader", "reader", clock.of(0))
    assert live(reader) == {"k1": "conv-right-k1", "k2": "conv-right-k2", "other": "conv-other"}
