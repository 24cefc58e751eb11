"""The hooks' HTTP client (subconscious.letta.wire) reads a chunked answer however the network cuts it:
the body is what the server sent, whatever the chunk sizes and however the bytes arrive."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from subconscious.letta.wire import BadResponse, _dechunk, split_url


def chunked(body: bytes, sizes: list[int]) -> bytes:
    out, pos = bytearray(), 0
    for n in sizes:
        piece = body[pos:pos + n]
        if not piece:
            break
        out += b"%x\r\n" % len(piece) + piece + b"\r\n"
        pos += len(piece)
    if pos < len(body):
        out += b"%X;ext=1\r\n" % (len(body) - pos) + body[pos:] + b"\r\n"
    return bytes(out + b"0\r\n\r\n")


def feed(wire: bytes, cuts: list[int]):
    """A body buffer holding the first piece and a ``more()`` that appends the rest piece by piece."""
    pieces, pos = [], 0
    for n in cuts + [len(wire)]:
        if pos >= len(wire):
            break
        pieces.append(wire[pos:pos + max(1, n)])
        pos += max(1, n)
    body = bytearray(pieces[0] if pieces else b"")
    rest = iter(pieces[1:])

    def more() -> bool:
        piece = next(rest, b"")
        body.extend(piece)
        return bool(piece)

    return body, more


@given(st.binary(max_size=3000), st.lists(st.integers(1, 700), max_size=8), st.lists(st.integers(1, 400), max_size=30))
def test_a_chunked_body_decodes_to_what_was_sent(body, sizes, cuts):
    buf, more = feed(chunked(body, sizes), cuts)
    assert _dechunk(buf, more) == body


@given(st.binary(min_size=1, max_size=500), st.integers(1, 50))
def test_a_cut_off_chunked_body_is_an_error_not_a_short_body(body, lost):
    wire = chunked(body, [])
    buf, more = feed(wire[:max(1, len(wire) - 5 - lost)], [7])
    with pytest.raises(BadResponse):
        _dechunk(buf, more)


def test_urls_split_as_the_letta_base_url_is_written():
    assert split_url("http://127.0.0.1:8283/v1/agents/x?include=a") == ("http", "127.0.0.1", 8283, "/v1/agents/x?include=a")
    assert split_url("https://user:pw@api.letta.com/v1") == ("https", "api.letta.com", 443, "/v1")
    assert split_url("http://[::1]:99/v1#frag") == ("http", "::1", 99, "/v1")
    with pytest.raises(ValueError):
        split_url("ftp://x/")
