"""Served mode heals itself: SessionStart, which stays a command hook, starts ``subconscious serve`` when
served mode is on for this user and nothing answers on its port (so does a Stop that takes hookrun's full
path; the hot path's Stop does not look).

Why: while no server answers, Claude Code's interactive screen shows a "hook failed: connect ECONNREFUSED"
line under every prompt and tool call (``claude -p`` shows nothing, and the session goes on either way). So a
server that crashed, was never started, went with a reboot, or accepts without answering (stopped first,
when it is the one this user recorded) comes back at the next session start (which
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


def healthy(port: int, timeout: float = 2.0) -> bool:
    """``GET /subconscious/health`` answered 200 within ``timeout`` (the request thread answers it: no Letta)."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", "/subconscious/health")
        return conn.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


def _is_serve(pid: int) -> bool:
    """``pid`` runs ``subconscious serve`` (its command line, where /proc has it): never stop anything else."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"serve" in argv and any(b"subconscious" in a for a in argv)


def _retire_wedged(state_root: Path, port: int, log) -> bool:
    """The server recorded in ``serve/server.json`` for ``port`` accepts but does not answer: stop it (SIGKILL,
    it is not answering anyway). False when it is not ours to stop (another process, no record)."""
    import signal

    try:
        record = json.loads((state_root / "serve" / "server.json").read_text())
        pid, recorded_port = int(record["pid"]), int(record["port"])
    except (OSError, ValueError, KeyError, TypeError):
        recorded_port, pid = -1, -1
    if recorded_port != port or pid <= 1 or not _is_serve(pid):
        if log is not None:
            log.warning("served mode: something accepts on 127.0.0.1:%d but does not answer, and it is not a "
                        "server this user recorded; left alone", port)
        return False
    os.kill(pid, signal.SIGKILL)
    if log is not None:
        log.warning("served mode: subconscious serve (pid %d) accepted but did not answer in 2 s; stopped it", pid)
    end = time.monotonic() + 2.0
    while time.monotonic() < end and _is_serve(pid):
        time.sleep(0.02)
    return True


def _released(port: int, within: float) -> bool:
    """Whether the port stops answering within ``within`` seconds (a killed server's socket closes as the
    kernel finishes the process, a moment after the signal; a port still answering then is held by a service
    manager)."""
    end = time.monotonic() + within
    while answering(port, timeout=0.05):
        if time.monotonic() >= end:
            return False
        time.sleep(0.02)
    return True


def ensure(marker: Path, env, log=None, wait: float = 0.0) -> int | None:
    """Start a detached ``subconscious serve`` if served mode is on and its port is free (or held by a server of
    ours that accepts but does not answer: stopped first); its pid, or None. ``wait``: seconds to wait for it to
    listen (SessionStart: its prompt's hook comes right after)."""
    try:
        port = int(json.loads(marker.read_text())["port"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not 0 < port < 65536:
        return None
    if answering(port):
        if healthy(port) or not _retire_wedged(marker.parent.parent, port, log) or not _released(port, 2.0):
            return None  # fine; not ours; or a service manager holds the port and starts the next one itself
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
