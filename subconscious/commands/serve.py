"""``subconscious serve``: answer Claude Code's PreToolUse and UserPromptSubmit as ``http`` hooks from one
long-lived per-user process on 127.0.0.1 (served mode; switch a settings file to it with
``subconscious install --served``). Runs until SIGTERM/SIGINT; deploy/ has a systemd user unit and a
launchd agent for it.

Settings come from this process's environment, and per request from Claude Code's (forwarded in headers by
the hooks ``install --served`` writes: LETTA_MODE, LETTA_HOME, LETTA_BASE_URL, ... — they win when set there;
never LETTA_API_KEY, which only this process's own environment gives); each session's home is the one its
SessionStart recorded. SessionStart starts it, with Claude Code's environment, when nothing answers on the
port; started by hand or by a service, give it the LETTA_* variables your Claude Code has.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import signal
import sys
import threading


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=None,
                        help="TCP port on 127.0.0.1 (default: $SUBCONSCIOUS_SERVE_PORT, else 20000 + uid %% 10000; "
                             "install --served must use the same; 0: one the system picks). The port it listens "
                             "on is recorded in <state dir>/serve/port, where the served client looks first")
    parser.add_argument("--print-token", action="store_true",
                        help="print this user's token (made on first use) and exit: "
                             "export SUBCONSCIOUS_SERVE_TOKEN=$(subconscious serve --print-token)")
    parser.add_argument("--json", action="store_true", help="with --print-token: {\"token\", \"port\", \"url\"}")
    parser.add_argument("--quiet", action="store_true", help="log only; print nothing")


def run(args: argparse.Namespace) -> int:
    from ..local.identity import local_dirs
    from ..served import default_port
    from ..local.servetoken import ensure_token, token_path

    try:
        port = args.port if args.port is not None else default_port()
    except ValueError as exc:
        print(f"subconscious serve: {exc}", file=sys.stderr)
        return 2
    if not 0 <= port < 65536:
        print(f"subconscious serve: --port {port} is not a TCP port", file=sys.stderr)
        return 2
    root = local_dirs().root
    try:
        token = ensure_token(root)
    except (OSError, RuntimeError) as exc:
        print(f"subconscious serve: cannot make the token under {root}: {exc}", file=sys.stderr)
        return 1
    if args.print_token:
        if args.json:
            print(json.dumps({"token": token, "port": port, "url": f"http://127.0.0.1:{port}",
                              "token_file": str(token_path(root))}))
        else:
            print(token)
        return 0
    return _serve(args, port, token, root)


def inherited_socket(env) -> "socket.socket | None":
    """The listening socket systemd passes (socket activation: ``LISTEN_PID`` is this process, ``LISTEN_FDS=1``,
    the socket is fd 3), so that something accepts on the port even before this process runs or after it died:
    Claude Code then never meets a refused connection. None when not socket-activated."""
    import socket

    if env.get("LISTEN_PID") != str(os.getpid()) or env.get("LISTEN_FDS") != "1":
        return None
    for name in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
        os.environ.pop(name, None)  # not for the workers this process may start
    sock = socket.socket(fileno=3)
    if sock.family != socket.AF_INET or sock.getsockname()[0] != "127.0.0.1":
        sock.detach()
        raise OSError(f"the socket passed by the service manager is {sock.getsockname()!r}, not on 127.0.0.1")
    return sock


def _serve(args: argparse.Namespace, port: int, token: str, root) -> int:
    from ..base.atomic import atomic_write
    from ..letta import lite
    from ..local.log import setup
    from ..local.autostart import port_file
    from ..served.keepalive import KeptAlive
    from ..served.server import HookServer, serve_in_thread

    debug = os.environ.get("LETTA_DEBUG", "") in ("1", "true", "yes")
    log = setup(root / "logs", debug=debug)
    try:
        listening = inherited_socket(os.environ)
        if listening is not None:
            port = listening.getsockname()[1]
        server = HookServer(port, token, root, listening=listening)
    except OSError as exc:
        why = (f"port {port} is taken (another `subconscious serve`? pick one with --port, and the same for "
               "`install --served`)") if exc.errno == errno.EADDRINUSE else str(exc)
        print(f"subconscious serve: cannot listen on 127.0.0.1:{port}: {why}", file=sys.stderr)
        return 1
    pool = KeptAlive(lite._open)
    lite.use_opener(pool)
    stop = threading.Event()

    def on_signal(signum, frame) -> None:  # noqa: ANN001
        log.info("serve: got %s", signal.Signals(signum).name)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT, getattr(signal, "SIGHUP", None)):
        if sig is not None:
            signal.signal(sig, on_signal)
    port = server.server_address[1]  # --port 0: the one the system picked
    thread = serve_in_thread(server)
    record = root / "serve" / "server.json"  # who answers on which port (status, tests); gone with the server
    atomic_write(record, json.dumps({"pid": os.getpid(), "port": port}) + "\n")
    atomic_write(port_file(root), f"{port}\n")  # where the client finds this server (it may have moved)
    log.info("serve: listening on 127.0.0.1:%d (pid %d)", port, os.getpid())
    if not args.quiet:
        print(f"subconscious serve: listening on http://127.0.0.1:{port} (hooks: /subconscious/hook/pre-tool-use, "
              "/subconscious/hook/user-prompt-submit)", flush=True)
    try:
        while not stop.wait(1.0):
            pass
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
        lite.use_opener(None)
        try:
            if json.loads(record.read_text()).get("pid") == os.getpid():
                record.unlink()
                if port_file(root).read_text().strip() == str(port):
                    port_file(root).unlink()
        except (OSError, ValueError, AttributeError):
            pass
        pool.close()
        log.info("serve: stopped after %d answers (%d connections to Letta opened)", server.served, pool.opened)
    return 0
