"""Attack: a Letta server (or anything at LETTA_BASE_URL) answers 307 to another port; neither client may
follow it, so the Authorization header (the LETTA_API_KEY) never reaches the second server.

Two real HTTP servers on 127.0.0.1: ``redirector`` answers every request with a 307 to ``collector``,
which records the headers of whatever reaches it. Both clients: the stdlib reader on the hot path
(``letta/lite.py``) and the httpx client (``letta/client.py``), GET and the streaming POST.
"""
from __future__ import annotations

import http.server
import threading

import pytest

from subconscious.letta import lite
from subconscious.letta.errors import LettaHTTPError

KEY = "sk-let-RedirectVictimKey-4242"
CONV = "conv-00000000-0000-4000-8000-000000000000"
AGENT = "agent-00000000-0000-4000-8000-000000000000"


def _server(handler_body):
    class H(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def _any(self):
            handler_body(self)

        do_GET = do_POST = do_PATCH = _any

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


@pytest.fixture
def servers():
    seen: list[dict] = []

    def collect(h):
        length = int(h.headers.get("Content-Length") or 0)
        if length:
            h.rfile.read(length)
        seen.append({k.lower(): v for k, v in h.headers.items()})
        body = b'{"id": "%s", "blocks": []}' % AGENT.encode() if "/agents/" in h.path else b"[]"
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    collector = _server(collect)
    target = "http://127.0.0.1:%d" % collector.server_address[1]

    def redirect(h):
        length = int(h.headers.get("Content-Length") or 0)
        if length:
            h.rfile.read(length)
        h.send_response(307)
        h.send_header("Location", target + h.path)
        h.send_header("Content-Length", "0")
        h.end_headers()

    redirector = _server(redirect)
    base = "http://127.0.0.1:%d" % redirector.server_address[1]
    yield base, target, seen
    for s in (redirector, collector):
        s.shutdown()
        s.server_close()


def _no_key_arrived(seen):
    assert all("authorization" not in h for h in seen), seen
    assert not any(KEY in v for h in seen for v in h.values())
    assert seen == []  # nothing at all reached the other port: the redirect is not followed


def test_the_collector_records_what_reaches_it(servers):
    """The harness itself works: a request sent straight to the collector is recorded with its key."""
    _, target, seen = servers
    assert lite.list_messages(target, CONV, api_key=KEY) == []
    assert seen and seen[0]["authorization"] == "Bearer " + KEY


def test_lite_reader_never_follows_a_redirect_with_the_key(servers):
    base, target, seen = servers
    with pytest.raises(LettaHTTPError) as exc:
        lite.list_messages(base, CONV, api_key=KEY, timeout=2)
    assert exc.value.status == 307 and "redirect" in str(exc.value) and "127.0.0.1:" in str(exc.value)
    assert "LETTA_BASE_URL" in str(exc.value) and KEY not in str(exc.value)
    with pytest.raises(LettaHTTPError):
        lite.get_agent(base, AGENT, api_key=KEY, timeout=2)
    _no_key_arrived(seen)


def test_httpx_client_never_follows_a_redirect_with_the_key(servers):
    from subconscious.letta.client import LettaClient

    base, target, seen = servers
    with LettaClient(base, KEY, timeout=2) as c:
        assert c._http.follow_redirects is False
        with pytest.raises(LettaHTTPError) as exc:
            c.list_messages(CONV)
        assert exc.value.status == 307 and "redirect" in str(exc.value) and KEY not in str(exc.value)
        with pytest.raises(LettaHTTPError):
            c.get_agent(AGENT)
        with pytest.raises(LettaHTTPError) as exc:
            list(c.stream_message(CONV, "hello"))
        assert exc.value.status == 307
        with pytest.raises(LettaHTTPError):
            c.send_message(CONV, "hello")
    _no_key_arrived(seen)
