"""A ``backups/`` that is a symbolic link (a hostile copy, a user's mistake) is never written through — and
the write that was already committed when it met the link still returns normally (it raised OSError
ELOOP after the write was durable, on every write while a conflict copy waited to be filed)."""

from __future__ import annotations

import json

from subconscious.state.store.core import Store

COPY = "conversations.sync-conflict-20261130-090000-CCCCCCC.json"


def _store(tmp_path):
    home = tmp_path / "home"
    return Store(home, "h1", tmp_path / "l" / "locks", tmp_path / "l" / "clocks")


def test_a_linked_backups_dir_leaves_copies_in_place_and_writes_return(tmp_path, caplog):
    st = _store(tmp_path)
    st.put_conversation("s1", "c1", "a")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (st.home / "backups").symlink_to(elsewhere, target_is_directory=True)
    entry = {"s9": {"agentId": "a9", "conversationId": "c9", "hlc": "1790000000100:0", "host": "h3"}}
    (st.home / COPY).write_text(json.dumps(entry))
    st.put_conversation("s2", "c2", "a")  # raised OSError(ELOOP) before
    st.put_conversation("s3", "c3", "a")
    assert sorted(json.loads((st.home / "conversations.json").read_text())) == ["s1", "s2", "s3", "s9"]
    assert list(elsewhere.rglob("*")) == []  # nothing written through the link
    assert (st.home / COPY).exists()  # kept: merged, just not filed away
    assert "left in place" in caplog.text
    assert st.read().get("s9").conversation_id == "c9"
