"""``subconscious ui [--port N] [--no-browser] [--print-url]``: a local page over memory, messages, sessions
and the shared home's health, on 127.0.0.1 only, behind a token made for this run.

Runs until Ctrl-C or SIGTERM. ``--print-url`` prints ``http://127.0.0.1:PORT/?token=…`` as the first line of
stdout (for scripts and tests); otherwise the URL goes to stderr with a line saying how to stop.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=0, metavar="N", help="port on 127.0.0.1 (0 or none: a free one)")
    parser.add_argument("--no-browser", action="store_true", help="do not open a browser")
    parser.add_argument("--print-url", action="store_true",
                        help="print the page's URL (with its token) on stdout and keep serving")


def _has_gui() -> bool:
    """A graphical browser can open: always on macOS and Windows; on other systems only with a display
    (without one, Python's webbrowser would start a text browser in this very terminal)."""
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


class _Stop(Exception):
    pass


def _stop(signum, frame):
    raise _Stop()


def run(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        print("subconscious ui: --port must be 0..65535", file=sys.stderr)
        return 2
    from ..viewer.backend import SeeBackend
    from ..viewer.server import ViewerServer

    backend = SeeBackend(env=dict(os.environ), cwd=os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd())
    try:
        server = ViewerServer(backend, port=args.port)
    except OSError as exc:
        print(f"subconscious ui: cannot listen on 127.0.0.1:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    if args.print_url:
        print(server.url, flush=True)
    else:
        print(f"subconscious ui: {server.url}\n(read-only until you allow editing on the page; Ctrl-C stops it)", file=sys.stderr, flush=True)
    if not args.no_browser and _has_gui():
        import webbrowser

        try:
            webbrowser.open(server.url)
        except Exception:  # noqa: BLE001 - no browser here: the URL is printed
            pass
    signal.signal(signal.SIGTERM, _stop)
    try:
        server.serve_forever(poll_interval=0.5)
    except (KeyboardInterrupt, _Stop):
        pass
    finally:
        server.server_close()
    return 0
