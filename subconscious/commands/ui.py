"""``subconscious ui [--port N] [--no-browser] [--print-url]``: a local page over memory, messages, sessions
and the shared home's health, on 127.0.0.1 only, behind a token made for this run.

Runs until Ctrl-C or SIGTERM. ``--print-url`` prints ``http://127.0.0.1:PORT/?token=…`` as the first line of
stdout (for scripts and tests); otherwise the URL goes to stderr with a line saying how to stop.

The browser is given a file, never the URL (as Jupyter does): ``<state dir>/ui/open-PORT.html`` (0600, in a
0700 directory) holds a form that posts the token to ``/open``. A browser's command line is readable by every
local user in ``/proc/*/cmdline``; the file is readable by this user only, and the page's URL (``/open``)
keeps the token out of the browser's history too. The file goes when the server stops.
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
    launcher = None
    if not args.no_browser and _has_gui():
        import webbrowser

        try:
            launcher = write_launcher(_launcher_dir(), server.port, server.token)
            webbrowser.open(launcher.as_uri())
        except Exception as exc:  # noqa: BLE001 - no browser here: the URL is printed
            print(f"subconscious ui: no browser opened ({exc})", file=sys.stderr)
    signal.signal(signal.SIGTERM, _stop)
    try:
        server.serve_forever(poll_interval=0.5)
    except (KeyboardInterrupt, _Stop):
        pass
    finally:
        server.server_close()
        if launcher is not None:
            try:
                launcher.unlink()
            except OSError:
                pass
    return 0


def launcher_html(port: int, token: str) -> str:
    """A page that posts this run's token to the viewer at once (with a button where scripts are off)."""
    return ('<!doctype html>\n<html><head><meta charset="utf-8"><meta name="referrer" content="no-referrer">'
            "<title>subconscious ui</title></head><body>\n"
            f'<form method="post" action="http://127.0.0.1:{int(port)}/open">'
            f'<input type="hidden" name="token" value="{token}">'
            '<button type="submit">Open the subconscious viewer</button></form>\n'
            "<script>document.forms[0].submit()</script>\n</body></html>\n")


def _launcher_dir():
    from ..local.identity import local_dirs

    return local_dirs(os.environ).root / "ui"


def write_launcher(directory, port: int, token: str):
    """``directory/open-PORT.html``: 0600, created new (a file or link left there is replaced, never
    followed), in ``directory`` made 0700 and refused unless it is this user's own real directory."""
    import stat

    from ..base.atomic import ensure_dir

    ensure_dir(directory)
    st = os.lstat(directory)
    if not stat.S_ISDIR(st.st_mode) or (hasattr(os, "getuid") and st.st_uid != os.getuid()):
        raise OSError(f"{directory} is not a directory of this user")
    os.chmod(directory, 0o700)
    path = directory / f"open-{int(port)}.html"
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(launcher_html(port, token))
    return path
