"""doctor's ``missing-view`` finding: a conversations.json (or a session file whose conflict copies
exist) that is not there -- rclone bisync 1.60 renames both versions of a file changed on two machines
to ``<name>..path1`` / ``<name>..path2`` and leaves none under the name. Reported before the fix,
rebuilt by ``--fix`` and by the next write, never silently absent."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from subconscious.state.copynames import Engine, make_copy_name
from subconscious.state.records import SessionState
from tests.unit.test_doctor import Home

VIEW = "conversations.json"


@pytest.fixture
def home(tmp_path) -> Home:
    return Home(tmp_path)


def rclone_both_sides(home: Home, name: str, other: bytes) -> list[str]:
    """What bisync 1.60 leaves for a file changed on both sides: two copies, no original."""
    path = home.state / name
    ours = make_copy_name(Engine.RCLONE, name, number=1, variant="legacy")
    theirs = make_copy_name(Engine.RCLONE, name, number=2, variant="legacy")
    os.replace(path, home.state / ours)
    (home.state / theirs).write_bytes(other)
    return [ours, theirs]


def missing(home: Home) -> dict[str, object]:
    return {f.path: f for f in home.findings() if f.kind == "missing-view"}


def view(home: Home) -> dict:
    return json.loads((home.state / VIEW).read_text())


def test_rclone_renaming_the_view_away_on_both_sides_is_reported_and_rebuilt_by_fix(home):
    beta = Home(home.tmp / "elsewhere", "beta")
    a, b = home.store(), beta.store()
    a.put_conversation("s-a", "conv-a", "agent-1")
    b.put_conversation("s-b", "conv-b", "agent-1")  # the other machine's view, changed meanwhile
    copies = rclone_both_sides(home, VIEW, b.view_path.read_bytes())

    found = missing(home)
    assert set(found) == {VIEW}
    f = found[VIEW]
    assert f.severity == "error" and f.fixable and f.details["copies"] == copies
    assert "rclone" in f.message and "2 live sessions" in f.message
    r = home.doctor()
    assert r.returncode == 1 and "missing-view" in r.stdout and "no problems found" not in r.stdout
    assert {c.path for c in home.findings() if c.kind == "conflict-copy"} == set(copies)

    r = home.doctor("--fix")
    assert r.returncode == 0, r.stdout
    assert set(view(home)) == {"s-a", "s-b"}
    assert not any((home.state / c).exists() for c in copies)
    kept = sorted(p.name for p in (home.state / "backups").rglob("*") if p.is_file())
    assert kept == sorted(copies)
    assert home.kinds() == set() and home.doctor().returncode == 0


def test_a_view_missing_without_any_copy_is_reported_and_rebuilt_by_fix(home):
    s = home.store()
    s.put_conversation("s1", "conv-1", "agent-1")
    s.put_conversation("s2", "conv-2", "agent-1")
    (home.state / VIEW).unlink()
    (f,) = [f for f in home.findings() if f.kind == "missing-view"]
    assert f.path == VIEW and "2 live sessions" in f.message and "1 host shard" in f.message
    r = home.doctor("--fix")
    assert r.returncode == 0, r.stdout
    assert f"rebuilt the missing {VIEW}" in r.stdout
    assert set(view(home)) == {"s1", "s2"} and home.kinds() == set()


def test_the_next_write_rebuilds_a_missing_view(home):
    s = home.store()
    s.put_conversation("s1", "conv-1", "agent-1")
    (home.state / VIEW).unlink()
    s.put_conversation("s2", "conv-2", "agent-1")
    assert set(view(home)) == {"s1", "s2"} and "missing-view" not in home.kinds()


def test_a_session_file_that_exists_only_as_copies_is_reported_and_rebuilt_by_fix(home):
    s = home.store()
    s.put_conversation("s-x", "conv-x", "agent-1")
    s.update_session("s-x", lambda cur: SessionState("s-x", conversation_id="conv-x", last_processed_index=3))
    further = json.loads(s.session_path("s-x").read_text()) | {"lastProcessedIndex": 40, "hlc": "1:0"}
    copies = rclone_both_sides(home, "session-s-x.json", json.dumps(further).encode())

    assert s.session("s-x").last_processed_index == 40  # hooks read the copies meanwhile
    found = missing(home)
    assert set(found) == {"session-s-x.json"}
    f = found["session-s-x.json"]
    assert f.severity == "warning" and f.fixable and f.details == {"copies": copies, "session": "s-x"}

    r = home.doctor("--fix")
    assert r.returncode == 0, r.stdout
    assert s.session_path("s-x").exists() and not any((home.state / c).exists() for c in copies)
    assert home.store().session("s-x").last_processed_index == 40  # merged, the cursor never moved back
    assert home.kinds() == set()


def test_fold_session_rebuilds_a_session_file_that_exists_only_as_copies(home):
    """The store's own API (what --fix and the watcher's fold_all call), without doctor."""
    s = home.store()
    s.update_session("s-y", lambda cur: SessionState("s-y", conversation_id="conv-y", last_processed_index=5))
    copies = rclone_both_sides(home, "session-s-y.json", s.session_path("s-y").read_bytes())
    moved = s.fold_session("s-y")
    assert sorted(p.name for p in moved) == sorted(copies), "fold_session did not rebuild the missing file"
    assert s.session_path("s-y").exists() and s.session("s-y").last_processed_index == 5


def test_the_next_session_write_rebuilds_a_session_file_that_exists_only_as_copies(home):
    s = home.store()
    s.update_session("s-z", lambda cur: SessionState("s-z", conversation_id="conv-z", last_processed_index=5))
    rclone_both_sides(home, "session-s-z.json", s.session_path("s-z").read_bytes())
    s.update_session("s-z", lambda cur: cur.evolve(last_processed_index=9))
    assert s.session_path("s-z").exists() and s.session("s-z").last_processed_index == 9


def test_nothing_is_missing_in_a_fresh_home_or_one_without_entries(home):
    assert "missing-view" not in home.kinds()
    home.store().update_session("s1", lambda cur: SessionState("s1", conversation_id="conv-1"))
    assert not (home.state / VIEW).exists() and "missing-view" not in home.kinds()


def test_a_session_copy_beside_its_original_is_no_missing_view(home):
    s = home.store()
    s.update_session("s1", lambda cur: SessionState("s1", conversation_id="conv-1", last_processed_index=2))
    shutil.copyfile(s.session_path("s1"), home.state / make_copy_name(Engine.RCLONE, "session-s1.json"))
    kinds = home.kinds()
    assert "missing-view" not in kinds and "conflict-copy" in kinds
