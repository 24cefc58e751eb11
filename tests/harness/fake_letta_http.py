"""tests/harness/fake_letta_conv.FakeLetta served over HTTP on 127.0.0.1, for real worker processes.

The worker's real LettaClient talks to it: ``GET agents/<id>``, ``GET conversations/<id>/messages`` (paged
by rows, message-less rows among them), ``POST conversations/<id>/messages`` (an SSE stream of the turn: a
user message or client-tool results), ``GET runs/<id>``. A scripted outcome that raises in the in-process
fake becomes what the wire shows: 409 for a conflict, 400 for a refusal, a connection dropped without a
reply for everything whose reply is lost (the fake stored what it stored).

``kill_at = (n, when)`` SIGKILLs ``victim`` (a pid) at the server's n-th request (counted from
``arm()``): ``"before"`` it is handled, or ``"after"`` (the server stored and did the work, the reply never
leaves). One lock serialises the fake, as one Letta server orders a conversation's writes.
"""
from __future__ import annotations

import http.server
import json
import os
import signal
import threading
import urllib.parse

from subconscious.letta.errors import LettaConflictError, LettaError, LettaHTTPError
from tests.harness.fake_letta_conv import FakeLetta


class _Drop(Exception):
    """End the connection without a reply."""


class FakeLettaHTTP:
    def __init__(self, fake: FakeLetta):
        self.fake = fake
        self.lock = threading.Lock()
        self.requests = 0
        self.kill_at: tuple[int, str] | None = None
        self.victim: int | None = None
        self.killed = False
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _reply(self, status: int, body) -> None:
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _stream(self, turn) -> None:
                items = [*turn.messages, {"message_type": "stop_reason", "stop_reason": turn.stop_reason}]
                raw = "".join(f"data: {json.dumps(i)}\n\n" for i in items) + "data: [DONE]\n\n"
                raw_b = raw.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(raw_b)))
                self.end_headers()
                self.wfile.write(raw_b)

            def _handle(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                url = urllib.parse.urlsplit(self.path)
                q = dict(urllib.parse.parse_qsl(url.query))
                parts = [p for p in url.path.split("/") if p][1:]  # after v1
                with server.lock:
                    server.requests += 1
                    kill = server.kill_at is not None and server.kill_at[0] == server.requests
                    if kill and server.kill_at[1] == "before":
                        server._kill()
                        raise _Drop()
                    try:
                        status, out = server._route(method, parts, q, body)
                    except _Drop:
                        if kill:
                            server._kill()
                        raise
                    if kill:
                        server._kill()
                        raise _Drop()
                if status == "stream":
                    self._stream(out)
                else:
                    self._reply(status, out)

            def _safe(self, method: str) -> None:
                try:
                    self._handle(method)
                except _Drop:
                    self.close_connection = True
                    try:
                        self.connection.shutdown(2)
                    except OSError:
                        pass

            def do_GET(self):
                self._safe("GET")

            def do_POST(self):
                self._safe("POST")

        self.http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.http.server_address[1]
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def arm(self, victim: int | None, kill_at: tuple[int, str] | None) -> None:
        with self.lock:
            self.requests, self.victim, self.kill_at, self.killed = 0, victim, kill_at, False

    def _kill(self) -> None:
        if self.victim is not None:
            try:
                os.kill(self.victim, signal.SIGKILL)  # only the worker this test started
                self.killed = True
            except ProcessLookupError:
                pass

    def _route(self, method: str, parts: list[str], q: dict, body):
        f = self.fake
        if parts[:1] == ["agents"] and len(parts) == 2:
            return 200, f.get_agent(parts[1])
        if parts[:1] == ["runs"] and len(parts) == 2:
            return (200, f.get_run(parts[1])) if parts[1] in f.runs else (404, {"detail": "no such run"})
        if parts[:1] == ["conversations"] and len(parts) == 3 and parts[2] == "messages":
            if method == "GET":
                return 200, f.list_messages(parts[1], limit=int(q.get("limit", 20)), order=q.get("order", "desc"),
                                            before=q.get("before"), after=q.get("after"))
            msgs = (body or {}).get("messages") or []
            try:
                if msgs and msgs[0].get("type") == "approval":
                    results = [type("R", (), {"tool_call_id": a.get("tool_call_id")}) for a in msgs[0]["approvals"]]
                    return "stream", f.send_tool_results(parts[1], results)
                return "stream", f.send_message_streaming(parts[1], msgs)
            except LettaConflictError:
                return 409, {"detail": "another run is busy on this conversation"}
            except LettaError as exc:
                if isinstance(exc, LettaHTTPError) or getattr(exc, "status", None):
                    return getattr(exc, "status", None) or 400, {"detail": str(exc)}
                raise _Drop()  # refused, lost, broken: no reply reaches the worker
        return 404, {"detail": "not faked"}

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()
