"""The viewer's HTTP server: the standard library's ThreadingHTTPServer on 127.0.0.1, nothing else.

Routes (every one behind :func:`guard.judge`, but ``POST /open`` behind :func:`guard.judge_open`):

  GET  /                      the page (static/index.html, this run's token filled in)
  POST /open                  the same page, for the form ``token=…`` of the file ``subconscious ui`` opens
  GET  /static/<file>         its CSS and JS
  GET  /api/<section>         JSON: memory, history, messages, sessions, health (one section failing, say the
                              Letta server being down, leaves the others readable)
  POST /api/blocks/<label>    edit one memory block through the Letta API: {"value": new, "expected": old};
                              409 when the block changed since the page read it

Answers carry ``Cache-Control: no-store``, ``Referrer-Policy: no-referrer`` (the token is in the page's URL),
a Content-Security-Policy that allows only this server's own scripts and styles, and no CORS headers.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any, Callable, Protocol
from urllib.parse import parse_qs, unquote, urlsplit

from .guard import OPEN_FORM_MAX, OPEN_PATH, judge, judge_open

log = logging.getLogger("subconscious.viewer")

STATIC_FILES = {"app.js": "text/javascript; charset=utf-8", "app.css": "text/css; charset=utf-8"}
SECTIONS = ("memory", "history", "messages", "sessions", "health")
MAX_BODY = 1 << 20  # an edited block: Letta's blocks are a few KB; refuse anything past 1 MiB
TOKEN_PLACEHOLDER = "__SUBCONSCIOUS_TOKEN__"
SECURITY_HEADERS = {
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
}


class BackendError(Exception):
    """A section that could not be read (the message is shown on the page); ``status`` is the HTTP answer."""

    def __init__(self, message: str, status: int = 502):
        super().__init__(message)
        self.status = status


class Backend(Protocol):
    def section(self, name: str) -> Any: ...

    def edit_block(self, label: str, value: str, expected: str | None) -> dict: ...


def static_text(name: str) -> str:
    return resources.files("subconscious.viewer").joinpath("static", name).read_text("utf-8")


def new_token() -> str:
    return secrets.token_urlsafe(32)  # [A-Za-z0-9_-]: safe in a URL, an HTML attribute and a header


class ViewerServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = False

    def __init__(self, backend: Backend, *, port: int = 0, token: str | None = None, host: str = "127.0.0.1"):
        self.backend = backend
        self.token = token or new_token()
        self.writes_lock = threading.Lock()  # one edit at a time: the expected-value check and the write pair up
        super().__init__((host, port), _Handler)

    @property
    def port(self) -> int:
        return self.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/?token={self.token}"


class _Handler(BaseHTTPRequestHandler):
    server: ViewerServer
    server_version = "subconscious-ui"
    timeout = 30  # seconds a connection may sit idle or send a request slowly before it is closed
    sys_version = ""
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - the base class's name
        # the request line holds the token: log the path only
        log.debug("%s %s", self.command, urlsplit(self.path).path)

    # ------------------------------------------------------------ answers

    def _send(self, status: int, body: bytes, ctype: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in {**SECURITY_HEADERS, **(extra or {})}.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, payload: Any) -> None:
        self._send(status, json.dumps(payload, ensure_ascii=False, default=str).encode("utf-8"),
                   "application/json; charset=utf-8")

    def _error(self, status: int, message: str) -> None:
        self._json(status, {"ok": False, "error": message})

    def _guarded(self, handle: Callable[[str], None]) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        verdict = judge(self.command, self.path, headers, token=self.server.token, port=self.server.port)
        if not verdict.allowed:
            if self.command == "POST":
                self.close_connection = True  # its body is not read
            self._error(verdict.status, verdict.reason)
            return
        try:
            handle(unquote(urlsplit(self.path).path))
        except BrokenPipeError:
            pass
        except Exception as exc:  # a bug must not kill the server; the page shows the reason
            log.exception("viewer: %s %s failed", self.command, urlsplit(self.path).path)
            self._error(500, f"{type(exc).__name__}: {exc}")

    # ------------------------------------------------------------ methods

    def do_GET(self) -> None:
        self._guarded(self._get)

    def do_HEAD(self) -> None:
        self._guarded(self._get)

    def do_POST(self) -> None:
        if urlsplit(self.path).path == OPEN_PATH:
            self._open()
            return
        self._guarded(self._post)

    def _open(self) -> None:
        """``POST /open``: the launcher file's form, ``token=…``; answers with the page itself (its URL, and
        so the history, holds no token; a reload posts the form again)."""
        self.close_connection = True
        raw = (self.headers.get("content-length") or "").strip()
        if not (raw.isascii() and raw.isdigit()) or int(raw) > OPEN_FORM_MAX:
            self._error(413 if raw.isascii() and raw.isdigit() else 400, "send the token as a small form")
            return
        try:
            form = parse_qs(self.rfile.read(int(raw)).decode("ascii"), max_num_fields=4)
        except (ValueError, UnicodeDecodeError):
            form = {}
        headers = {k.lower(): v for k, v in self.headers.items()}
        verdict = judge_open(headers, (form.get("token") or [None])[0], token=self.server.token, port=self.server.port)
        if not verdict.allowed:
            self._error(verdict.status, verdict.reason)
            return
        self._page()

    def do_PUT(self) -> None:
        self._guarded(self._post)

    do_DELETE = do_PATCH = do_OPTIONS = do_PUT

    def _page(self) -> None:
        page = static_text("index.html").replace(TOKEN_PLACEHOLDER, self.server.token)
        self._send(200, page.encode("utf-8"), "text/html; charset=utf-8")

    def _get(self, path: str) -> None:
        if path in ("/", "/index.html"):
            self._page()
            return
        if path.startswith("/static/") and path[len("/static/"):] in STATIC_FILES:
            name = path[len("/static/"):]
            self._send(200, static_text(name).encode("utf-8"), STATIC_FILES[name])
            return
        if path.startswith("/api/") and path[len("/api/"):] in SECTIONS:
            name = path[len("/api/"):]
            try:
                data = self.server.backend.section(name)
            except BackendError as exc:
                self._error(exc.status, str(exc))
                return
            self._json(200, {"ok": True, "data": data})
            return
        self._error(404, f"nothing at {path}")

    def _post(self, path: str) -> None:
        if self.command != "POST" or not path.startswith("/api/blocks/"):
            self._error(405 if self.command != "POST" else 404, f"{self.command} {path} is not served")
            return
        label = path[len("/api/blocks/"):]
        raw = (self.headers.get("content-length") or "").strip()
        if not (raw.isascii() and raw.isdigit()):  # 'abc', '-1', '1_000', '١٢' (int() takes the last two)
            self.close_connection = True
            self._error(400, "send the block as a JSON body with its Content-Length in bytes")
            return
        length = int(raw)
        if length <= 0 or length > MAX_BODY:
            self.close_connection = True
            self._error(413 if length > MAX_BODY else 400, "send the block as a JSON body of at most 1 MiB")
            return
        try:
            body = json.loads(self.rfile.read(length))
        except (ValueError, UnicodeDecodeError):
            self._error(400, "the body is not JSON")
            return
        value, expected = (body.get("value"), body.get("expected")) if isinstance(body, dict) else (None, None)
        if not label or not isinstance(value, str) or not (expected is None or isinstance(expected, str)):
            self._error(400, 'send {"value": "<new text>", "expected": "<the text you edited>"}')
            return
        with self.server.writes_lock:
            try:
                block = self.server.backend.edit_block(label, value, expected)
            except BackendError as exc:
                self._error(exc.status, str(exc))
                return
        self._json(200, {"ok": True, "data": block})
