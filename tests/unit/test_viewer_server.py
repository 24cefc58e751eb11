"""The viewer's HTTP server in process, on a real socket, over a real (empty) shared home: the page stays
usable when the Letta server is down, every answer carries its protective headers, malformed edits are
refused; and no hook loads the MCP SDK or the viewer."""

from __future__ import annotations

import http.client
import json
import os
import socket
import threading

import pytest

from subconscious.viewer.backend import SeeBackend
from subconscious.viewer.server import ViewerServer
from tests.harness.hooks import hook_loaded_modules


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "CLAUDE"))}
    env.update(HOME=str(tmp_path), SUBCONSCIOUS_STATE_DIR=str(tmp_path / "local"), SUBCONSCIOUS_HOST="desk",
               LETTA_HOME=str(tmp_path / "shared"), LETTA_BASE_URL=f"http://127.0.0.1:{closed_port()}",
               LETTA_AGENT_ID="agent-00000000-0000-4000-8000-000000000000")
    srv = ViewerServer(SeeBackend(env=env, cwd=str(tmp_path)))
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def call(srv, method, path, headers=None, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


def test_page_and_files_are_served_with_the_token_and_protective_headers(server):
    status, headers, body = call(server, "GET", f"/?token={server.token}")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    page = body.decode()
    assert f'content="{server.token}"' in page and "__SUBCONSCIOUS_TOKEN__" not in page
    assert "script-src 'self'" in headers["Content-Security-Policy"] and headers["Referrer-Policy"] == "no-referrer"
    assert headers["Cache-Control"] == "no-store" and "Access-Control-Allow-Origin" not in headers
    status, headers, body = call(server, "GET", "/static/app.js", {"X-Subconscious-Token": server.token})
    assert status == 200 and headers["Content-Type"].startswith("text/javascript") and b"textContent" in body
    assert call(server, "HEAD", "/static/app.css")[0] == 403
    assert call(server, "GET", f"/static/../server.py?token={server.token}")[0] == 404


def test_letta_down_leaves_the_home_readable_and_says_why_the_memory_is_not(server):
    token = {"X-Subconscious-Token": server.token}
    status, _, body = call(server, "GET", "/api/memory", token)
    assert status == 502
    assert "cannot connect" in json.loads(body)["error"]
    status, _, body = call(server, "GET", "/api/health", token)
    data = json.loads(body)["data"]
    assert status == 200 and data["host"] == "desk" and data["encryption"]["enabled"] is False
    status, _, body = call(server, "GET", "/api/sessions", token)
    assert status == 200 and json.loads(body)["data"]["sessions"] == []


def test_malformed_edits_are_refused_before_anything_is_sent(server):
    headers = {"X-Subconscious-Token": server.token, "Content-Type": "application/json"}
    assert call(server, "POST", "/api/blocks/human", headers, b"{not json")[0] == 400
    assert call(server, "POST", "/api/blocks/human", headers, json.dumps({"value": 3}).encode())[0] == 400
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.putrequest("POST", "/api/blocks/human")
    for k, v in {**headers, "Content-Length": str(2 << 20)}.items():
        conn.putheader(k, v)
    conn.endheaders()  # a 2 MiB body announced, none sent: refused without waiting for it
    assert conn.getresponse().status == 413
    conn.close()
    assert call(server, "POST", "/api/memory", headers, b"{}")[0] == 404
    status, _, body = call(server, "POST", "/api/blocks/human", headers, json.dumps({"value": "v"}).encode())
    assert status == 502 and "cannot connect" in json.loads(body)["error"]  # it did try the (down) server


def raw_post(srv, length_header: str) -> tuple[int, bytes]:
    """A POST whose Content-Length is whatever the client wrote, on a raw socket (http.client checks it)."""
    with socket.create_connection(("127.0.0.1", srv.port), timeout=30) as s:
        s.sendall(f"POST /api/blocks/human HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\n"
                  f"X-Subconscious-Token: {srv.token}\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {length_header}\r\n\r\n".encode())
        data = b""
        while b"\r\n\r\n" not in data:
            piece = s.recv(65536)
            if not piece:
                break
            data += piece
    return int(data.split(b" ", 2)[1]), data


@pytest.mark.parametrize("length, status", [("abc", 400), ("-1", 400), ("1_000", 400), ("\u0661\u0662".encode().decode("latin-1"), 400),
                                            ("", 400), ("0x10", 400), ("12abc", 400), ("99999999999999999999999", 413)])
def test_a_bad_content_length_is_a_client_error_never_a_500(server, length, status):
    got, data = raw_post(server, length)
    assert got == status, data
    assert call(server, "GET", f"/api/health?token={server.token}")[0] != 500  # and the server still answers


def test_no_hook_loads_the_mcp_sdk_or_the_viewer(tmp_path):
    for event, modules, stderr in hook_loaded_modules(tmp_path, f"http://127.0.0.1:{closed_port()}"):
        unwanted = sorted(m for m in modules if m.split(".")[0] in ("mcp", "mcp_types", "pydantic")
                          or m.startswith(("subconscious.viewer", "subconscious.mcp.server")))
        assert unwanted == [], (event, stderr[-2000:])
