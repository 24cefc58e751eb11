"""`ask` and the MCP tool `ask_subconscious` end at their total time limit whatever the stream sends:
Letta's pings, SSE keep-alive comments, a trickle of bytes that never makes an event, a response head and
then silence, or no response at all. The server here is a real socket server on 127.0.0.1 speaking HTTP
as such a stream would; the limit is lowered to 1.5 s for the test (300 s in use). The measured times are
printed; the test fails only when a call is still running 30 s after its limit (the old code ran forever)."""

from __future__ import annotations

import json
import os
import socketserver
import threading
import time

import anyio
import pytest

from subconscious.letta.errors import LettaTimeoutError
from subconscious.see import SeeHome
from subconscious.see import ask as see_ask

AGENT = "agent-00000000-0000-4000-8000-0000000000a5"
LIMIT = 1.5

STREAMS = {
    "pings": lambda w: _forever(w, b'data: {"message_type": "ping"}\n\n'),
    "keep-alive comments": lambda w: _forever(w, b": keep-alive\n\n"),
    "a trickle of bytes": lambda w: _forever(w, b"d"),
    "silence after the head": lambda w: time.sleep(60),
}

# red team: an error answer whose body trickles (it was read whole before it was reported, with no deadline)
# or one that is not an event stream (read whole too): ask ran past its limit
HEADS = {
    "an error body trickled": b"HTTP/1.1 500 X\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n",
    "not a stream, trickled": b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n\r\n",
    # the response's head itself trickled: httpcore takes one read timeout for the whole head (16 KiB of it)
    "a trickled head": b"HTTP/1.1 200 OK\r\nX-Pad: ",
}


def _forever(w, piece: bytes) -> None:
    while True:
        w.write(piece)
        w.flush()
        time.sleep(0.1)


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, stream: str):
        self.stream = stream
        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        try:
            line = self.rfile.readline().decode()
            length = 0
            while (h := self.rfile.readline()) not in (b"\r\n", b""):
                if h.lower().startswith(b"content-length:"):
                    length = int(h.split(b":")[1])
            self.rfile.read(length)
            method, path = line.split()[:2]
            if method == "POST" and path.startswith("/v1/conversations/?"):
                return self.reply({"id": "conv-00000000-0000-4000-8000-0000000000c1", "agent_id": AGENT})
            if method == "POST" and path.endswith("/messages"):
                if self.server.stream == "no response":
                    time.sleep(60)
                    return
                if self.server.stream in HEADS:  # red team: what comes before the event stream, trickled
                    self.wfile.write(HEADS[self.server.stream])
                    _forever(self.wfile, b"a")
                self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
                self.wfile.flush()
                STREAMS[self.server.stream](self.wfile)
            self.reply({"detail": "not here"}, 404)
        except (BrokenPipeError, ConnectionResetError, ValueError):
            pass

    def reply(self, body: dict, status: int = 200) -> None:
        raw = json.dumps(body).encode()
        self.wfile.write(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                         b"Connection: close\r\n\r\n%s" % (status, len(raw), raw))


def env_for(tmp_path, url: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "CLAUDE"))}
    env.update(HOME=str(tmp_path), SUBCONSCIOUS_STATE_DIR=str(tmp_path / "local"), LETTA_HOME=str(tmp_path / "h"),
               LETTA_BASE_URL=url, LETTA_AGENT_ID=AGENT, SUBCONSCIOUS_HOST="laptop")
    return env


def bounded(fn, what: str):
    """fn() in a thread; its outcome, and how long it took (None: still running 30 s past the limit)."""
    out: dict = {}

    def run():
        started = time.monotonic()
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - the outcome is what the test looks at
            out["error"] = exc
        out["took"] = time.monotonic() - started

    th = threading.Thread(target=run, daemon=True)
    th.start()
    th.join(LIMIT + 30)
    print(f"{what}: {out.get('took', 'still running'):} s (limit {LIMIT} s)")
    return out


@pytest.fixture(autouse=True)
def short_limit(monkeypatch):
    import importlib

    monkeypatch.setattr(importlib.import_module("subconscious.see.ask"), "TOTAL_TIMEOUT_S", LIMIT)


@pytest.mark.parametrize("stream", [*STREAMS, "no response", *HEADS])
def test_ask_ends_at_its_total_limit_whatever_the_stream_sends(tmp_path, stream):
    srv = Server(stream)
    try:
        def call():
            home = SeeHome(env=env_for(tmp_path, srv.url), cwd=str(tmp_path))
            try:
                return see_ask(home, "anyone there?")
            finally:
                home.close()

        out = bounded(call, f"ask, {stream}")
        assert "took" in out, f"ask still running {LIMIT + 30} s into a {LIMIT} s limit ({stream})"
        assert isinstance(out.get("error"), LettaTimeoutError), out
        assert f"longer than {LIMIT:g} s" in str(out["error"])
    finally:
        srv.shutdown()
        srv.server_close()


def test_the_mcp_tool_ends_at_the_limit_and_says_so_to_the_model(tmp_path):
    from mcp import Client

    from subconscious.mcp.server import build_server

    srv = Server("keep-alive comments")
    try:
        server = build_server(lambda: SeeHome(env=env_for(tmp_path, srv.url), cwd=str(tmp_path)))

        async def session():
            async with Client(server) as client:
                return await client.call_tool("ask_subconscious", {"question": "anyone there?"})

        out = bounded(lambda: anyio.run(session), "ask_subconscious, keep-alive comments")
        assert "took" in out, "ask_subconscious still running 30 s past its limit"
        result = out["value"]
        assert result.is_error and f"longer than {LIMIT:g} s" in result.content[0].text
    finally:
        srv.shutdown()
        srv.server_close()


def test_the_mcp_server_exits_soon_after_stdin_closes_while_a_call_waits_on_letta(tmp_path):
    """Claude Code closes the server's stdin to stop it (then waits for it to exit): a call waiting on a
    Letta stream that sends nothing must not keep the process alive (the old server waited for the call)."""
    import subprocess
    import sys

    srv = Server("silence after the head")
    asked = threading.Event()
    original = Handler.handle

    def handle(self):
        asked.set()
        original(self)

    Handler.handle = handle
    try:
        proc = subprocess.Popen([sys.executable, "-m", "subconscious", "mcp"], env=env_for(tmp_path, srv.url),
                                cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        msgs = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                            "clientInfo": {"name": "test", "version": "1"}}},
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                 "params": {"name": "ask_subconscious", "arguments": {"question": "anyone there?"}}}]
        proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in msgs))
        proc.stdin.flush()
        assert proc.stdout.readline(), proc.stderr.read()  # the initialize answer
        assert asked.wait(60), "the call never reached Letta"
        time.sleep(0.5)  # the call is waiting on the stream now
        closed = time.monotonic()
        proc.stdin.close()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            pytest.fail("subconscious mcp still running 30 s after its stdin closed")
        took = time.monotonic() - closed
        print(f"subconscious mcp exited {took:.2f} s after stdin closed, a call in flight")
        assert proc.returncode == 0, proc.stderr.read()
    finally:
        Handler.handle = original
        srv.shutdown()
        srv.server_close()
