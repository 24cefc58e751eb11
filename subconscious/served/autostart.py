"""Served mode heals itself: SessionStart, which stays a command hook, starts ``subconscious serve`` when
served mode is on for this user and nothing answers on its port (so does a Stop that takes hookrun's full
path; the hot path's Stop does not look).

Why: while no server answers, Claude Code's interactive screen shows a "hook failed: connect ECONNREFUSED"
line under every prompt and tool call (``claude -p`` shows nothing, and the session goes on either way). So a
server that crashed, was never started, or went with a reboot comes back at the next session start (which
waits up to 1.5 s for it to listen, so that the session's first prompt is served), with Claude Code's
environment (the hook's), without a service manager.

The marker ``<state dir>/serve/enabled.json`` (``{"port": N}``) is written by ``install --served`` and removed
when a settings file with our served hooks goes back to command hooks or is uninstalled; without it, this costs
SessionStart one ``stat``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from ..atomic import atomic_write, ensure_dir


def marker_path(state_root: Path) -> Path:
    return Path(state_root) / "serve" / "enabled.json"


def enable(state_root: Path, port: int) -> None:
    ensure_dir(marker_path(state_root).parent)
    atomic_write(marker_path(state_root), json.dumps({"port": int(port)}) + "\n")


def disable(state_root: Path) -> bool:
    try:
        os.unlink(marker_path(state_root))
        return True
    except FileNotFoundError:
        return False


def answering(port: int, timeout: float = 0.2) -> bool:
    """Something accepts connections on 127.0.0.1:port (a connect; no request)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout):
            return True
    except OSError:
        return False


def ensure(marker: Path, env, log=None, wait: float = 0.0) -> int | None:
    """Start a detached ``subconscious serve`` if served mode is on and its port is free; its pid, or None.
    ``wait``: seconds to wait for it to listen (SessionStart: its prompt's hook comes right after)."""
    try:
        port = int(json.loads(marker.read_text())["port"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not 0 < port < 65536 or answering(port):
        return None
    from ..settingsfile import FORWARDED_VARS

    # Not this session's LETTA_MODE, LETTA_HOME, ...: every request brings its own session's, and a value left
    # in the server's environment would stand in for another session that has none. The key stays (never sent).
    keep = {k: v for k, v in env.items() if k not in FORWARDED_VARS or k == "SUBCONSCIOUS_STATE_DIR"}
    proc = subprocess.Popen([sys.executable, "-m", "subconscious", "serve", "--port", str(port), "--quiet"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=keep, cwd=str(marker.parent), start_new_session=True, close_fds=True)
    if log is not None:
        log.info("served mode: nothing answered on 127.0.0.1:%d; started subconscious serve (pid %d)", port, proc.pid)
    end = time.monotonic() + wait
    while time.monotonic() < end and proc.poll() is None and not answering(port, timeout=0.05):
        time.sleep(0.02)
    return proc.pid
