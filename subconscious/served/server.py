"""The HTTP server of ``subconscious serve``: Claude Code's ``http`` hooks for PreToolUse and
UserPromptSubmit, answered by the handlers the command hooks run.

One request, as ``hookrun`` runs a command hook:

- ``POST /subconscious/hook/<event>`` with the hook's JSON; refused (401) without this user's token in
  ``X-Subconscious-Token``, 404 for another path, 413 past 8 MiB; the JSON is read as hookrun reads stdin
  (:func:`subconscious.state.jsontext.loads_state`);
- the settings are the server's environment overlaid with Claude Code's (the ``X-Subconscious-Env-*``
  headers, see :data:`subconscious.local.settingsfile.FORWARDED_VARS`; an empty one, which is what Claude Code
  sends for a variable it does not have, leaves the server's value); the session's home is the one its
  SessionStart recorded, as for the command hooks;
- the handler (``subconscious.hooks.events.pre_tool`` / ``prompt``: ``handle(HookEvent)``) runs on a worker thread;
  the answer waits for it at most the deadline hookrun would give it (4 s / 8 s), then goes out empty;
- the answer is always 200 with the hook's JSON (UserPromptSubmit's text as ``additionalContext``, since
  an http hook's plain-text body is not shown to the model) or an empty body — any failure is logged with
  a one-line reason, never answered as an error; ``Output.written()`` (what was shown is recorded) runs
  only once the answer was sent whole.

Parallel requests of one session agree through the same claim files as parallel hook processes do (an
``flock`` per call; the owner is this process, alive, so a claim left by a late handler is released by
the claim timeout). Retries of deliveries (hookrun's pickup) are left to SessionStart and Stop, which stay
command hooks: a worker started from here would get the server's environment, not Claude Code's.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Mapping

from ..hooks.run import STDIN_CAP, HookEvent
from ..local.settingsfile import ENV_HEADER, FORWARDED_VARS, NOT_FORWARDED, TOKEN_HEADER
from ..state.jsontext import loads_state
from . import ROUTES
from ..local.servetoken import matches, proof

log = logging.getLogger("subconscious")
HEALTH = "/subconscious/health"


def request_env(base: Mapping[str, str], headers: Mapping[str, str]) -> dict[str, str]:
    """The environment a handler sees: ``base`` (the server's), with each forwarded variable Claude Code
    has (a non-empty header) in its place. Other headers are never read into it: above all not the Letta
    server's URL or the key (:data:`~subconscious.local.settingsfile.NOT_FORWARDED`), so the key goes only where the
    server was started to send it, whoever holds the token."""
    env = dict(base)
    for var in FORWARDED_VARS:
        if var in NOT_FORWARDED:
            continue
        value = headers.get(ENV_HEADER + var)
        if value:
            env[var] = value
    return env


def answer_body(event_name: str, output: str | None) -> bytes:
    """The response body for a handler's output: PreToolUse prints JSON already; UserPromptSubmit prints
    text, which an http hook must send as ``additionalContext``."""
    if not output:
        return b""
    if event_name == "user-prompt-submit":
        return json.dumps({"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                                                  "additionalContext": str(output)}}).encode()
    return str(output).encode()


class Slots:
    """How many handlers run at once: at most ``total``, at most ``per_session`` of one session. A handler that
    overruns its deadline keeps its slot until it ends (a thread cannot be stopped), but only its session's
    share: one session waiting on a slow Letta cannot starve another's tool calls."""

    def __init__(self, total: int, per_session: int):
        self.total, self.per_session = total, per_session
        self.busy = 0
        self.by_session: dict[str, int] = {}
        self.cond = threading.Condition()

    def take(self, key: str, timeout: float) -> bool:
        end = time.monotonic() + timeout
        with self.cond:
            while self.busy >= self.total or self.by_session.get(key, 0) >= self.per_session:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)
            self.busy += 1
            self.by_session[key] = self.by_session.get(key, 0) + 1
            return True

    def give(self, key: str) -> None:
        with self.cond:
            self.busy -= 1
            self.by_session[key] -= 1
            if not self.by_session[key]:
                del self.by_session[key]
            self.cond.notify_all()


class _Overrun(Exception):
    """The handler did not end (or get a slot) within its deadline."""


