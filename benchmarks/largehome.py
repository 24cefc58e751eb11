"""A large home written directly in the store's own format — what years of use on several machines
leave behind: the view, one shard per host, a session file per session. Shared by the benchmarks."""

from __future__ import annotations

import time
from pathlib import Path

from subconscious.state.clock import Stamp
from subconscious.state.conflicts.filemerge import SESSION, SHARD, VIEW, render
from subconscious.state.records import SessionState


def write_large_home(home: Path, *, conversations: int, sessions: int, hosts: int,
                     agent_id: str = "agent-00000000-0000-4000-8000-000000000000") -> Path:
    """Write it under ``home/.letta/claude`` and return that state dir."""
    state = home / ".letta" / "claude"
    (state / "hosts").mkdir(parents=True)
    now = int(time.time() * 1000)
    per_host: dict[str, dict] = {f"host{h}": {} for h in range(hosts)}
    view = {}
    for i in range(conversations):
        host = f"host{i % hosts}"
        entry = {"agentId": agent_id, "conversationId": f"conv-{i:06d}", "hlc": f"{now - i}:0", "host": host}
        per_host[host][f"sess-{i:06d}"] = entry
        view[f"sess-{i:06d}"] = entry
    for host, convs in per_host.items():
        shard = {"format": 1, "host": host, "name": host, "clock": Stamp(now, 0).encode(), "written": now,
                 "conversations": convs, "settings": {}}
        (state / "hosts" / f"{host}.json").write_text(render(SHARD, shard))
    (state / "conversations.json").write_text(render(VIEW, view))
    for i in range(sessions):
        s = SessionState(f"sess-{i:06d}", conversation_id=f"conv-{i:06d}", last_processed_index=i,
                         host=f"host{i % hosts}", stamp=Stamp(now - i, 0))
        (state / f"session-sess-{i:06d}.json").write_text(render(SESSION, s.to_json()))
    return state
