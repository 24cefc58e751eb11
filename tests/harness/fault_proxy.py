"""A fault-injecting HTTP/1.1 proxy for tests and benchmarks (stdlib only), on 127.0.0.1.

It sits in front of a real server (the Letta test server) and forwards every request unchanged unless a
rule matches. Responses pass through unbuffered: each chunk of an upstream body (an SSE stream) is
relayed as soon as it arrives. Every request is logged (``proxy.requests``), so the proxy also counts the
HTTP requests a process makes.

    proxy = FaultProxy("http://127.0.0.1:8283").start()
    proxy.url                                    # point LETTA_BASE_URL here
    proxy.fail(503, method="POST", path=r"/messages$", count=2)   # answer 503 twice, then forward
    proxy.down(); ...; proxy.up()                # connections refused (nothing listens), then back
    proxy.clear()                                # forget all rules
    proxy.stop()

Faults (one ``Rule`` each; ``method``/``path`` select requests, ``path`` is a regex searched in the path
without the query; ``count`` is how many matching requests it hits, None = all; ``skip`` lets that many
matching requests through untouched first, e.g. ``drop_after_forward(path=…, skip=20)`` drops the reply to
the 21st POST of a turn):

    fail(status)              answer ``status`` (5xx, 409, …) with a JSON ``{"detail": …}``; not forwarded
    reset()                   read the request, then reset the connection; not forwarded
    delay(seconds)            wait before forwarding (``after=True``: forward, wait before answering)
    cut_stream(after_events)  forward the request, relay the first ``after_events`` SSE events, then send
                              ``garbage`` (bytes) if given, then abort the connection (``end="abort"``,
                              the chunked body never ends) or end the body cleanly (``end="clean"``)
    drop_after_forward()      forward the request, let the server answer in full, close the connection
                              without a byte to the client: the server took it, the client never knows

Faults that forward the request keep reading the server's answer to its end after the client is cut off
(``drain=True``), so the server finishes its work as it would when a network drops a reply.
``down()`` closes the listening socket (connections are refused, as with a stopped server) and ``up()``
listens again on the same port.

Run alone: ``python -m tests.harness.fault_proxy --upstream URL [--port N]`` (a pass-through proxy that
prints each request; handy to count a command's requests by hand).
"""
from __future__ import annotations

import argparse
import json
import re
import socket
import struct
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass, field

HOST = "127.0.0.1"
MAX_HEAD = 64 * 1024
_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade",
        "content-length"}


@dataclass
class Rule:
    action: str  # fail | reset | delay | cut_stream | drop_after_forward
    method: str | None = None
    path: str | None = None
    count: int | None = 1
    status: int = 503
    body: bytes | None = None
    seconds: float = 0.0
    after: bool = False
    after_events: int = 1
    garbage: bytes | None = None
    end: str = "abort"
    drain: bool = True
    skip: int = 0  # matching requests let through untouched before the rule applies
    hits: int = 0
    skipped: int = 0

    def matches(self, method: str, path: str) -> bool:
        if self.count is not None and self.hits >= self.count:
            return False
        if self.method and self.method.upper() != method.upper():
            return False
        return not self.path or re.search(self.path, path) is not None


@dataclass
class Seen:
    """One request as the proxy saw it."""

    method: str
    path: str
    action: str  # "forward" or the fault applied
    status: int | None = None  # the status the client got (None: it got no answer)
    t: float = field(default_factory=time.time)
    ms: float = 0.0
    body: bytes = b""  # the request body as the client sent it (what left the machine)


class _Closed(Exception):
    pass