class _Call:
    """One handler on its own thread; the request waits for it at most its deadline."""

    def __init__(self, slots: Slots, key: str, module: str, event: HookEvent):
        self.done = threading.Event()
        self.output = self.error = None

        def run() -> None:
            try:
                self.output = _run(module, event)
            except BaseException as exc:  # noqa: BLE001 - handed to the request thread
                self.error = exc
            finally:
                slots.give(key)
                self.done.set()

        threading.Thread(target=run, name="hook", daemon=True).start()

    def result(self, timeout: float):
        if not self.done.wait(timeout):
            raise _Overrun
        if self.error is not None:
            raise self.error
        return self.output


class HookServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64
    max_connections = 64  # connection threads; past it an idle kept-alive one is closed, else the new one

    def __init__(self, port: int, token: str, state_root: Path, env: Mapping[str, str] | None = None,
                 workers: int = 32, per_session: int = 4, host: str = "127.0.0.1", listening=None):
        """``listening``: a socket already bound and listening (systemd socket activation) instead of a bind.
        ``workers``: handlers at once (``per_session`` of one session)."""
        self.token = token
        self.state_root = Path(state_root).absolute()
        self.base_env = dict(os.environ if env is None else env)
        self.slots = Slots(workers, per_session)
        self.conns: dict[Any, "_Handler | None"] = {}  # request socket → its handler (None before it starts)
        self.conns_lock = threading.Lock()
        self.last_busy_logged = -1e9
        self.served = 0
        self.refused = 0
        self.last_refusal_logged = -1e9
        for _, module, _ in ROUTES.values():  # the first request pays no import
            importlib.import_module(module)
        if listening is None:
            super().__init__((host, port), _Handler)
        else:
            super().__init__(listening.getsockname()[:2], _Handler, bind_and_activate=False)
            self.socket.close()
            self.socket = listening
            self.server_address = listening.getsockname()[:2]

    def process_request(self, request, client_address) -> None:
        """A thread per connection, at most :attr:`max_connections`: at the limit the longest-idle kept-alive
        connection is closed to make room; with none idle the new one is closed at once (logged once a minute)."""
        with self.conns_lock:
            if sum(1 for h in self.conns.values() if h is None or not h.dropped) >= self.max_connections:
                idle = [(h.idle_since, h) for h in self.conns.values()
                        if h is not None and h.idle_since is not None and not h.dropped]
                if idle:
                    min(idle, key=lambda x: x[0])[1].drop()
                else:
                    if time.monotonic() - self.last_busy_logged > 60:
                        self.last_busy_logged = time.monotonic()
                        log.warning("serve: %d connections open, none idle; refused a new one", len(self.conns))
                    self.shutdown_request(request)
                    return
            self.conns[request] = None
        try:
            super().process_request(request, client_address)
        except BaseException:
            with self.conns_lock:
                self.conns.pop(request, None)
            raise

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self.conns_lock:
                self.conns.pop(request, None)

    def same_state_dir(self, env: Mapping[str, str]) -> bool:
        raw = env.get("SUBCONSCIOUS_STATE_DIR")
        return not raw or Path(raw).expanduser().absolute() == self.state_root


