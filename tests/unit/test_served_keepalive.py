"""The served server's kept-alive connections to Letta (subconscious.served.keepalive), against a real HTTP/1.1
server on 127.0.0.1 that does what uvicorn does to idle connections (closes them after a pause) and one that
drops a reused connection as the request arrives. issue 22: after a pause that followed parallel reads, the one
retry took another stale connection and the hook's fetch failed."""

from __future__ import annotations

import http.server
import json
import threading
import time
import urllib.request

import pytest

from subconscious.served.keepalive import KeptAlive


class Upstream:
    def __init__(self, idle_timeout: float | None = None, drop_reused: bool = False, parallel: int = 2):
        self.connections = 0
        self.barrier = threading.Barrier(parallel, timeout=10)
        upstream = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = idle_timeout  # uvicorn: an idle kept-alive connection is closed after its keep-alive timeout

            def setup(self):
                super().setup()
                upstream.connections += 1
                self.n = 0

            def log_message(self, *a):
                pass

            def do_GET(self):
                self.n += 1
                if drop_reused and self.n > 1:  # closed in the instant the request came: no answer at all
                    self.close_connection = True
                    return
                if self.path.startswith("/together"):
                    upstream.barrier.wait()  # both requests on the wire at once: two connections
                raw = json.dumps({"path": self.path}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def get(pool: KeptAlive, url: str) -> dict:
    return json.loads(pool(urllib.request.Request(url), timeout=10).read())


def two_idle_connections(pool: KeptAlive, up: Upstream) -> None:
    results = []
    threads = [threading.Thread(target=lambda i=i: results.append(get(pool, f"{up.url}/together/{i}"))) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 2 and up.connections == 2 and pool.opened == 2


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)


def test_connections_the_server_closed_while_idle_are_not_used_after_a_pause():
    up = Upstream(idle_timeout=0.3)
    pool = KeptAlive(fallback=None)
    try:
        two_idle_connections(pool, up)
        time.sleep(0.8)  # the server closed both
        assert get(pool, f"{up.url}/after-the-pause") == {"path": "/after-the-pause"}
        assert get(pool, f"{up.url}/and-again") == {"path": "/and-again"}  # the fresh one is kept alive
        assert pool.opened == 3
    finally:
        pool.close()
        up.close()


def test_a_reused_connection_that_fails_is_retried_on_a_fresh_one_not_another_idle_one():
    up = Upstream(drop_reused=True)
    pool = KeptAlive(fallback=None)
    try:
        two_idle_connections(pool, up)
        assert get(pool, f"{up.url}/next") == {"path": "/next"}
        assert pool.opened == 3
    finally:
        pool.close()
        up.close()
