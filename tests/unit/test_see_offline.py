"""`sessions` and `messages` with the Letta server down: the state files' facts are still shown, the first
session's error says why, the others are not retried against a server that did not answer, and
`sessions --offline` makes no call at all."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

from subconscious.state.records import SessionState
from subconscious.state.store.core import Store


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_with_the_server_down_the_state_is_still_shown_and_the_server_asked_once(tmp_path):
    state = tmp_path / "lh" / ".letta" / "claude"
    for host, sid, cursor in (("laptop", "s-one", 4), ("desktop", "s-two", 9)):
        store = Store(state, host, tmp_path / host / "locks", tmp_path / host / "clocks")
        store.put_conversation(sid, f"conv-{sid}", "agent-1")
        store.update_session(sid, lambda cur, sid=sid, cursor=cursor: SessionState(
            sid, conversation_id=f"conv-{sid}", last_processed_index=cursor, started_at="2026-12-01T09:00:00.000Z"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "CLAUDE"))}
    env.update(LETTA_HOME=str(tmp_path / "lh"), SUBCONSCIOUS_HOST="laptop", SUBCONSCIOUS_STATE_DIR=str(tmp_path / "laptop"),
               LETTA_BASE_URL=f"http://127.0.0.1:{closed_port()}", HOME=str(tmp_path))

    def run(*args):
        out = subprocess.run([sys.executable, "-m", "subconscious", *args], capture_output=True, text=True, env=env,
                             timeout=60, cwd=tmp_path)
        assert "Traceback" not in out.stderr, out.stderr
        return out

    data = json.loads(run("sessions", "--json").stdout)
    rows = {r["session"]: r for r in data["sessions"]}
    assert {s: (r["host"], r["cursor"], r["conversation"]) for s, r in rows.items()} == {
        "s-one": ("laptop", 4, "conv-s-one"), "s-two": ("desktop", 9, "conv-s-two")}
    first, second = data["errors"]
    assert "cannot connect" in first["error"] and second["error"].startswith("not read")
    assert json.loads(run("sessions", "--json", "--offline").stdout)["errors"] == []

    msgs = run("messages", "--json")
    assert msgs.returncode == 1  # nothing could be read
    out = json.loads(msgs.stdout)
    assert out["messages"] == [] and [e["session"] for e in out["errors"]] == ["s-one", "s-two"]
    assert "cannot connect" in out["errors"][0]["error"] and out["errors"][1]["error"].startswith("not read")
