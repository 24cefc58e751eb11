"""gc with the real Letta server and real hook processes on two machines (tests/harness/machines.py: each its
own SUBCONSCIOUS_HOST and state dir, one shared home). Issue 23: the desktop's gc retired a session the laptop
had delivered to seconds earlier (in use meant only the desktop's own locks), and the laptop's next Stop then
made a new conversation and sent the turn again. Now: in use comes from every host's stamps, and a session
gc did retire keeps its conversation and cursor when it comes back."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.harness.hooks import conversation_messages
from tests.harness.machines import Machine, machine_env, reader, shared_state
from tests.integration.test_pipeline_letta import texts_of

pytestmark = pytest.mark.letta


def _users(base_url: str, conv: str) -> list[str]:
    return texts_of(conversation_messages(base_url, conv), "user_message")


def _gc_later(env: dict, minutes: int) -> dict:
    """``gc --older-than 0d --trust-clock`` on the desktop as it would run ``minutes`` from now (a real
    process, the desktop's own runtime; only the plan's clock is moved)."""
    code = ("import json, time\nfrom subconscious.local.runtime import runtime\nfrom subconscious.sync.gc import run_gc\n"
            "rt = runtime()\n"
            f"r = run_gc(rt.store(), rt.local.root, age_ms=0, now_ms=int(time.time() * 1000) + {minutes} * 60_000, "
            "trust_clock=True)\nprint(json.dumps(r.to_json()))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_the_desktops_gc_keeps_what_the_laptop_delivered_seconds_ago_and_a_retired_session_keeps_its_conversation(
        tmp_path, letta_server, letta_agent, letta_env, fake_llm):
    laptop = Machine(tmp_path, machine_env(tmp_path, letta_env, "laptop", letta_agent["id"], mode="whisper"), "webapp")
    desktop_env = machine_env(tmp_path, letta_env, "desktop", letta_agent["id"], mode="whisper")
    desktop = Machine(tmp_path, desktop_env, "webapp")
    sid = laptop.sid
    laptop.start()
    laptop.turn("TURN-1: the build uses make")
    conv = reader(tmp_path).conversation(sid).conversation_id

    # the desktop (which never ran this session, so no local lock of its own says "in use") retires every
    # session not in use: the laptop wrote to this one seconds ago, so it is in use
    out = desktop.json("gc", "--older-than", "0d")
    assert sid not in [r["session"] for r in out["retire"]]
    assert reader(tmp_path).session(sid).conversation_id == conv and reader(tmp_path).conversation(sid) is not None
    laptop.turn("TURN-2: deploy with fly")

    # 11 minutes later the session is idle everywhere: the desktop's gc retires it; the retirement record
    # (the tombstone) keeps its conversation and cursor
    out = _gc_later(desktop_env, 11)
    assert sid in [r["session"] for r in out["retire"]]
    assert reader(tmp_path).session(sid) is None and reader(tmp_path).conversation(sid) is None
    cursor = laptop.tr.line_count() - 1
    assert reader(tmp_path).retired_conversation(sid) == {"conversationId": conv, "agentId": letta_agent["id"],
                                                          "cursor": cursor}

    # the user goes on in that session on the laptop: its next Stop brings it back in the same conversation,
    # and only the new turn is sent
    laptop.turn("TURN-3: the staging step comes first")
    assert reader(tmp_path).session(sid).conversation_id == conv
    assert reader(tmp_path).conversation(sid).conversation_id == conv
    users = _users(letta_server.base_url, conv)
    for turn in ("TURN-1", "TURN-2", "TURN-3"):
        assert sum(turn in u for u in users) == 1, (turn, users)
    assert sum("<claude_code_session_start>" in u for u in users) == 1
    assert not (shared_state(tmp_path) / "budget").exists()  # no cap set: nothing counted
    del desktop
