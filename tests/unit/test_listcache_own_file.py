"""The machine's listing cache (state/listcache.py) is read on every hook: a FIFO in its place must not
hang the hook, a link must not be followed (its target read as our cache), and a huge file is not read.
Each case falls back to listing the directories, so the read still finds every session."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from subconscious.state.listcache import ListingCache
from subconscious.state.records import SessionState
from subconscious.state.store import Store


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
    code = ("import sys; from pathlib import Path; from subconscious.state.store import Store; "
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
    from subconscious.state import listcache

    home, cache = _home(tmp_path)
    cache.path.parent.mkdir(parents=True, exist_ok=True)
    cache.path.write_text(json.dumps({"format": 1, "dirs": {"hosts": {"token": [1], "trusted": True, "names": []}}}))
    monkeypatch.setattr(listcache, "CAP", 10)
    assert cache._load() == {}
