"""Real rclone bisync and real Unison between two machines' homes (two local directories), with
sessions on both machines through the real store between syncs.

rclone bisync 1.60 renames both versions of a file changed on both sides to ``<name>..path1`` /
``..path2`` and leaves no ``conversations.json``: doctor must report the missing view, and after
``doctor --fix`` and one more sync every session is in conversations.json on both sides and the
replicas are byte-identical. (That is a home synced with the kit's old filters, temp files only: the
kit's filters now keep the views out of bisync, test_rclone_watch.py.) Unison (``copyonconflict``, ``prefer newer``) keeps the newer file
and a ``(conflict_on_…)`` copy: the same end state."""

from __future__ import annotations

import json
import time

import pytest

from subconscious.state.copynames import Engine
from tests.harness.filesync import ENGINES, LEGACY_RCLONE_FILTERS, RcloneBisync, tree
from tests.multihost.test_engines_end_to_end import copies_on, doctor, finish, machine, read_only
from tests.multihost.watchproc import Side

VIEW = "conversations.json"


def findings(side: Side) -> list[dict]:
    r = doctor(side, "--json")
    assert r.stdout, r.stderr
    return json.loads(r.stdout)["findings"]


@pytest.mark.parametrize("engine", ["rclone", "unison"])
def test_changes_on_both_sides_end_identical_with_every_session_in_the_view(tmp_path, engine):
    t0 = time.monotonic()
    laptop, desktop = Side(tmp_path, "laptop"), Side(tmp_path, "desktop")
    for s in (laptop, desktop):
        s.letta_home.mkdir(mode=0o700)
    work = tmp_path / f"{engine}-work"
    link = (RcloneBisync(laptop.letta_home, desktop.letta_home, work, filters=LEGACY_RCLONE_FILTERS)
            if engine == "rclone" else ENGINES[engine](laptop.letta_home, desktop.letta_home, work))
    written = finish([machine(laptop, "--prefix", "first", "--sessions", "1")])
    link.sync()
    assert (desktop.state / VIEW).read_bytes() == (laptop.state / VIEW).read_bytes()

    # apart: both machines start sessions and continue the same one
    written += finish([
        machine(laptop, "--prefix", "lap", "--sessions", "2", "--resume", "first-00", "--cursor-base", "10"),
        machine(desktop, "--prefix", "desk", "--sessions", "2", "--resume", "first-00", "--cursor-base", "50"),
    ])
    link.sync()
    link.sync()  # Unison copies the loser on one side in the first run; this run carries the copy over

    copies = {side.host: sorted(copies_on(side)) for side in (laptop, desktop)}
    assert copies["laptop"] and copies["laptop"] == copies["desktop"], copies
    before = findings(laptop)
    engines = {f["engine"] for f in before if f["kind"] == "conflict-copy"}
    assert engines == {Engine(engine).value}, before
    if engine == "rclone":  # both versions renamed away: no view on either side
        assert sorted(copies["laptop"]) == sorted([f"{VIEW}..path1", f"{VIEW}..path2",
                                                   "session-first-00.json..path1", "session-first-00.json..path2"])
        for side in (laptop, desktop):
            assert not (side.state / VIEW).exists() and not (side.state / "session-first-00.json").exists()
        missing = {f["path"]: f for f in before if f["kind"] == "missing-view"}
        assert set(missing) == {VIEW, "session-first-00.json"}, before
        assert missing[VIEW]["severity"] == "error" and missing[VIEW]["fixable"]
        assert doctor(laptop).returncode == 1
        assert read_only(laptop).session("first-00").last_processed_index == 50 + 2 * 7 + 3  # reads survive
    else:  # the newer file kept its name, the other one is beside it
        assert not [f for f in before if f["kind"] == "missing-view"]

    r = doctor(laptop, "--fix")
    assert r.returncode == 0, r.stdout
    link.sync()

    for side in (laptop, desktop):
        view = json.loads((side.state / VIEW).read_text())
        assert set(written) <= set(view), f"not in {side.host}'s view: {sorted(set(written) - set(view))}"
        assert not copies_on(side), copies_on(side)
        assert read_only(side).session("first-00").last_processed_index == 50 + 2 * 7 + 3
        r = doctor(side)
        assert r.returncode == 0, r.stdout
    assert tree(laptop.letta_home) == tree(desktop.letta_home)
    kept = [p for p in tree(laptop.state) if p.startswith("backups/")]
    assert len(kept) == len(copies["laptop"])
    print(f"{engine}: {link.runs} syncs, {link.seconds:.2f} s in {engine}, {time.monotonic() - t0:.1f} s in all")


def test_a_missing_binary_fails_with_the_command_to_run(monkeypatch):
    from tests.harness.filesync import require

    monkeypatch.setenv("PATH", "")
    for binary in ("rclone", "unison"):
        with pytest.raises(pytest.fail.Exception, match=f"apt-get install -y {binary}"):
            require(binary)


def test_the_kits_rclone_filters_keep_our_temp_files_out():
    from subconscious.state.textforms import TEMP_PREFIX
    from tests.harness.filesync import RCLONE_FILTERS

    assert f"- {TEMP_PREFIX}*" in RCLONE_FILTERS.read_text().splitlines()
