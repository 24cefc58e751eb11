"""The machine's listing cache (state/listcache.py) is read on every hook: a FIFO in its place must not
hang the hook, a link must not be followed (its target read as our cache), and a huge file is not read.
Each case falls back to listing the directories, so the read still finds every session."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from subconscious.state.sessions.listcache import ListingCache
from subconscious.state.records import SessionState
from subconscious.state.store.core import Store


def _home(tmp_path):
    home = tmp_path / "claude"
    store = Store(home, "h1", tmp_path / "local" / "locks", tmp_path / "local" / "clocks")
    store.update_session("s1", lambda cur: (cur or SessionState("s1")).evolve(last_processed_index=7))
    return home, ListingCache(store.fs, home, tmp_path / "local" / "cache")


def test_a_fifo_in_place_of_the_cache_does_not_hang_a_read(tmp_path):
    home, cache = _home(tmp_path)
    cache.path.parent.mkdir(parents=True, exist_ok=True)
    if cache.path.exists():
        cache.path.unlink()
    os.mkfifo(cache.path)
    code = ("import sys; from pathlib import Path; from subconscious.state.store.core import Store; "
            f"s = Store(Path({str(home)!r}), 'h1', Path({str(tmp_path / 'local' / 'locks')!r}), "
            f"Path({str(tmp_path / 'local' / 'clocks')!r}), read_only=True); "
            "print(s.session('s1').last_processed_index)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "7"


def test_a_link_in_place_of_the_cache_is_not_followed(tmp_path):
    home, cache = _home(tmp_path)
    elsewhere = tmp_path / "planted.json"
    elsewhere.write_text(json.dumps({"format": 1, "dirs": {".": {"token": [0], "trusted": True, "names": ["x"]}}}))
    cache.path.parent.mkdir(parents=True, exist_ok=True)
    if cache.path.exists():
        cache.path.unlink()
    cache.path.symlink_to(elsewhere)
    assert cache._load() == {}


def test_a_huge_cache_file_is_not_read(tmp_path, monkeypatch):
    from subconscious.state.sessions import listcache

    home, cache = _home(tmp_path)
    cache.path.parent.mkdir(parents=True, exist_ok=True)
    cache.path.write_text(json.dumps({"format": 1, "dirs": {"hosts": {"token": [1], "trusted": True, "names": []}}}))
    monkeypatch.setattr(listcache, "CAP", 10)
    assert cache._load() == {}


def test_a_cache_directory_that_is_a_link_is_neither_read_nor_written(tmp_path):
    """The machine-local cache directory replaced by a link (to a directory someone else can write): the
    listing cache found there, which says the home holds no copy, is not believed — the hook's read still
    merges the conflict copy that holds the newer cursor — and nothing is written through the link."""
    from subconscious.state.copynames import Engine, make_copy_name

    home, cache = _home(tmp_path)
    view = home / "session-s1.json"
    newer = dict(json.loads(view.read_bytes()), lastProcessedIndex=9, host="h2")
    wall, count = newer["hlc"].split(":")
    newer["hlc"] = f"{int(wall) + 5}:{count}"
    (home / make_copy_name(Engine.DROPBOX, view.name)).write_text(json.dumps(newer))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    planted = elsewhere / cache.path.name
    token = list(cache.fs.listing_token(home))
    lie = json.dumps({"format": 1, "dirs": {".": {"token": token, "trusted": True, "names": [], "count": 2}}})
    planted.write_text(lie)
    for p in cache.path.parent.iterdir() if cache.path.parent.is_dir() else ():
        p.unlink()
    if cache.path.parent.is_dir():
        cache.path.parent.rmdir()
    cache.path.parent.symlink_to(elsewhere)
    store = Store(home, "h1", tmp_path / "local" / "locks", tmp_path / "local" / "clocks", read_only=True)
    assert store.session("s1").last_processed_index == 9
    planted.unlink()
    store.refresh_listings()
    assert os.listdir(elsewhere) == []
