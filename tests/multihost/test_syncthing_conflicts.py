"""Real Syncthing pair on loopback: propagation, ignore rules, and real conflict copies
whose names subconscious.state.copynames must recognise."""

from __future__ import annotations

import json
import os
import time

import pytest

from subconscious.state import copynames as conflicts
from subconscious.state.copynames import ConflictCopy, Engine, TempFile
from tests.harness.syncthing import SyncthingPair, install_seconds

pytestmark = pytest.mark.syncthing


def _write(path, obj, mtime: float | None = None) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(obj, sort_keys=True, indent=1) + "\n"
    path.write_text(text)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return text


def _copies(pair: SyncthingPair, side: str, sub: str = "") -> list[str]:
    d = pair.dir(side) / sub if sub else pair.dir(side)
    return sorted(n for n in os.listdir(d) if ".sync-conflict-" in n)


def test_file_written_on_one_side_appears_on_the_other(syncthing_pair: SyncthingPair) -> None:
    pair = syncthing_pair
    text = _write(pair.a_dir / "conversations.json", {"s1": {"conversationId": "c-1"}})
    t_watch = pair.wait_file("B", "conversations.json", text)  # fs watcher only, no nudge
    assert json.loads((pair.b_dir / "conversations.json").read_text()) == {"s1": {"conversationId": "c-1"}}

    # and back, nudged with a scan as a tool would after writing
    text_b = _write(pair.b_dir / "hosts" / "hostB.json", {"host": "hostB"})
    t0 = time.monotonic()
    pair.scan("B", "hosts/hostB.json")
    pair.wait_file("A", "hosts/hostB.json", text_b)
    t_scan = time.monotonic() - t0
    pair.wait_in_sync()
    installed = install_seconds()
    print(f"\n[syncthing] apt install {'not needed' if installed is None else f'{installed:.1f}s'}; "
          f"pair start {pair.timings['start']:.2f}s; propagation A->B via watcher "
          f"{t_watch:.2f}s; B->A with scan nudge {t_scan:.3f}s")


def test_our_temp_and_lock_files_are_not_synced(syncthing_pair: SyncthingPair) -> None:
    """The sync/stignore template (installed by the harness) keeps them on their host."""
    pair = syncthing_pair
    (pair.a_dir / ".subconscious-tmp-123-abc").write_text("half-written")
    (pair.a_dir / "hosts").mkdir()
    (pair.a_dir / "hosts" / ".subconscious-tmp-9").write_text("half-written")
    (pair.a_dir / "state.lock").write_text("hostA pid=1")
    marker = _write(pair.a_dir / "session-after.json", {"written": "after the temp files"})
    pair.scan("A")
    pair.wait_file("B", "session-after.json", marker)
    pair.wait_in_sync()
    assert (pair.b_dir / "hosts").is_dir()  # the directory itself syncs...
    assert not (pair.b_dir / ".subconscious-tmp-123-abc").exists()  # ...our temps never do
    assert not (pair.b_dir / "hosts" / ".subconscious-tmp-9").exists()
    assert not (pair.b_dir / "state.lock").exists()


def test_concurrent_edits_make_real_conflict_copies_that_classify_recognises(
        syncthing_pair: SyncthingPair) -> None:
    pair = syncthing_pair
    files = ["conversations.json", "session-x.json", "session-a_b-c.json", "hosts/hostA.json"]
    for f in files:
        _write(pair.a_dir / f, {"base": f})
    pair.scan("A")
    for f in files:
        pair.wait_file("B", f)
    pair.wait_in_sync()

    pair.cut()
    now = time.time()
    for f in files:  # A edits first (older mtime: loses), B later (newer mtime: wins)
        _write(pair.a_dir / f, {"edit": "from A", "file": f}, mtime=now - 60)
        _write(pair.b_dir / f, {"edit": "from B", "file": f}, mtime=now - 30)
    pair.scan("A")
    pair.scan("B")
    t0 = time.monotonic()
    pair.restore()
    pair.wait_for(lambda: all(len(_copies(pair, s)) == 3 and len(_copies(pair, s, "hosts")) == 1
                              for s in ("A", "B")),
                  "a conflict copy of each file on both sides")
    t_copy = time.monotonic() - t0
    pair.wait_in_sync()
    print(f"\n[syncthing] conflict copies on both sides {t_copy:.2f}s after restore()")

    for side in ("A", "B"):
        root = pair.dir(side)
        for where, d in (("root", root), ("hosts", root / "hosts")):
            listing = os.listdir(d)
            found = conflicts.conflicts_by_original(listing, where=where)
            expected = [f.split("/")[-1] for f in files if (f.startswith("hosts/") == (where == "hosts"))]
            assert sorted(found) == sorted(expected), (side, where, listing)
            for original, copies in found.items():
                assert len(copies) == 1
                c = copies[0]
                assert isinstance(c, ConflictCopy)
                assert c.engine is Engine.SYNCTHING and not c.weak and not c.ambiguous
                # the id is the device that made the WINNING version (B, newer mtime)
                assert c.device == pair.b.short_id
                assert c.date is not None and c.time is not None
                # the loser's content is in the copy; the winner kept the name
                assert json.loads((d / c.name).read_text())["edit"] == "from A"
                assert json.loads((d / original).read_text())["edit"] == "from B"
                assert conflicts.classify(c.name, listing, where=where) == c
            # nothing else in the directory is mistaken for a conflict copy
            for name in listing:
                if ".sync-conflict-" not in name:
                    assert not isinstance(conflicts.classify(name, listing, where=where), ConflictCopy), name
        assert _copies(pair, "A") == _copies(pair, "B")  # the same copy synced to both sides


def test_names_syncthing_really_uses_while_pulling_are_temporary(syncthing_pair: SyncthingPair) -> None:
    """Watch B's folder with inotify while it pulls: every name that appears is one of
    our originals or a Syncthing temp file -- never taken for a conflict copy."""
    from watchdog.events import FileSystemEventHandler
    from watchdog.observers.inotify import InotifyObserver

    pair = syncthing_pair
    seen: set[str] = set()

    class Rec(FileSystemEventHandler):
        def on_any_event(self, event) -> None:  # noqa: ANN001
            for attr in ("src_path", "dest_path"):
                p = getattr(event, attr, "")
                if p:
                    seen.add(os.path.basename(p))

    obs = InotifyObserver()
    obs.schedule(Rec(), str(pair.b_dir), recursive=False)
    obs.start()
    try:
        texts = {f"session-big{i}.json": _write(pair.a_dir / f"session-big{i}.json", {"blob": str(i) * 2_000_000})
                 for i in range(3)}
        pair.scan("A")
        for name, text in texts.items():
            pair.wait_file("B", name, text)
        pair.wait_in_sync()
    finally:
        obs.stop()
        obs.join(10)
    temps = sorted(n for n in seen if n.startswith(".syncthing."))
    assert temps, f"saw no Syncthing temp file while pulling 6 MB: {sorted(seen)}"
    for name in seen:
        got = conflicts.classify(name, seen)
        if name in texts:
            assert got is None
        elif name.startswith(".syncthing."):
            assert isinstance(got, TempFile) and got.owner == "syncthing" and got.target in texts, name
        else:
            assert not isinstance(got, ConflictCopy), name
    # nothing lingers once in sync
    assert not [n for n in os.listdir(pair.b_dir) if n.startswith(".syncthing.")]
