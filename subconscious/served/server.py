"""The HTTP server of ``subconscious serve``: Claude Code's ``http`` hooks for PreToolUse and
UserPromptSubmit, answered by the handlers the command hooks run.

One request, as ``hookrun`` runs a command hook:

- ``POST /subconscious/hook/<event>`` with the hook's JSON; refused (401) without this user's token in
  ``X-Subconscious-Token``, 404 for another path, 413 past 8 MiB; the JSON is read as hookrun reads stdin
  (:func:`subconscious.state.jsontext.loads_state`);
- the settings are the server's environment overlaid with Claude Code's (the ``X-Subconscious-Env-*``
  headers, see :data:`subconscious.settingsfile.FORWARDED_VARS`; an empty one, which is what Claude Code
  sends for a variable it does not have, leaves the server's value); the session's home is the one its
  SessionStart recorded, as for the command hooks;
- the handler (``subconscious.events.pre_tool`` / ``prompt``: ``handle(HookEvent)``) runs on a worker thread;
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
from concurrent.futures import ThreadPoolExecutor, TimeoutError as FutureTimeout
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Mapping

from ..hookrun import STDIN_CAP, HookEvent
from ..settingsfile import ENV_HEADER, FORWARDED_VARS, TOKEN_HEADER
from ..state.jsontext import loads_state
from . import ROUTES
from .token import matches

log = logging.getLogger("subconscious")
HEALTH = "/subconscious/health"


def request_env(base: Mapping[str, str], headers: Mapping[str, str]) -> dict[str, str]:
    """The environment a handler sees: ``base`` (the server's), with each forwarded variable Claude Code
    has (a non-empty header) in its place. Other headers are never read into it."""
    env = dict(base)
    for var in FORWARDED_VARS:
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


class HookServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64

    def __init__(self, port: int, token: str, state_root: Path, env: Mapping[str, str] | None = None,
                 workers: int = 8, host: str = "127.0.0.1", listening=None):
        """``listening``: a socket already bound and listening (systemd socket activation) instead of a bind."""
        self.token = token
        self.state_root = Path(state_root).absolute()
        self.base_env = dict(os.environ if env is None else env)
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="hook")
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

    def server_close(self) -> None:
        super().server_close()
        self.pool.shutdown(wait=False, cancel_futures=True)

    def same_state_dir(self, env: Mapping[str, str]) -> bool:
        raw = env.get("SUBCONSCIOUS_STATE_DIR")
        return not raw or Path(raw).expanduser().absolute() == self.state_root


def _run(module: str, event: HookEvent):
    return importlib.import_module(module).handle(event)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # Claude Code keeps its connection to us alive too
    server: HookServer
    timeout = 30  # an idle kept-alive connection from Claude Code is dropped after this long

    def log_message(self, fmt: str, *args: Any) -> None:  # no access log on stderr
        pass

    def do_GET(self) -> None:
        if self.path == HEALTH:
            self._send(200, b'{"ok": true}', "application/json")
        else:
            self._send(404, b"")

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
        try:
            output = self.server.pool.submit(_run, module, event).result(
                timeout=max(0.0, deadline - (time.monotonic() - started)))
        except FutureTimeout:
            log.warning("serve %s: gave up after %.1f s (deadline) — Claude Code goes on without it", name, deadline)
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
