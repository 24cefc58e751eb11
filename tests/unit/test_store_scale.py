"""What keeps hook latency flat as a home grows (benchmarks/scale_bench.py has the figures), guarded
structurally, not by timing: the files each operation reads, counted at the store's FS seam.

- a session's state is read from that session's files alone: never conversations.json, never a shard;
- PreToolUse within the fetch TTL reads nothing of the shared home at all;
- fold_all reads every copy of the view once, and the view and the shards no more than its one write
  needs (the read, and publish's check of the bytes it replaces)."""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from subconscious.state.copynames import Engine, make_copy_name
from subconscious.state.fs import READ_CAP, RealFS
from subconscious.state.records import SessionState
from subconscious.state.store.core import Store

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from largehome import write_large_home  # noqa: E402

SID = "scale-session-1"


class CountingFS(RealFS):
    def __init__(self) -> None:
        super().__init__()
        self.reads: Counter[str] = Counter()  # by name (hosts/<name> for shards)
        self.paths: Counter[Path] = Counter()

    def read(self, path: Path, cap: int = READ_CAP):
        path = Path(path)
        self.reads[path.name if path.parent.name != "hosts" else f"hosts/{path.name}"] += 1
        self.paths[path] += 1
        return super().read(path, cap)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    state = write_large_home(tmp_path / "lh", conversations=2000, sessions=50, hosts=3)
    store = Store(state, "host0", tmp_path / "l" / "locks", tmp_path / "l" / "clocks")
    store.put_conversation(SID, "conv-1", "agent-1")
    store.update_session(SID, lambda cur: SessionState(SID, conversation_id="conv-1", last_processed_index=3))
    return state


def test_a_session_read_and_write_never_open_the_conversations_map(home: Path, tmp_path: Path):
    fs = CountingFS()
    store = Store(home, "host0", tmp_path / "l" / "locks", tmp_path / "l" / "clocks", fs=fs)
    assert store.session(SID).last_processed_index == 3
    store.update_session(SID, lambda cur: cur.evolve(last_processed_index=9))
    assert store.session(SID).last_processed_index == 9
    touched = {name for name in fs.reads if name == "conversations.json" or name.startswith("hosts/")}
    assert touched == set(), f"a session's state read the conversations map: {touched}"
    others = {p for p in fs.paths if SID not in p.name and p.parent != tmp_path / "l" / "clocks"}
    assert others == set(), f"a session's state read files of no session: {others}"


def test_pre_tool_use_within_the_ttl_reads_nothing_shared(home: Path, tmp_path: Path, monkeypatch):
    from subconscious.local import sessions as localsession
    from subconscious.hooks.events import pre_tool
    from subconscious.hooks.run import HookEvent
    from subconscious.hooks.pipeline import Skip

    local = tmp_path / "local"
    monkeypatch.setenv("LETTA_HOME", str(home.parents[1]))
    monkeypatch.setenv("SUBCONSCIOUS_STATE_DIR", str(local))
    monkeypatch.setenv("SUBCONSCIOUS_HOST", "host0")
    monkeypatch.setenv("SUBCONSCIOUS_FETCH_TTL", "3600")
    monkeypatch.setenv("LETTA_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("LETTA_MODE", "whisper")
    state = localsession.load(local / "sessions", SID)
    state.last_fetch_ms = int(time.time() * 1000)
    localsession.save(local / "sessions", state)
    event = HookEvent("pre-tool-use", {"session_id": SID, "cwd": str(tmp_path)})
    try:  # the fetch before the timed one (wherever the TTL is kept, this one starts it)
        pre_tool.handle(event)
    except Exception:  # noqa: BLE001 - no server: this fetch fails, or skips as fresh
        pass
    reads: list[Path] = []
    real_read = RealFS.read
    monkeypatch.setattr(RealFS, "read", lambda self, path, cap=READ_CAP: (reads.append(Path(path)), real_read(self, path, cap))[1])
    with pytest.raises(Skip):
        pre_tool.handle(event)
    shared = [p for p in reads if home in p.parents or p == home]
    assert shared == [], f"PreToolUse within the TTL read the shared home: {shared}"


def test_fold_all_reads_each_copy_once(home: Path, tmp_path: Path):
    view = (home / "conversations.json").read_bytes()
    names = [make_copy_name(Engine.SYNCTHING, "conversations.json"),
             make_copy_name(Engine.DROPBOX, "conversations.json"),
             make_copy_name(Engine.NEXTCLOUD, "conversations.json")]
    for i, name in enumerate(names):
        (home / name).write_bytes(view.replace(b'"conv-000001"', f'"conv-000001-{i}"'.encode()))
    fs = CountingFS()
    store = Store(home, "host0", tmp_path / "l" / "locks", tmp_path / "l" / "clocks", fs=fs)
    assert store.fold_all()["conversations"] == 3
    for name in names:
        assert fs.paths[home / name] == 1, (name, fs.paths)
    assert fs.paths[home / "conversations.json"] <= 2, fs.paths  # the read, and publish's check before its swap
    for host in ("host1", "host2"):
        assert fs.paths[home / "hosts" / f"{host}.json"] == 1, fs.paths
    assert fs.paths[home / "hosts" / "host0.json"] <= 2, fs.paths
