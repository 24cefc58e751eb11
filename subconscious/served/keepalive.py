"""Letta reads on kept-alive connections, for the long-lived ``subconscious serve``.

A command hook opens one TCP (and TLS) connection per request and drops it; the server keeps a few idle
connections per Letta host and reuses them. :class:`KeptAlive` is an opener in the shape
:mod:`subconscious.letta.lite` takes (``opener(request, timeout=...)``: a response to ``read()``; an
``urllib.error.HTTPError`` for any status but 2xx, which lite turns into the usual LettaError with the same
messages), so the reads, their errors and the redaction of the key stay lite's. An idle connection the server
closed (uvicorn drops them after ~5 s) is found before it is used — its socket reads as ready (the server's
FIN) — or by its age (:data:`MAX_IDLE`), and closed; one that fails anyway (closed in the instant it was taken)
is retried once on a *fresh* connection (GETs only; the other idle ones of that host, as old, go too), never on
another idle one. A proxy from the environment, which lite honours, sends the request the ordinary way (no
keep-alive through it).
"""

from __future__ import annotations

import http.client
import io
import select
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Callable

STALE = (http.client.RemoteDisconnected, http.client.BadStatusLine, ConnectionResetError, BrokenPipeError,
         ConnectionAbortedError)
MAX_IDLE = 50.0  # seconds an idle connection is kept (Letta Cloud's balancers keep them about a minute)


class _Response(io.BytesIO):
    def __init__(self, body: bytes, status: int, headers):
        super().__init__(body)
        self.status, self.headers = status, headers


class KeptAlive:
    def __init__(self, fallback: Callable, max_idle_per_host: int = 4):
        self._fallback = fallback  # lite's urllib opener: for proxied hosts
        self._idle: dict[tuple[str, str, int], list[tuple[http.client.HTTPConnection, float]]] = {}
        self._lock = threading.Lock()
        self._max_idle = max_idle_per_host
        self._tls: ssl.SSLContext | None = None
        self.opened = 0  # connections made (for tests and the benchmark)

    def __call__(self, req: urllib.request.Request, timeout: float):
        parts = urllib.parse.urlsplit(req.full_url)
        host = parts.hostname or ""
        if _proxied(parts.scheme, host):
            return self._fallback(req, timeout=timeout)
        key = (parts.scheme, host, parts.port or (443 if parts.scheme == "https" else 80))
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        method = req.get_method()
        headers = dict(req.header_items())
        for attempt in (0, 1):
            conn, reused = self._take(key, timeout, fresh=attempt > 0)
            try:
                conn.request(method, target, body=req.data, headers=headers)
                resp = conn.getresponse()
                body = resp.read()
            except STALE as exc:
                conn.close()
                if reused and attempt == 0 and method == "GET":
                    self._drop_idle(key)  # as old as this one: likely closed too
                    continue  # the server had closed it while idle: once more on a new connection
                raise urllib.error.URLError(exc) from None
            except BaseException:
                conn.close()
                raise
            if resp.will_close:
                conn.close()
            else:
                self._give(key, conn)
            if not 200 <= resp.status < 300:
                raise urllib.error.HTTPError(req.full_url, resp.status, resp.reason, resp.headers, io.BytesIO(body))
            return _Response(body, resp.status, resp.headers)
        raise AssertionError("unreachable")  # pragma: no cover

    def _take(self, key, timeout: float, fresh: bool = False) -> tuple[http.client.HTTPConnection, bool]:
        while not fresh:
            with self._lock:
                idle = self._idle.get(key) or []
                conn, since = idle.pop() if idle else (None, 0.0)
            if conn is None:
                break
            if time.monotonic() - since > MAX_IDLE or _closed_by_peer(conn):
                conn.close()  # found stale before a request was lost on it
                continue
            conn.timeout = timeout
            conn.sock.settimeout(timeout)
            return conn, True
        scheme, host, port = key
        self.opened += 1
        if scheme == "https":
            if self._tls is None:
                self._tls = ssl.create_default_context()
            return http.client.HTTPSConnection(host, port, timeout=timeout, context=self._tls), False
        return http.client.HTTPConnection(host, port, timeout=timeout), False

    def _give(self, key, conn) -> None:
        with self._lock:
            idle = self._idle.setdefault(key, [])
            if len(idle) < self._max_idle:
                idle.append((conn, time.monotonic()))
                return
        conn.close()

    def _drop_idle(self, key) -> None:
        with self._lock:
            conns = self._idle.pop(key, [])
        for c, _ in conns:
            c.close()

    def close(self) -> None:
        with self._lock:
            conns = [c for idle in self._idle.values() for c, _ in idle]
            self._idle.clear()
        for c in conns:
            c.close()


def _closed_by_peer(conn: http.client.HTTPConnection) -> bool:
    """An idle connection whose socket reads as ready: the server closed it (or sent what nobody asked for)."""
    if conn.sock is None:
        return True
    try:
        return bool(select.select([conn.sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True


def _proxied(scheme: str, host: str) -> bool:
    proxies = urllib.request.getproxies()
    return bool(proxies.get(scheme)) and not urllib.request.proxy_bypass(host)
