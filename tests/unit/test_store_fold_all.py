"""Store.fold_all folds every engine's session and shard copies, including names made only of the
characters our own names use (OneDrive's `-<PC>` and `-<host>-safeBackup-NNNN`, Nextcloud's legacy
`_conflict-…`), which the plain-name fast path used to skip."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from subconscious.state.copynames import Engine, make_copy_name
from subconscious.state.records import SessionState
from subconscious.state.store.core import Store


def make(tmp: Path, host: str, home: Path) -> Store:
    return Store(home, host, tmp / f"local-{host}" / "locks", tmp / f"local-{host}" / "clocks")


@pytest.mark.parametrize("engine", list(Engine), ids=[e.value for e in Engine])
def test_fold_all_folds_session_copies_of_every_engine(tmp_path, engine):
    home = tmp_path / "home"
    s = make(tmp_path, "alpha", home)
    s.update_session("abc-123", lambda cur: SessionState("abc-123", conversation_id="c", last_processed_index=3))
    further = json.loads(s.session_path("abc-123").read_text()) | {"lastProcessedIndex": 9, "hlc": "1:0"}
    copy = home / make_copy_name(engine, "session-abc-123.json", host="LAPTOP", user="bob")
    copy.write_text(json.dumps(further))
    assert s.session_ids() == ["abc-123"]  # a copy is not a session of its own
    s.fold_all()
    assert not copy.exists(), sorted(p.name for p in home.iterdir())
    assert s.session("abc-123").last_processed_index == 9
    assert [p.name for p in (home / "backups").rglob("*") if p.is_file()] == [copy.name]


@pytest.mark.parametrize("engine", [Engine.ONEDRIVE_LINUX, Engine.NEXTCLOUD])
def test_fold_all_folds_plain_looking_shard_copies(tmp_path, engine):
    home = tmp_path / "home"
    a, twin = make(tmp_path, "alpha", home), make(tmp_path, "beta", tmp_path / "twin")
    twin.put_conversation("b1", "conv-b1", "agent-1")
    copy = home / "hosts" / make_copy_name(engine, "beta.json", host="pc", variant="legacy")
    copy.parent.mkdir(parents=True)
    shutil.copyfile(twin.shard_path(), copy)
    assert a.read().get("b1").conversation_id == "conv-b1"
    a.fold_all()
    assert not copy.exists() and a.conversation("b1").conversation_id == "conv-b1"
