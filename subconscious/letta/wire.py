"""The smallest HTTP/1.1 client that does a hook's requests: one GET (or a small POST) on a fresh connection.

``urllib.request`` costs the hooks ~20 ms of imports (``http.client`` pulls in the ``email`` package;
both import ``ssl`` even for ``http://``); this needs the C module ``_socket`` alone for ``http://`` (the
``socket`` module around it imports ``enum`` and ``selectors``: ~10 ms), and ``socket`` + ``ssl`` for
``https://``.
It follows no redirect (the caller reports a 3xx, as lite always did: a redirect would carry the API key to
another host), decodes ``Content-Length`` and ``chunked`` bodies, and sends ``Connection: close``.
Host names go to the resolver as ASCII bytes, so the ``idna`` codec is not imported for them.

Raises :class:`TimeoutError` (``socket.timeout`` is the same class) when ``timeout`` passes on the connect or any read,
:class:`OSError` for a connection that fails or an answer that is not HTTP. Proxies are not handled: the
caller uses urllib when the environment names one.
"""

from __future__ import annotations

MAX_BODY = 64 * 1024 * 1024
PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy")


class BadResponse(OSError):
    """What came back is not an HTTP/1.x answer we can read."""


def proxied(environ) -> bool:
    """Whether the environment names a proxy (then urllib, which honours it and ``no_proxy``, is used)."""
    return any(v for k, v in environ.items() if k.lower() in PROXY_VARS)


def split_url(url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, path with query) of an ``http://`` or ``https://`` URL."""
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in ("http", "https"):
        raise ValueError(f"not an http(s) URL: {url[:100]!r}")
    netloc, slash, path = rest.partition("/")
    path, _, _ = ("/" + path if slash else "/").partition("#")
    netloc = netloc.rpartition("@")[2]
    if netloc.startswith("["):  # [v6]:port
        host, _, port_text = netloc[1:].partition("]")
        port_text = port_text[1:] if port_text.startswith(":") else ""
    else:
        host, _, port_text = netloc.partition(":")
    if not host:
        raise ValueError(f"no host in {url[:100]!r}")
    port = int(port_text) if port_text else (443 if scheme == "https" else 80)
    return scheme, host, port, path


def get(url: str, headers: dict[str, str], timeout: float) -> tuple[int, dict[str, str], bytes]:
    """GET ``url``: (status, headers with lower-case names, body)."""
    return request("GET", url, headers, timeout)


def request(method: str, url: str, headers: dict[str, str], timeout: float, body: bytes | None = None
            ) -> tuple[int, dict[str, str], bytes]:
    """``method`` ``url`` (with ``body``, sent with its Content-Length): (status, headers with lower-case
    names, body)."""
    scheme, host, port, path = split_url(url)
    address = host.encode("ascii") if host.isascii() else host  # bytes: no idna codec import
    if scheme == "https":
        import socket
        import ssl

        sock = ssl.create_default_context().wrap_socket(socket.create_connection((address, port), timeout=timeout),
                                                        server_hostname=host)
    else:
        sock = connect(address, port, timeout)
    try:
        netloc = f"[{host}]" if ":" in host else host
        if port != (443 if scheme == "https" else 80):
            netloc += f":{port}"
        lines = [f"{method} {path} HTTP/1.1", f"Host: {netloc}", "Connection: close", "Accept-Encoding: identity"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        if body is not None:
            lines.append(f"Content-Length: {len(body)}")
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b""))
        return _read_response(sock)
    finally:
        sock.close()


def connect(address, port: int, timeout: float):
    """``socket.create_connection((address, port), timeout)`` on the C module: each address the resolver
    gives, in its order, until one connects; the last error if none does."""
    import _socket

    error: OSError | None = None
    for family, kind, proto, _, sockaddr in _socket.getaddrinfo(address, port, 0, _socket.SOCK_STREAM):
        sock = _socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout)
            sock.connect(sockaddr)
            return sock
        except OSError as exc:
            error = exc
            sock.close()
    raise error or OSError(f"no address for {address!r}")


def _read_response(sock) -> tuple[int, dict[str, str], bytes]:
    buf = bytearray()
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise BadResponse("the connection closed before the answer's headers ended")
        buf += chunk
        if len(buf) > 1 << 20:
            raise BadResponse("the answer's headers are over 1 MiB")
    head, _, rest = bytes(buf).partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise BadResponse(f"not an HTTP answer: {status_line[:80]!r}")
    status = int(parts[1])
    found: dict[str, str] = {}
    for line in header_lines:
        name, sep, value = line.partition(":")
        if sep:
            found[name.strip().lower()] = value.strip()
    body = bytearray(rest)

    def more() -> bool:
        chunk = sock.recv(65536)
        if chunk:
            body.extend(chunk)
            if len(body) > MAX_BODY:
                raise BadResponse(f"the answer is over {MAX_BODY} bytes")
        return bool(chunk)

    if "chunked" in found.get("transfer-encoding", "").lower():
        return status, found, _dechunk(body, more)
    length = found.get("content-length")
    if length is not None and length.isdigit():
        while len(body) < int(length):
            if not more():
                raise BadResponse("the connection closed before the answer's body ended")
        return status, found, bytes(body[:int(length)])
    while more():  # no length: the body ends with the connection
        pass
    return status, found, bytes(body)


def _dechunk(body: bytearray, more) -> bytes:
    out = bytearray()
    pos = 0
    while True:
        while b"\r\n" not in body[pos:pos + 100]:
            if not more():
                raise BadResponse("the connection closed inside a chunked body")
        end = body.index(b"\r\n", pos)
        size_text = bytes(body[pos:end]).split(b";")[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise BadResponse(f"bad chunk size {size_text[:20]!r}") from None
        pos = end + 2
        if size == 0:
            return bytes(out)
        while len(body) < pos + size + 2:
            if not more():
                raise BadResponse("the connection closed inside a chunk")
        out += body[pos:pos + size]
        pos += size + 2
