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

from subconscious.state.copynames import Engine, make_copy_name
from subconscious.state.store.core import Store

REPO = Path(__file__).resolve().parents[2]
UNIT = REPO / "deploy" / "systemd" / "subconscious-watch.service"
AGENT = REPO / "deploy" / "launchd" / "dev.subconscious.watch.plist"
# the rclone kit keeps the views out of bisync: each machine's watcher rebuilds its own (--rebuild-views);
# the other engines carry the views, and the plain units do not rewrite them (issue 24 red team, item 7)
RCLONE_UNIT = REPO / "deploy" / "systemd" / "subconscious-watch-rclone.service"
RCLONE_AGENT = REPO / "deploy" / "launchd" / "dev.subconscious.watch-rclone.plist"


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


def run_like_a_service_manager(argv: list[str], env_vars: dict[str, str], tmp: Path, rebuilds: bool = False) -> None:
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
        if rebuilds:  # bisync renamed both versions of the view away: the watcher writes this machine's
            store.view_path.unlink()
            while not store.view_path.exists() and time.monotonic() < deadline:
                time.sleep(0.02)
            assert store.view_path.exists(), "the service did not rebuild the view"
            assert "s1" in store.view_path.read_text()
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


def unit_argv(exec_start: str, tmp: Path) -> list[str]:
    argv = exec_start.replace("%h", str(tmp)).split()
    argv[0] = shutil.which("subconscious") or sys.executable
    if argv[0] == sys.executable:
        argv[1:1] = ["-m", "subconscious"]
    return argv


def test_the_rclone_systemd_unit_runs_watch_rebuilding_the_views(tmp_path):
    unit, plain = unit_sections(RCLONE_UNIT.read_text()), unit_sections(UNIT.read_text())
    service = unit["Service"]
    exec_start = service["ExecStart"].split()
    assert exec_start[1:] == ["watch", "--rebuild-views"] and Path(exec_start[0]).name == "subconscious"
    assert {k: v for k, v in service.items() if k != "ExecStart"} == {
        k: v for k, v in plain["Service"].items() if k != "ExecStart"}
    assert "--rebuild-views" not in plain["Service"]["ExecStart"]  # the engines that carry the views
    assert "subconscious-watch-rclone.service" in UNIT.read_text()  # the plain unit points rclone users here
    env_vars = {"LETTA_HOME": str(tmp_path / "rclone" / "letta")}
    run_like_a_service_manager(unit_argv(service["ExecStart"], tmp_path), env_vars, tmp_path, rebuilds=True)


def test_the_rclone_launchd_agent_runs_watch_rebuilding_the_views(tmp_path):
    agent, plain = plistlib.loads(RCLONE_AGENT.read_bytes()), plistlib.loads(AGENT.read_bytes())
    assert agent["Label"] == "dev.subconscious.watch-rclone" and agent["RunAtLoad"] is True
    assert agent["ProgramArguments"][1:] == ["watch", "--rebuild-views"]
    assert plain["ProgramArguments"][1:] == ["watch"]
    assert "dev.subconscious.watch-rclone.plist" in AGENT.read_text()
    assert agent["KeepAlive"] == plain["KeepAlive"] and agent["ExitTimeOut"] == plain["ExitTimeOut"]
    env_vars = {"LETTA_HOME": str(tmp_path / "rclone" / "letta")}
    run_like_a_service_manager(unit_argv(" ".join(agent["ProgramArguments"]), tmp_path), env_vars, tmp_path,
                               rebuilds=True)
