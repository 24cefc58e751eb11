"""The per-tool hook imports only what its path needs (behaviour, not timing: which modules a real hook
process loads). Inside the fetch TTL a PreToolUse reads stdin and one machine-local file; it must not load
the store, the Letta clients, logging, platformdirs or dataclasses — everything beyond what ``json``
needs is a cost paid on every tool call of every session."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from subconscious.local import claims

ROOT = Path(__file__).resolve().parents[2]
# A hook process as the console script starts it, reporting the modules it loaded beyond the interpreter's
# own (those already in sys.modules when the script begins are not the hook's).
DUMP = """
import atexit, os, sys
before = set(sys.modules)
def dump():
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, "\\n".join(sorted(set(sys.modules) - before)).encode())
    os.close(fd)
atexit.register(dump)
{body}
"""
HOOK = "from subconscious.cli import main\nsys.exit(main(sys.argv[2:]))"
ALLOWED_OURS = {"subconscious", "subconscious.cli", "subconscious.hotpath", "subconscious.base", "subconscious.base.fastjson",
                "subconscious.hooks", "subconscious.hooks.hotentry", "subconscious.hooks.hotinput"}
NEVER = {"subconscious.state.store.core", "subconscious.hooks.run", "subconscious.hooks.pipeline", "subconscious.local.identity",
         "subconscious.letta.lite", "subconscious.letta.client", "httpx", "logging", "platformdirs", "dataclasses",
         "argparse", "pathlib", "socket", "urllib.request", "subconscious.local.claims"}


def loaded(tmp: Path, body: str, argv: list[str], stdin: str, env: dict) -> tuple[set[str], subprocess.CompletedProcess]:
    out = tmp / f"modules-{uuid.uuid4().hex[:6]}.txt"
    proc = subprocess.run([sys.executable, "-c", DUMP.format(body=body), str(out), *argv], input=stdin,
                          capture_output=True, text=True, env=env, cwd=str(tmp), timeout=60)
    assert proc.returncode == 0, proc.stderr
    return set(out.read_text().split()), proc


def hook_env(tmp: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "CLAUDE"))}
    env.update(PYTHONPATH=str(ROOT), HOME=str(tmp / "user"), SUBCONSCIOUS_STATE_DIR=str(tmp / "local"),
               LETTA_HOME=str(tmp / "shared"), SUBCONSCIOUS_HOST="laptop", LETTA_BASE_URL="http://127.0.0.1:9",
               **extra)
    return env


def test_pre_tool_use_within_the_ttl_loads_only_json_beyond_the_interpreter(tmp_path):
    sid = str(uuid.uuid4())
    local = tmp_path / "local"
    # a fetch began just now, recorded as every fetching hook records it
    assert claims.take_fetch(local / "shown", sid, 0, int(time.time() * 1000))
    before = claims.state(local / "shown", sid)["fetch_ms"]
    env = hook_env(tmp_path, SUBCONSCIOUS_FETCH_TTL="3600")
    data = json.dumps({"session_id": sid, "hook_event_name": "PreToolUse", "cwd": str(tmp_path),
                       "tool_name": "Read", "tool_input": {"file_path": "/etc/hostname"}})

    mods, proc = loaded(tmp_path, HOOK, ["hook", "pre-tool-use"], data, env)
    json_mods, _ = loaded(tmp_path, "import json", [], "", env)

    assert proc.stdout == "" and proc.stderr == ""
    ours = {m for m in mods if m == "subconscious" or m.startswith("subconscious.")}
    assert ours <= ALLOWED_OURS, sorted(ours - ALLOWED_OURS)
    others = mods - ours - {"__future__"}
    assert others <= json_mods, f"beyond what json needs: {sorted(others - json_mods)}"
    assert not mods & NEVER, sorted(mods & NEVER)
    assert claims.state(local / "shown", sid)["fetch_ms"] == before  # it only looked: no fetch was taken
    assert not (local / "logs").exists()  # nothing to log, so no log set up


def test_the_ttl_over_runs_the_full_hook(tmp_path):
    """The other side of the shortcut: once the TTL is over, the hook takes the fetch (the claims file's
    fetch time moves) — it did not stay on the cheap path."""
    sid = str(uuid.uuid4())
    local = tmp_path / "local"
    assert claims.take_fetch(local / "shown", sid, 0, int(time.time() * 1000) - 10_000)
    before = claims.state(local / "shown", sid)["fetch_ms"]
    env = hook_env(tmp_path, SUBCONSCIOUS_FETCH_TTL="5")
    data = json.dumps({"session_id": sid, "hook_event_name": "PreToolUse", "cwd": str(tmp_path)})

    mods, proc = loaded(tmp_path, HOOK, ["hook", "pre-tool-use"], data, env)

    assert proc.stdout == ""
    assert claims.state(local / "shown", sid)["fetch_ms"] > before
    assert "subconscious.hooks.events.pre_tool" in mods


def test_the_shortcut_finds_the_state_dir_platformdirs_finds(tmp_path):
    """Without SUBCONSCIOUS_STATE_DIR the shortcut must read the same claims file the full path writes."""
    from subconscious.hotpath import state_dir
    from subconscious.local.identity import default_state_dir

    saved = {k: os.environ.get(k) for k in ("XDG_STATE_HOME", "HOME")}
    try:
        for xdg in (None, "", str(tmp_path / "xdg"), "relative/xdg"):
            os.environ["HOME"] = str(tmp_path / "home")
            if xdg is None:
                os.environ.pop("XDG_STATE_HOME", None)
            else:
                os.environ["XDG_STATE_HOME"] = xdg
            env = {k: v for k, v in os.environ.items() if k != "SUBCONSCIOUS_STATE_DIR"}
            found = state_dir(env)
            if sys.platform.startswith("linux") or sys.platform == "darwin":
                assert found == str(default_state_dir().absolute()), xdg
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
