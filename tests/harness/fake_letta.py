"""A small fake Letta server on 127.0.0.1 for tests that run real hook processes: just what SessionStart,
UserPromptSubmit and PreToolUse read (models, an agent, conversations, a conversation's messages with
``limit``/``order``/``before``/``after`` as the real API pages them). Sends (the worker's POSTs) get a 503.

``FakeLetta.say(conv, text)`` adds an assistant message (a note), ``FakeLetta.row(conv)`` a stored row that
converts into no message (as Letta 0.16.8 has them: ``limit`` counts rows, so such a row makes a page short
while more follows); ``requests`` records every request path;
``delay`` seconds are waited before answering a messages listing (so parallel hooks overlap); with ``slow`` given,
only those conversations' listings are slow: sent over that long, a byte at a time (no read timeout fires)."""

from __future__ import annotations

import http.server
import json
import threading
import time
import urllib.parse
import uuid

AGENT = "agent-00000000-0000-4000-8000-00000000a11e"


class FakeLetta:
    def __init__(self, *, blocks: list[dict] | None = None, delay: float = 0.0):
        self.blocks = blocks or []
        self.delay = delay
        self.slow: set[str] = set()  # these conversations' listings trickle over ``delay`` s (a byte each 0.2 s)
        self.conversations: dict[str, list[dict]] = {}  # id → messages, oldest first
        self.requests: list[str] = []
        self.lock = threading.Lock()
        self._n = 0
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _reply(self, status: int, body, trickle: float = 0.0) -> None:
                raw = json.dumps(body).encode()
                pad = b" " * int(trickle / 0.2) if trickle else b""  # JSON may start with blanks
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(pad) + len(raw)))
                self.end_headers()
                for b in pad:  # a byte each 0.2 s: no read on the other side ever times out
                    self.wfile.write(bytes([b]))
                    self.wfile.flush()
                    time.sleep(0.2)
                self.wfile.write(raw)

            def _route(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                url = urllib.parse.urlsplit(self.path)
                q = dict(urllib.parse.parse_qsl(url.query))
                parts = [p for p in url.path.split("/") if p]
                with fake.lock:
                    fake.requests.append(f"{method} {self.path}")
                if parts[:1] != ["v1"]:
                    return self._reply(404, {"detail": "not found"})
                parts = parts[1:]
                if parts == ["health"]:
                    return self._reply(200, {"status": "ok"})
                if parts == ["models"]:
                    return self._reply(200, [])
                if parts[:1] == ["agents"] and len(parts) == 2:
                    if parts[1] != AGENT:
                        return self._reply(404, {"detail": f"agent {parts[1]} not found"})
                    return self._reply(200, {"id": AGENT, "name": "Sub", "blocks": fake.blocks})
                if parts == ["conversations"] and method == "POST":
                    conv = f"conv-{uuid.uuid4()}"
                    with fake.lock:
                        fake.conversations[conv] = []
                    return self._reply(200, {"id": conv, "agent_id": AGENT})
                if parts[:1] == ["conversations"] and len(parts) == 3 and parts[2] == "messages":
                    if method != "GET":
                        return self._reply(503, {"detail": "sends are not faked"})
                    if fake.slow and parts[1] in fake.slow:
                        return self._reply(200, fake.page(parts[1], q), trickle=fake.delay)
                    if fake.delay and not fake.slow:
                        time.sleep(fake.delay)
                    return self._reply(200, fake.page(parts[1], q))
                return self._reply(404, {"detail": "not faked"})

            def do_GET(self):
                self._route("GET")

            def do_POST(self):
                self._route("POST")

            def do_PATCH(self):
                self._route("PATCH")

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def new_conversation(self) -> str:
        conv = f"conv-{uuid.uuid4()}"
        with self.lock:
            self.conversations[conv] = []
        return conv

    def say(self, conv: str, text: str, message_type: str = "assistant_message") -> str:
        with self.lock:
            self._n += 1
            mid = f"message-{self._n:06d}-{uuid.uuid4().hex[:8]}"
            self.conversations.setdefault(conv, []).append(
                {"id": mid, "message_type": message_type, "date": "2026-12-01T10:00:%02dZ" % (self._n % 60),
                 "content": text})
            return mid

    def row(self, conv: str) -> None:
        """A row with no message in it: counted by ``limit``, never listed."""
        with self.lock:
            self._n += 1
            self.conversations.setdefault(conv, []).append({"id": f"row-{self._n:06d}", "_no_message": True})

    def page(self, conv: str, q: dict) -> list[dict]:
        """As Letta 0.16.8 pages a conversation: ``before``/``after`` by position whatever the order (an
        unknown cursor is ignored), then ``order``, then ``limit``."""
        with self.lock:
            items = list(self.conversations.get(conv, []))  # oldest first
        ids = [m["id"] for m in items]
        if q.get("before") in ids:
            items = items[:ids.index(q["before"])]
        if q.get("after") in ids:
            items = [m for m in items if ids.index(m["id"]) > ids.index(q["after"])]
        if q.get("order", "desc") == "desc":
            items.reverse()
        return [m for m in items[: int(q.get("limit") or 100)] if not m.get("_no_message")]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