def _run(module: str, event: HookEvent):
    return importlib.import_module(module).handle(event)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # Claude Code keeps its connection to us alive too
    server: HookServer
    timeout = 30  # an idle kept-alive connection from Claude Code is dropped after this long
    idle_since: float | None = None
    dropped = False  # closed to make room: ending, no longer counted

    def setup(self) -> None:
        super().setup()
        with self.server.conns_lock:
            if self.request in self.server.conns:
                self.server.conns[self.request] = self

    def handle_one_request(self) -> None:
        # waiting for a request, and inside one until its token is checked (do_POST): may be closed to make room.
        # Not only until the request line: another user's connection, stuck in headers that never end or a
        # token-less body that never comes (a byte every 29 s beats the timeout), held a thread nobody could
        # reclaim, and max_connections of them shut every hook out
        self.idle_since = time.monotonic()
        super().handle_one_request()

    def drop(self) -> None:
        import socket

        self.dropped = True
        try:
            self.request.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def log_message(self, fmt: str, *args: Any) -> None:  # no access log on stderr
        pass

    def do_GET(self) -> None:
        path, _, query = self.path.partition("?")
        if path != HEALTH:
            self._send(404, b"")
            return
        nonce = query[len("nonce="):] if query.startswith("nonce=") else ""
        if nonce and (len(nonce) > 128 or not nonce.isalnum() or not nonce.isascii()):
            self._send(400, b"")
            return
        body: dict[str, Any] = {"ok": True}
        if nonce:  # proof that this listener has the token (local.autostart checks it)
            body["proof"] = proof(self.server.token, nonce, self.server.server_address[1])
        self._send(200, json.dumps(body).encode(), "application/json")

    def do_POST(self) -> None:
        started = time.monotonic()
        route = ROUTES.get(self.path.split("?", 1)[0])
        if route is None:
            self._discard_body()
            self._send(404, b"")
            return
        if not matches(self.server.token, self.headers.get(TOKEN_HEADER)):
            self._discard_body()
            self.server.refused += 1
            if time.monotonic() - self.server.last_refusal_logged > 60:  # once a minute, not once per tool call
                self.server.last_refusal_logged = time.monotonic()
                log.warning("serve: refused a request to %s without the right token (%d so far; is "
                            "SUBCONSCIOUS_SERVE_TOKEN set in Claude Code's environment? `subconscious serve "
                            "--print-token`)", self.path, self.server.refused)
            self._send(401, b"")
            return
        self.idle_since = None  # this user's request (the token): no longer closed to make room
        name, module, deadline = route
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= STDIN_CAP:
            log.warning("serve %s: a body of %s bytes refused (at most %d)", name, length, STDIN_CAP)
            self.close_connection = True
            self._send(413, b"")
            return
        try:
            data = loads_state(self.rfile.read(length)) if length else {}
            if not isinstance(data, dict):
                raise ValueError(f"hook input is a JSON {type(data).__name__}, expected an object")
        except (ValueError, OSError) as exc:
            log.warning("serve %s: malformed input (%s); did nothing", name, str(exc)[:200])
            self._send(200, b"")
            return
        env = request_env(self.server.base_env, self.headers)
        if not self.server.same_state_dir(env):
            log.warning("serve %s: Claude Code's SUBCONSCIOUS_STATE_DIR is %s, this server serves %s; did nothing",
                        name, env.get("SUBCONSCIOUS_STATE_DIR"), self.server.state_root)
            self._send(200, b"")
            return
        event = HookEvent(name, data, env=env, started=started)
        output = None
        key = data.get("session_id") if isinstance(data.get("session_id"), str) else ""
        try:
            if not self.server.slots.take(key, max(0.0, deadline - (time.monotonic() - started))):
                raise _Overrun
            output = _Call(self.server.slots, key, module, event).result(
                max(0.0, deadline - (time.monotonic() - started)))
        except _Overrun:
            log.warning("serve %s: gave up after %.1f s (deadline; %d handlers running, %d of this session) — "
                        "Claude Code goes on without it", name, deadline, self.server.slots.busy,
                        self.server.slots.by_session.get(key, 0))
        except Exception as exc:  # noqa: BLE001 - as hookrun: log, never answer an error
            if getattr(exc, "quiet", False):
                log.debug("serve %s: skipped: %s", name, exc)
            else:
                log.warning("serve %s: %s: %s", name, type(exc).__name__, str(exc)[:500],
                            exc_info=env.get("LETTA_DEBUG", "") in ("1", "true", "yes"))
        body = answer_body(name, output)
        if not self._send(200, body, "application/json" if body else None):
            return  # Claude Code is gone (its timeout): nothing was shown, nothing is recorded
        self.server.served += 1
        written = getattr(output, "written", None) if body else None
        if written is not None:
            try:
                written()
            except Exception as exc:  # noqa: BLE001
                log.warning("serve %s: recording what was shown failed: %s: %s", name, type(exc).__name__,
                            str(exc)[:300])
        log.debug("serve %s: done in %.0f ms", name, (time.monotonic() - started) * 1000)

    def _discard_body(self) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = 0
        if 0 < length <= STDIN_CAP:
            self.rfile.read(length)
        elif length:
            self.close_connection = True

    def _send(self, status: int, body: bytes, ctype: str | None = None) -> bool:
        try:
            self.send_response(status)
            if ctype:
                self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()
            return True
        except OSError as exc:
            self.close_connection = True
            log.info("serve: the answer could not be sent (%s); Claude Code had stopped waiting", exc)
            return False


def serve_in_thread(server: HookServer) -> threading.Thread:
    t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.5}, name="serve", daemon=True)
    t.start()
    return t
