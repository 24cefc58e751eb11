"""Real rclone bisync (Debian's 1.60) between two machines' homes with a real `subconscious watch` on
each: sessions on both machines between syncs, then more syncs. The views must settle.

bisync 1.60-1.65 renames BOTH versions of a file changed on both sides (``<name>..path1``/``..path2``,
even when the two are byte-identical with equal mtimes: measured) and leaves no ``<name>``. A view
that every machine rebuilds is such a file: with the old filters (temp files only) the watchers fold
the copies, both rebuild ``conversations.json``, and the next bisync renames both away again, forever.
The kit's filters now keep the views out of bisync and ``watch --rebuild-views`` writes each
machine's own views from the synced host shards (docs/sync-rclone.md). The settle test with the
old filters (``filters=LEGACY_RCLONE_FILTERS``) goes red: bisync renames both views on the quiet runs."""

from __future__ import annotations

import json
import time

from tests.harness.filesync import RcloneBisync, tree
from tests.multihost.test_engines_end_to_end import copies_on, doctor, finish, machine
from tests.multihost.watchproc import Side, WatchProc

VIEW = "conversations.json"
SHARED = "first-00"  # the session both machines continue


def view_of(side: Side) -> dict:
    try:
        return json.loads((side.state / VIEW).read_text())
    except (FileNotFoundError, ValueError):  # missing, or caught between truncate and write (not ours)
        return {}


def cursor_in_view(side: Side, sid: str) -> int | None:
    try:
        return json.loads((side.state / f"session-{sid}.json").read_text()).get("lastProcessedIndex")
    except (FileNotFoundError, ValueError):
        return None


def settled(sides: list[Side], written: list[str], cursor: int) -> bool:
    """Every session in every machine's conversations.json (what upstream reads), the shared session's
    view at the highest cursor delivered, no conflict copies."""
    return all(set(written) <= set(view_of(s)) and cursor_in_view(s, SHARED) == cursor and not copies_on(s)
               for s in sides)


def wait_settled(sides: list[Side], written: list[str], cursor: int, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if settled(sides, written, cursor):
            return
        time.sleep(0.1)
    raise AssertionError(f"{what}: the views did not settle: " + "; ".join(
        f"{s.host}: view has {len(set(written) & set(view_of(s)))}/{len(written)}, {SHARED} at "
        f"{cursor_in_view(s, SHARED)} (want {cursor}), copies {sorted(copies_on(s))}" for s in sides))


def run_machines(laptop: Side, desktop: Side, n: int) -> tuple[list[str], int]:
    base = 100 * (n + 1)
    written = finish([
        machine(laptop, "--prefix", f"lap{n}", "--sessions", "2", "--resume", SHARED, "--cursor-base", str(base)),
        machine(desktop, "--prefix", f"desk{n}", "--sessions", "2", "--resume", SHARED, "--cursor-base", str(base + 50)),
    ])
    return written, base + 50 + 2 * 7 + 3  # the machine's last step on the shared session


def test_bisync_with_watch_rebuilding_views_on_both_machines_settles(tmp_path):
    t0 = time.monotonic()
    laptop, desktop = Side(tmp_path, "laptop"), Side(tmp_path, "desktop")
    sides = [laptop, desktop]
    for s in sides:
        s.letta_home.mkdir(mode=0o700)
    link = RcloneBisync(laptop.letta_home, desktop.letta_home, tmp_path / "rclone-work")  # the kit's filters
    written = finish([machine(laptop, "--prefix", "first", "--sessions", "1")])
    link.sync()  # --resync
    watchers = [WatchProc(s, "--debounce", "0.1", "--no-gc", "--rebuild-views") for s in sides]
    try:
        cursor = 3 * 5 - 1
        wait_settled(sides, written, cursor, "after the first sync")
        for n in range(3):  # apart: both machines start sessions and continue the shared one; then a sync
            more, cursor = run_machines(laptop, desktop, n)
            written += more
            link.sync()
            wait_settled(sides, written, cursor, f"after round {n + 1}'s sync")
        views = {s.host: (s.state / VIEW).read_bytes() for s in sides}
        for n in range(3):  # nothing new: further syncs must not take the views away again
            link.sync()
            wait_settled(sides, written, cursor, f"after quiet sync {n + 1}")
        assert "..path1" not in "\n".join(link.log[-3:]), link.log[-1]  # no rename-both on any quiet run
        for s in sides:
            assert (s.state / VIEW).read_bytes() == views[s.host]  # not rewritten by the quiet syncs
    finally:
        codes = [w.stop() for w in watchers]
    assert codes == [0, 0], [w.lines for w in watchers]
    assert views["laptop"] == views["desktop"]  # identical sources, the same view on both machines
    shards = {s.host: {p: b for p, b in tree(s.state).items() if p.startswith("hosts/")} for s in sides}
    assert shards["laptop"] == shards["desktop"]
    for s in sides:
        r = doctor(s)
        assert r.returncode == 0, r.stdout
    print(f"rclone + 2 watchers: {len(written)} sessions, {link.runs} syncs ({link.seconds:.1f} s in rclone), "
          f"{time.monotonic() - t0:.1f} s in all; views rebuilt by watch on both machines, 0 renamed")


def test_the_kits_filters_keep_the_views_out_and_the_shards_in(tmp_path):
    """What the real rclone includes with the kit's filters, whether bisync's root is LETTA_HOME or the
    state dir itself: every shard (hosts/…, also a host's session files), none of the views."""
    import subprocess

    from tests.harness.filesync import RCLONE_FILTERS, require

    state = tmp_path / "home" / ".letta" / "claude"
    files = ["conversations.json", "session-abc.json", "hosts/h1.json", "hosts/h1/session-abc.json",
             "backups/2026-01-01/h1/conversations.json..path1", ".subconscious-tmp-view-x"]
    for rel in files:
        (state / rel).parent.mkdir(parents=True, exist_ok=True)
        (state / rel).write_text("{}")
    want = {"hosts/h1.json", "hosts/h1/session-abc.json", "backups/2026-01-01/h1/conversations.json..path1"}
    for root, prefix in ((tmp_path / "home", ".letta/claude/"), (state, "")):
        r = subprocess.run([require("rclone"), "lsf", "-R", "--files-only", "--config", "/dev/null",
                            "--filter-from", str(RCLONE_FILTERS), str(root)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert set(r.stdout.split()) == {prefix + p for p in want}, (root, r.stdout)