class _Conn:
    """Buffered reads from a socket: lines, exact sizes, and whatever is there."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buf = b""

    def _more(self) -> bool:
        data = self.sock.recv(65536)
        if not data:
            return False
        self.buf += data
        return True

    def head(self) -> bytes:
        while b"\r\n\r\n" not in self.buf:
            if len(self.buf) > MAX_HEAD or not self._more():
                raise _Closed()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        return head

    def line(self) -> bytes:
        while b"\r\n" not in self.buf:
            if not self._more():
                raise _Closed()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def exact(self, n: int) -> bytes:
        while len(self.buf) < n:
            if not self._more():
                raise _Closed()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def some(self) -> bytes:
        if not self.buf and not self._more():
            return b""
        out, self.buf = self.buf, b""
        return out


def _parse_head(head: bytes) -> tuple[str, list[tuple[str, str]]]:
    lines = head.decode("latin-1").split("\r\n")
    headers = []
    for ln in lines[1:]:
        name, _, value = ln.partition(":")
        headers.append((name.strip(), value.strip()))
    return lines[0], headers


def _get(headers: list[tuple[str, str]], name: str) -> str | None:
    for k, v in headers:
        if k.lower() == name:
            return v
    return None


def _read_body(conn: _Conn, headers: list[tuple[str, str]]) -> bytes:
    """A request body (Content-Length or chunked)."""
    if "chunked" in (_get(headers, "transfer-encoding") or "").lower():
        out = b""
        while True:
            size = int(conn.line().split(b";")[0], 16)
            if size == 0:
                while conn.line():
                    pass
                return out
            out += conn.exact(size)
            conn.exact(2)
    n = int(_get(headers, "content-length") or 0)
    return conn.exact(n) if n else b""


def _abort(sock: socket.socket) -> None:
    """Close with a reset (SO_LINGER 0), as a crashed peer or a dropped network does."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


class _SSECounter:
    """Finds where the n-th complete SSE event ends in a byte stream fed piece by piece."""

    def __init__(self):
        self.events = 0
        self.tail = b""

    def split_after(self, data: bytes, n: int) -> int | None:
        """Offset in ``data`` just after the n-th event's blank line, or None if not in ``data``."""
        text = self.tail + data
        start = 0
        while True:
            ends = [i for i in (text.find(b"\n\n", start), text.find(b"\r\n\r\n", start)) if i >= 0]
            if not ends:
                break
            i = min(ends)
            end = i + (4 if text[i:i + 4] == b"\r\n\r\n" else 2)
            self.events += 1
            if self.events == n:
                off = end - len(self.tail)
                self.tail = b""
                return max(off, 0)
            start = end
        self.tail = text[start:][-8:]
        return None


