"""Red team of issue 24's ahead records: a shard's ``ahead`` map is read from every shard on every read, and a
crafted one (hosts/evil.json: 20,000 keys nobody holds, 16 entries each, 8.7 MB) was parsed entry by entry:
every read of the store took 1.9 s (43 MB: 9.6 s), past PreToolUse's 4 s deadline on every hook. Records are
now parsed only for the keys the home holds. Asserted by the work done (stamps decoded per read, which
scaled with the crafted file), not by time; the time is printed."""

from __future__ import annotations

import json
import statistics
import time

from subconscious.state import clock
from subconscious.state.store.core import Store


def test_a_crafted_ahead_record_costs_a_read_what_the_home_holds_not_what_the_record_names(tmp_path, monkeypatch):
    home = tmp_path / "home"
    store = Store(home, "h1", tmp_path / "l" / "locks", tmp_path / "l" / "clocks")
    for i in range(50):
        store.put_conversation(f"s{i}", f"c{i}", "a")
    held = store.conversation("s7")
    evil = json.loads(store.shard_path().read_text())
    evil.update(host="evil", conversations={})
    evil["ahead"] = {f"k{i:06d}": [f"1800000000000:{j}@nobody" for j in range(16)] for i in range(20_000)}
    evil["ahead"]["s7"] = [f"{held.stamp.encode()}@h1"]  # a record naming a version the home holds still counts
    (home / "hosts" / "evil.json").write_text(json.dumps(evil))
    decoded = []
    real = clock.Stamp.decode.__func__

    def counting(cls, text):
        decoded.append(1)
        return real(cls, text)

    monkeypatch.setattr(clock.Stamp, "decode", classmethod(counting))
    snap = store.read()
    assert snap.get("s7").conversation_id == "c7"  # its only version, ordered as the oldest: still live
    assert any(p.kind == "future-stamp" and "'s7'" in p.message for p in snap.problems)  # and reported
    assert len(decoded) < 5_000, len(decoded)  # was 320,000: every entry of the crafted record
    monkeypatch.undo()
    times = []
    for _ in range(5):
        t = time.perf_counter()
        store.read()
        times.append(time.perf_counter() - t)
    print(f"read with a crafted 20,000-key ahead record: median {statistics.median(times) * 1000:.0f} ms")
