"""The systemd user unit and the launchd agent start `subconscious watch` the way the service managers
do (their command line, their environment variables, SIGTERM to stop), and it runs and stops cleanly."""

from __future__ import annotations

import os
import plistlib
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from subconscious.state.conflicts import Engine, make_copy_name
from subconscious.state.store import Store

REPO = Path(__file__).resolve().parents[2]
UNIT = REPO / "deploy" / "systemd" / "subconscious-watch.service"
AGENT = REPO / "deploy" / "launchd" / "dev.subconscious.watch.plist"


def unit_sections(text: str) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    section = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = out.setdefault(line[1:-1], {})
        else:
            key, _, value = line.partition("=")
            section[key.strip()] = value.strip()  # type: ignore[index]
    return out


def run_like_a_service_manager(argv: list[str], env_vars: dict[str, str], tmp: Path) -> None:
    """Start the command with only the unit's environment (plus a PATH), make a copy appear, stop it
    with SIGTERM as systemd and launchd do, and check that it folded and exited 0."""
    letta_home = Path(env_vars["LETTA_HOME"])
    local = tmp / "local"
    state = letta_home / ".letta" / "claude"
    store = Store(state, "alpha", local / "locks", local / "clocks")
    store.put_conversation("s1", "conv-1", "agent-1")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp), "SUBCONSCIOUS_HOST": "alpha",
           "SUBCONSCIOUS_STATE_DIR": str(local), **env_vars}
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 30
        copy = state / make_copy_name(Engine.DROPBOX, "conversations.json")
        time.sleep(1.0)
        shutil.copyfile(store.view_path, copy)
        while copy.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not copy.exists(), "the service did not fold the copy"
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0, out
    assert "folded 1 conflict copy" in out and "stopped" in out


def test_the_systemd_unit_runs_watch_and_stops_cleanly(tmp_path):
    unit = unit_sections(UNIT.read_text())
    service = unit["Service"]
    assert unit["Install"]["WantedBy"] == "default.target"  # a user unit
    assert service["KillSignal"] == "SIGTERM" and service["Restart"] == "on-failure"
    assert service["EnvironmentFile"].startswith("-%h/")  # optional env file holding LETTA_HOME
    argv = service["ExecStart"].replace("%h", str(tmp_path)).split()
    assert argv[1:] == ["watch"] and Path(argv[0]).name == "subconscious"
    argv[0] = shutil.which("subconscious") or sys.executable
    if argv[0] == sys.executable:
        argv[1:1] = ["-m", "subconscious"]
    env_file = tmp_path / "watch.env"
    env_file.write_text(f"LETTA_HOME={tmp_path / 'sync' / 'letta'}\n")
    env_vars = dict(line.split("=", 1) for line in env_file.read_text().splitlines())
    run_like_a_service_manager(argv, env_vars, tmp_path)


def test_the_launchd_agent_runs_watch_and_stops_cleanly(tmp_path):
    agent = plistlib.loads(AGENT.read_bytes())
    assert agent["Label"] == "dev.subconscious.watch" and agent["RunAtLoad"] is True
    assert agent["KeepAlive"] == {"SuccessfulExit": False}  # restarted only after a failure
    argv = list(agent["ProgramArguments"])
    assert argv[1:] == ["watch"] and Path(argv[0]).name == "subconscious"
    argv[0] = shutil.which("subconscious") or sys.executable
    if argv[0] == sys.executable:
        argv[1:1] = ["-m", "subconscious"]
    env_vars = dict(agent["EnvironmentVariables"])
    assert set(env_vars) == {"LETTA_HOME"}
    env_vars["LETTA_HOME"] = str(tmp_path / "Mobile Documents" / "letta")  # a path with a space, like iCloud's
    run_like_a_service_manager(argv, env_vars, tmp_path)