class FaultProxy:
    def __init__(self, upstream: str, port: int = 0, *, verbose: bool = False, connect_timeout: float = 10.0):
        u = urllib.parse.urlsplit(upstream)
        if u.scheme != "http" or not u.hostname:
            raise ValueError(f"upstream must be an http:// URL, got {upstream!r}")
        self.upstream = (u.hostname, u.port or 80)
        self.prefix = u.path.rstrip("/")
        self.port = port
        self.verbose = verbose
        self.connect_timeout = connect_timeout
        self.rules: list[Rule] = []
        self.requests: list[Seen] = []
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._accepting: threading.Thread | None = None
        self._socks: set[socket.socket] = set()
        self._stopped = False

    # ------------------------------------------------------------ control

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}{self.prefix}"

    def start(self) -> "FaultProxy":
        self._stopped = False
        self.up()
        return self

    def up(self) -> None:
        """Listen (again, on the same port once one was chosen)."""
        if self._listener is not None:
            return
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((HOST, self.port))
        s.listen(128)
        self.port = s.getsockname()[1]
        self._listener = s
        self._accepting = threading.Thread(target=self._accept_loop, args=(s,), daemon=True,
                                           name=f"fault-proxy-{self.port}")
        self._accepting.start()

    def down(self) -> None:
        """Stop listening: new connections are refused, as when the server is not running."""
        s, self._listener = self._listener, None
        if s is not None:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        if self._accepting is not None:
            self._accepting.join(timeout=5)
            self._accepting = None

    def stop(self) -> None:
        self._stopped = True
        self.down()
        with self._lock:
            socks = list(self._socks)
        for s in socks:
            _abort(s)

    def __enter__(self) -> "FaultProxy":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def add(self, rule: Rule) -> Rule:
        with self._lock:
            self.rules.append(rule)
        return rule

    def clear(self) -> None:
        with self._lock:
            self.rules.clear()

    def fail(self, status: int, *, method=None, path=None, count: int | None = 1, detail: str | None = None) -> Rule:
        body = json.dumps({"detail": detail or f"fault-proxy: injected HTTP {status}"}).encode()
        return self.add(Rule("fail", method, path, count, status=status, body=body))

    def reset(self, *, method=None, path=None, count: int | None = 1) -> Rule:
        return self.add(Rule("reset", method, path, count))

    def delay(self, seconds: float, *, method=None, path=None, count: int | None = 1, after: bool = False) -> Rule:
        return self.add(Rule("delay", method, path, count, seconds=seconds, after=after))

    def cut_stream(self, after_events: int = 1, *, garbage: bytes | None = None, end: str = "abort", method=None,
                   path=None, count: int | None = 1, drain: bool = True) -> Rule:
        if end not in ("abort", "clean"):
            raise ValueError("end is 'abort' or 'clean'")
        return self.add(Rule("cut_stream", method, path, count, after_events=after_events, garbage=garbage,
                             end=end, drain=drain))

    def drop_after_forward(self, *, method=None, path=None, count: int | None = 1, skip: int = 0) -> Rule:
        return self.add(Rule("drop_after_forward", method, path, count, skip=skip))

    def seen(self, method: str | None = None, path: str | None = None) -> list[Seen]:
        with self._lock:
            return [r for r in self.requests if (not method or r.method == method)
                    and (not path or re.search(path, r.path))]

    def reset_log(self) -> None:
        with self._lock:
            self.requests.clear()

    # ------------------------------------------------------------ serving

    def _accept_loop(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _track(self, s: socket.socket, on: bool) -> None:
        with self._lock:
            (self._socks.add if on else self._socks.discard)(s)

    def _pick(self, method: str, path: str) -> Rule | None:
        with self._lock:
            for r in self.rules:
                if r.matches(method, path):
                    if r.skipped < r.skip:
                        r.skipped += 1
                        continue
                    r.hits += 1
                    return r
        return None

    def _serve(self, client: socket.socket) -> None:
        self._track(client, True)
        seen = None
        try:
            conn = _Conn(client)
            head = conn.head()
            request_line, headers = _parse_head(head)
            method, target, _ = (request_line.split(" ", 2) + ["", ""])[:3]
            body = _read_body(conn, headers)
            path = urllib.parse.urlsplit(target).path
            rule = self._pick(method, path)
            seen = Seen(method, path, rule.action if rule else "forward", body=body)
            started = time.monotonic()
            with self._lock:
                self.requests.append(seen)
            try:
                self._handle(client, rule, method, target, headers, body, seen)
            finally:
                seen.ms = (time.monotonic() - started) * 1000
            if self.verbose:
                print(f"[fault-proxy] {method} {path} -> {seen.action} {seen.status} {seen.ms:.0f} ms",
                      file=sys.stderr, flush=True)
        except (_Closed, OSError, ValueError):
            pass
        finally:
            self._track(client, False)
            try:
                client.close()
            except OSError:
                pass

    def _send(self, client: socket.socket, status: int, body: bytes, ctype: str = "application/json") -> None:
        reason = {409: "Conflict", 500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable",
                  504: "Gateway Timeout"}.get(status, "Fault")
        client.sendall(f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                       f"Connection: close\r\n\r\n".encode() + body)

    def _handle(self, client, rule, method, target, headers, body, seen: Seen) -> None:
        action = rule.action if rule else "forward"
        if action == "fail":
            self._send(client, rule.status, rule.body or b"{}")
            seen.status = rule.status
            return
        if action == "reset":
            _abort(client)
            return
        if action == "delay" and not rule.after:
            time.sleep(rule.seconds)
        upstream = socket.create_connection(self.upstream, timeout=self.connect_timeout)
        upstream.settimeout(None)
        self._track(upstream, True)
        try:
            out = [f"{method} {target} HTTP/1.1"]
            for k, v in headers:
                if k.lower() not in _HOP and k.lower() != "host":
                    out.append(f"{k}: {v}")
            out += [f"Host: {self.upstream[0]}:{self.upstream[1]}", "Connection: close"]
            if body or method in ("POST", "PUT", "PATCH"):
                out.append(f"Content-Length: {len(body)}")
            upstream.sendall(("\r\n".join(out) + "\r\n\r\n").encode("latin-1") + body)
            up = _Conn(upstream)
            status_line, rheaders = _parse_head(up.head())
            status = int(status_line.split(" ")[1])
            if action == "drop_after_forward":
                for _ in self._body_pieces(up, rheaders, method, status):
                    pass  # the server finishes; the client gets nothing
                _abort(client)
                return
            if action == "delay" and rule.after:
                time.sleep(rule.seconds)
            chunked = "chunked" in (_get(rheaders, "transfer-encoding") or "").lower()
            length = _get(rheaders, "content-length")
            framing = "chunked" if chunked or length is None else "length"
            hdr = [status_line] + [f"{k}: {v}" for k, v in rheaders if k.lower() not in _HOP]
            hdr += ["Connection: close", "Transfer-Encoding: chunked" if framing == "chunked"
                    else f"Content-Length: {length}"]
            client.sendall(("\r\n".join(hdr) + "\r\n\r\n").encode("latin-1"))
            seen.status = status
            pieces = self._body_pieces(up, rheaders, method, status)
            if action == "cut_stream":
                self._cut(client, pieces, rule, framing)
                return
            for piece in pieces:
                client.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if framing == "chunked" else piece)
            if framing == "chunked":
                client.sendall(b"0\r\n\r\n")
        finally:
            self._track(upstream, False)
            upstream.close()

    def _cut(self, client, pieces, rule: Rule, framing: str) -> None:
        counter = _SSECounter()

        def send(data: bytes) -> None:
            if data:
                client.sendall(b"%x\r\n%s\r\n" % (len(data), data) if framing == "chunked" else data)

        for piece in pieces:
            off = counter.split_after(piece, rule.after_events) if rule.after_events > 0 else 0
            if off is None:
                send(piece)
                continue
            send(piece[:off])
            if rule.garbage:
                send(rule.garbage)
            if rule.end == "clean" and framing == "chunked":
                client.sendall(b"0\r\n\r\n")
                client.shutdown(socket.SHUT_WR)
            else:
                _abort(client)
            break
        if rule.drain:
            for _ in pieces:
                pass

    @staticmethod
    def _body_pieces(up: _Conn, headers, method: str, status: int):
        """The upstream body, piece by piece as it arrives (de-chunked)."""
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            return
        if "chunked" in (_get(headers, "transfer-encoding") or "").lower():
            while True:
                size = int(up.line().split(b";")[0], 16)
                if size == 0:
                    return
                left = size
                while left:
                    if not up.buf and not up._more():
                        raise _Closed()
                    piece, up.buf = up.buf[:left], up.buf[left:]
                    left -= len(piece)
                    yield piece
                up.exact(2)
        length = _get(headers, "content-length")
        if length is not None:
            left = int(length)
            while left:
                if not up.buf and not up._more():
                    raise _Closed()
                piece, up.buf = up.buf[:left], up.buf[left:]
                left -= len(piece)
                yield piece
            return
        while True:
            piece = up.some()
            if not piece:
                return
            yield piece


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="pass-through (fault-injecting) HTTP proxy for tests")
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--port", type=int, default=0)
    a = ap.parse_args(argv)
    proxy = FaultProxy(a.upstream, a.port, verbose=True).start()
    print(f"[fault-proxy] {proxy.url} -> {a.upstream}", file=sys.stderr, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        proxy.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
