"""Red team, issue 24 round 2, item 6: a torn view under churn (upstream rewriting conversations.json in place
while our writes read it) left one quarantine file per write, each torn prefix a distinct content, with no
limit between gc runs. Now quarantine/ keeps the newest QUARANTINE_KEEP set-aside versions per file and kind
(each with its note); the view is rebuilt every time, nothing acknowledged is lost."""

from __future__ import annotations

import json

from subconscious.state.sources import QUARANTINE_KEEP
from subconscious.state.store.core import Store


def test_torn_views_under_churn_keep_a_bounded_quarantine(tmp_path):
    home = tmp_path / "home"
    store = Store(home, "h1", tmp_path / "l" / "locks", tmp_path / "l" / "clocks")
    store.put_conversation("s0", "c0", "a")
    for i in range(3 * QUARANTINE_KEEP):
        store.view_path.write_bytes(b'{"s0": {"conversationId": "c' + str(i).encode() + b'", "agentId"')  # torn
        store.put_conversation(f"s{i + 1}", f"c{i + 1}", "a")
    names = sorted(p.name for p in (home / "quarantine").iterdir())
    kept = [n for n in names if n.startswith("conversations.json.") and not n.endswith(".about.json")]
    notes = [n for n in names if n.endswith(".about.json")]
    assert 1 <= len(kept) <= QUARANTINE_KEEP and len(notes) == len(kept), names
    newest = (home / "quarantine" / max(kept, key=lambda n: (home / "quarantine" / n).stat().st_mtime_ns))
    assert newest.read_bytes().endswith(b'"c' + str(3 * QUARANTINE_KEEP - 1).encode() + b'", "agentId"')
    assert set(json.loads(store.view_path.read_text())) == {f"s{i}" for i in range(3 * QUARANTINE_KEEP + 1)}
