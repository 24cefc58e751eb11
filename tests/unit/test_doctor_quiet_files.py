"""Issue 24 item 5: doctor's record of the files it found nothing in (subconscious/state/sessions/cache.py's
QuietFiles): a session view without a problem, a file without anything of the block cache. Such a file is
not read again while its identity is unchanged; what doctor reports must be what it reports without the
record, whatever happened to the files. The file times are the model of test_session_cache (a 2 s tick
on a clock the test moves)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from subconscious.doctor.checks import _sessions
from subconscious.privacy.homeseal import scan_home

from .test_session_cache import SIDS, TICK, World
from tests.harness.sizes import examples


def view_findings(world: World, cached: bool = True) -> tuple:
    store = world.store(cached)
    count, rows, found = _sessions(store, store.home)
    return count, sorted((f.kind, f.path, f.message) for f in rows), sorted(str(p) for p, _ in found)


def scanned(world: World, cached: bool = True) -> list:
    from subconscious.state.sessions.cache import QuietFiles

    store = world.store(cached)
    quiet = QuietFiles(store.fs, store.home, world.local / "cache", "scan") if cached else None

    def read(path):
        got = store.fs.read(Path(path))
        return got.data if got.ok else None

    scan = scan_home(store.home, read, quiet)
    return sorted((str(f.path), f.plain, sorted(f.sealed.items()), sorted(f.kids), f.unreadable) for f in scan.files)


def plain_blocks(world: World, path: Path, digit: int, keep_mtime: bool = False) -> None:
    """The session version with a cached block in plain text (what the encryption scan looks for), in
    place, the same size for every digit."""
    world.write(path, digit, replace=False, keep_mtime=keep_mtime)
    value = json.loads(path.read_bytes())
    value["lastBlockValues"] = {"notes": f"plain {digit}"}
    with open(path, "r+b") as f:
        f.write(json.dumps(value).encode())
        f.truncate()


edits = st.one_of(
    st.tuples(st.just("write"), st.integers(0, 8), st.integers(0, 9), st.booleans()),
    st.tuples(st.just("garbage"), st.integers(0, 8)),
    st.tuples(st.just("blocks"), st.integers(0, 8), st.integers(0, 9), st.booleans()),
    st.tuples(st.just("delete"), st.integers(0, 8)),
    st.tuples(st.just("tick"), st.sampled_from([0, TICK // 2, TICK, 2 * TICK, 5 * TICK])),
    st.tuples(st.just("doctor"),),
)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(edits, min_size=1, max_size=25))
def test_doctor_with_its_record_of_quiet_files_reports_what_it_reports_without(steps):
    with tempfile.TemporaryDirectory() as tmp:
        world = World(Path(tmp))

        def check():
            assert view_findings(world) == view_findings(world, cached=False)
            assert scanned(world) == scanned(world, cached=False)

        for op in steps:
            target = world.targets()[op[1]] if len(op) > 1 and op[0] != "tick" else None
            if op[0] == "write":
                world.write(target, op[2], replace=op[3])
            elif op[0] == "garbage":
                world.write(target, 0, replace=False, garbage=True)
            elif op[0] == "blocks" and target.exists():
                plain_blocks(world, target, op[2], keep_mtime=op[3])
            elif op[0] == "delete":
                target.unlink(missing_ok=True)
            elif op[0] == "tick":
                world.state["now"] += op[1]
            elif op[0] == "doctor":
                check()
        check()
        world.state["now"] += 10 * TICK
        check()  # (every file older than the racy window: its identity seen)
        world.state["now"] += 10 * TICK
        check()  # (seen again that long after, by this machine's clock: trusted)
        world.state["reads"].clear()
        views, scan = view_findings(world), scanned(world)
        # with nothing changed, only files doctor reports something about are read again
        reported = {Path(path).name for _, path, _ in views[1]} | {Path(s[0]).name for s in scan}
        assert {Path(p).name for p in world.state["reads"]} <= reported


def test_a_later_doctor_reads_no_quiet_file_and_a_changed_one_again(tmp_path):
    world = World(tmp_path)
    world.state["now"] += 10 * TICK
    first_views, first_scan = view_findings(world), scanned(world)
    assert first_views[0] == len(SIDS) and not first_views[1] and not first_scan
    world.state["reads"].clear()
    assert view_findings(world) == first_views and scanned(world) == first_scan
    assert world.state["reads"]  # seen again too soon to be trusted: read again
    world.state["now"] += 10 * TICK
    assert view_findings(world) == first_views and scanned(world) == first_scan  # now trusted
    world.state["reads"].clear()
    assert view_findings(world) == first_views and scanned(world) == first_scan
    assert not world.state["reads"]  # neither the views nor any session file read again
    # a view made unparseable, and another file given a plain block value: both in the tick after
    view, version = world.targets()[0], world.targets()[4]
    world.state["now"] += TICK
    world.write(view, 0, replace=False, garbage=True)
    plain_blocks(world, version, 3)
    world.state["now"] += 10 * TICK
    views, scan = view_findings(world), scanned(world)
    assert views == view_findings(world, cached=False) and scan == scanned(world, cached=False)
    assert any(kind == "unparseable" for kind, _, _ in views[1])
    assert [s[0] for s in scan] == [os.fspath(version)] and scan[0][1] == 1


def blocks(world: World, path: Path, value, keep_mtime: bool = False) -> None:
    """The session version at ``path`` with one cached block holding ``value``, rewritten in place."""
    world.write(path, 1, replace=False, keep_mtime=keep_mtime)
    data = json.loads(path.read_bytes())
    data["lastBlockValues"] = {"notes": value}
    with open(path, "r+b") as f:
        f.write(json.dumps(data).encode())
        f.truncate()


def test_a_rewrite_within_the_racy_window_is_found(tmp_path):
    """The same size, in place, the modification time put back, in the tick the scan recorded the file:
    its whole identity is as it was, and the plain value it now holds is still reported."""
    world = World(tmp_path)
    world.state["now"] += 10 * TICK
    target = world.targets()[1]
    blocks(world, target, 123456789, keep_mtime=True)  # not a cached value: nothing to report
    assert scanned(world) == []
    blocks(world, target, "plain 5", keep_mtime=True)  # the same size: a plain value
    world.state["now"] += 10 * TICK
    scan = scanned(world)
    assert scan == scanned(world, cached=False) and [s[0] for s in scan] == [os.fspath(target)]


def test_a_quiet_view_whose_stamp_is_now_beyond_the_bound_is_reported(tmp_path):
    """The clock set back by more than the allowed skew after doctor found a view quiet: its stamp is
    beyond the bound now, and doctor says so as it would without its record."""
    from .test_session_cache import WALL

    world = World(tmp_path)
    world.state["now"] += 10 * TICK
    at_write = WALL + 9
    store = world.store(now=lambda: at_write)
    assert not _sessions(store, store.home)[1]
    back = world.store(now=lambda: at_write - 25 * 3600 * 1000)
    rows = _sessions(back, back.home)[1]
    fresh = world.store(False, now=lambda: at_write - 25 * 3600 * 1000)
    assert [(f.kind, f.path) for f in rows] == [(f.kind, f.path) for f in _sessions(fresh, fresh.home)[1]]
    assert {f.kind for f in rows} == {"future-stamp"}
