"""A ``null`` entry in a shard or the view is an invalid entry like any other: reported, its file's
bytes kept aside, and never trusted as "the canonical view's entry" (found by the state-file fuzz:
``known.get(key) != value`` said a ``null`` entry equalled a key the view does not have, so it skipped
validation and the read crashed in ``raw_stamp``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from subconscious.state.store.core import Store

# conversations.json in the canonical one-entry-per-line form (the form that validates shards' equal
# entries), holding s2 only
CANONICAL_VIEW = b'{\n  "s2": {"agentId":"agent-2","conversationId":"conv-2","hlc":"1:0","host":"beta"}\n}\n'
NULL_SHARD = b'{"conversations": {"s1": null}}'
VIEW_COPY = "conversations.sync-conflict-20261130-063049-ZV4TXD3.json"


def _home(tmp: Path, files: dict[str, bytes]) -> Path:
    home = tmp / "home"
    (home / "hosts").mkdir(parents=True)
    for name, raw in files.items():
        (home / name).write_bytes(raw)
    return home


def _store(tmp: Path, home: Path, read_only: bool) -> Store:
    return Store(home, "laptop", tmp / "local" / "locks", tmp / "local" / "clocks", read_only=read_only)


def _reported(snap, path: Path, raw: bytes, write: bool) -> None:
    """Reported; a writing store keeps the file's bytes aside, a read-only one leaves the file as it is."""
    found = [p for p in snap.problems if p.path == str(path) and p.kind == "invalid-entry"]
    assert found, snap.problems
    assert "'s1'" in found[0].message
    if write:
        assert found[0].kept_at and Path(found[0].kept_at).read_bytes() == raw
    else:
        assert path.read_bytes() == raw


@pytest.mark.parametrize("extra", [{}, {VIEW_COPY: CANONICAL_VIEW}], ids=["write", "view-copy"])
def test_a_null_shard_entry_beside_a_canonical_view_is_reported_not_trusted(tmp_path, extra):
    home = _home(tmp_path, {"conversations.json": CANONICAL_VIEW, "hosts/beta.json": NULL_SHARD, **extra})
    write = not extra  # a write reads against the view; so does a plain read that has a view copy to fold
    store = _store(tmp_path, home, read_only=not write)
    if write:
        store.put_conversation("s9", "conv-9", "agent-9")
    snap = store.read()
    _reported(snap, home / "hosts" / "beta.json", NULL_SHARD, write)
    assert snap.get("s1") is None
    assert snap.get("s2").conversation_id == "conv-2"
    if write:
        assert snap.get("s9").conversation_id == "conv-9"


def test_a_null_view_entry_is_reported_not_silently_dropped(tmp_path):
    view = b'{"s1": null, "s2": {"agentId":"agent-2","conversationId":"conv-2","hlc":"1:0","host":"beta"}}'
    home = _home(tmp_path, {"conversations.json": view})
    snap = _store(tmp_path, home, read_only=True).read()
    _reported(snap, home / "conversations.json", view, write=False)
    assert snap.get("s2").conversation_id == "conv-2"
