"""Served mode heals itself: SessionStart, which stays a command hook, starts ``subconscious serve`` when
served mode is on for this user and nothing answers on its port (so does a Stop that takes hookrun's full
path; the hot path's Stop does not look).

Why: while no server answers, Claude Code's interactive screen shows a "hook failed: connect ECONNREFUSED"
line under every prompt and tool call (``claude -p`` shows nothing, and the session goes on either way). So a
server that crashed, was never started, went with a reboot, or accepts without answering (stopped first,
when it is the one this user recorded) comes back at the next session start (which
waits up to 1.5 s for it to listen, so that the session's first prompt is served), with Claude Code's
environment (the hook's), without a service manager.

Ours means proven, not "something answered 200": where /proc tells, the listener has this uid (another user's
gets no request at all), and it answers ``/subconscious/health?nonce=N`` with the token's HMAC of a fresh nonce.
A listener that is not ours (another user who took the port first, anything without the token) is left where it
is: ours starts on a port the system picks, and ``serve`` records it in ``serve/port``, where the client looks
before the settings file's port.

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

from ..base.atomic import atomic_write, ensure_dir


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


def port_file(state_root: Path) -> Path:
    """``<state dir>/serve/port``: the port this user's server listens on, written by ``serve`` itself. The client
    reads it first (the settings file's port is where served mode began; the server may have moved)."""
    return Path(state_root) / "serve" / "port"


def recorded_port(state_root: Path) -> int | None:
    try:
        text = port_file(state_root).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() and 0 < int(text) < 65536 else None


_LOOPBACK = ("0100007F", "00000000", "0" * 32, "0000000000000000FFFF00000100007F")


def listener_uid(port: int) -> int | None:
    """The uid of the socket listening where a connection to 127.0.0.1:port lands (Linux: /proc/net/tcp and
    tcp6, the client's own check); None where that cannot be told (no /proc, nothing listening)."""
    hexport = f"{port:04X}"
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(name).read_text(encoding="ascii", errors="replace").splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) > 7 and f[3] == "0A" and f[1].rpartition(":")[2] == hexport and f[1].rpartition(":")[0] in _LOOPBACK:
                return int(f[7]) if f[7].isdigit() else None
    return None


def ours(port: int, token: str | None, timeout: float = 2.0) -> bool:
    """The listener on 127.0.0.1:port is this user's server: where /proc tells, it has this uid (another user's gets
    no request at all), and it answers ``/subconscious/health?nonce=N`` with the token's proof for a fresh nonce
    (any listener can answer 200; only one with the token can answer that)."""
    import http.client
    import secrets

    from .servetoken import proof

    if not token:
        return False
    uid = listener_uid(port)
    if uid is not None and hasattr(os, "getuid") and uid != os.getuid():
        return False
    if not answering(port):
        return False
    nonce = secrets.token_hex(16)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", f"/subconscious/health?nonce={nonce}")
        resp = conn.getresponse()
        body = json.loads(resp.read(4096)) if resp.status == 200 else None
    except (OSError, http.client.HTTPException, ValueError):
        return False
    finally:
        conn.close()
    import hmac

    given = body.get("proof") if isinstance(body, dict) else None
    return isinstance(given, str) and hmac.compare_digest(given.encode(), proof(token, nonce, port).encode())


def _start_lock(state_root: Path):
    """One hook at a time decides and starts (two SessionStarts finding the port taken would start two servers
    on two new ports): an flock on ``serve/start.lock``; None when another hook holds it."""
    try:
        import fcntl
    except ImportError:  # no flock (Windows): no lock
        return open(os.devnull, "rb")
    ensure_dir(Path(state_root) / "serve")
    fd = os.open(Path(state_root) / "serve" / "start.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return os.fdopen(fd, "rb")


def ensure(marker: Path, env, log=None, wait: float = 0.0) -> int | None:
    """Start a detached ``subconscious serve`` if served mode is on and no server of this user's answers on its
    port (the marker's, or the one recorded in ``serve/port``); its pid, or None. A server of ours that accepts but
    does not answer is stopped first; a listener that is not ours (another user's, anything that cannot prove it
    has the token) is left where it is and ours starts on a port the system picks, which it records for the
    client. ``wait``: seconds to wait for it to listen (SessionStart: its prompt's hook comes right after)."""
    from .servetoken import ensure_token

    try:
        port = int(json.loads(marker.read_text())["port"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not 0 < port < 65536:
        return None
    root = marker.parent.parent
    lock = _start_lock(root)
    if lock is None:
        return None  # another hook is deciding right now
    with lock:
        token = ensure_token(root)
        recorded = recorded_port(root)
        candidates = [port] + ([recorded] if recorded and recorded != port else [])
        me = os.getuid() if hasattr(os, "getuid") else None
        for p in candidates:
            if ours(p, token):
                _record(root, p, recorded)
                return None
        for p in candidates:  # another user's listener gets no connection from us at all
            if listener_uid(p) not in (None, me) or not answering(p):
                continue
            if ours(p, token, timeout=3.0):  # once more, longer: a loaded machine is not a wedged server
                _record(root, p, recorded)
                return None
            if _retire_wedged(root, p, log):
                _released(p, 2.0)
        target = next((p for p in candidates if _free(p)), 0)
        if not target:
            uids = {listener_uid(p) for p in candidates}
            if me is not None and uids == {me}:  # this user's own process (a service manager starting ours): its call
                if log is not None:
                    log.warning("served mode: something of this user's accepts on 127.0.0.1:%d but does not answer as "
                                "subconscious serve; left alone", port)
                return None
            if log is not None:
                log.warning("served mode: 127.0.0.1:%d is held by a process that is not this user's server (%s); "
                            "starting ours on a port the system picks (recorded in serve/port, where the client "
                            "looks)", port, ", ".join(f"uid {u}" if u is not None else "it cannot prove it has the "
                                                      "token" for u in sorted(uids, key=str)))
        return _start(root, target, env, log, wait if target else max(wait, 3.0))


def _record(root: Path, port: int, recorded: int | None) -> None:
    if recorded != port:
        from ..base.atomic import atomic_write

        atomic_write(port_file(root), f"{port}\n")  # the client goes where ours answers


def _free(port: int) -> bool:
    """Nothing listens on the port (a full backlog refuses a connect too: where /proc tells, a listener counts)."""
    return listener_uid(port) is None and not answering(port)


def _start(root: Path, port: int, env, log, wait: float) -> int:
    from .settingsfile import FORWARDED_VARS

    # Not this session's LETTA_MODE, LETTA_HOME, ...: every request brings its own session's, and a value left
    # in the server's environment would stand in for another session that has none. The key and the Letta
    # server's URL stay (never taken from a request).
    keep = {k: v for k, v in env.items() if k not in FORWARDED_VARS or k == "SUBCONSCIOUS_STATE_DIR"}
    proc = subprocess.Popen([sys.executable, "-m", "subconscious", "serve", "--port", str(port), "--quiet"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=keep, cwd=str(root / "serve"), start_new_session=True, close_fds=True)
    if log is not None:
        log.info("served mode: no server of this user's answered; started subconscious serve (pid %d, port %s)",
                 proc.pid, port or "picked by the system")
    end = time.monotonic() + wait
    while time.monotonic() < end and proc.poll() is None and not _listening(root, proc.pid, port):
        time.sleep(0.02)
    return proc.pid


def _listening(root: Path, pid: int, port: int) -> bool:
    """The server started as ``pid`` listens (port 0: on the port it recorded)."""
    if not port:
        try:
            record = json.loads((root / "serve" / "server.json").read_text())
            if record.get("pid") != pid:
                return False
            port = int(record["port"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return False
    return answering(port, timeout=0.05)
