"""Paging the conversation's messages as Letta 0.16.8 does it: ``limit`` counts stored rows, each row becomes
zero or more messages, so a page may be short (or long) with more to come; an unknown ``after`` id is
ignored (the listing starts at the oldest message)."""

from __future__ import annotations

import httpx

from subconscious.letta.client import LettaClient

CONV = "conv-00000000-0000-4000-8000-000000000001"


def server(rows: list[list[dict]]):
    """rows: each stored row's messages (a row may hold none); answers like the real listing."""
    ids = [f"message-00000000-0000-4000-8000-{i:012d}" for i in range(len(rows))]
    calls = []

    def handler(req: httpx.Request) -> httpx.Response:
        q = dict(req.url.params)
        calls.append(q)
        idx = list(range(len(rows)))
        if q.get("after") in ids:
            idx = [i for i in idx if i > ids.index(q["after"])]
        if q.get("before") in ids:
            idx = [i for i in idx if i < ids.index(q["before"])]
        if q.get("order", "desc") == "desc":
            idx = idx[::-1]
        idx = idx[:int(q.get("limit", 100))]
        return httpx.Response(200, json=[{**m, "id": ids[i]} for i in idx for m in rows[i]])

    return handler, ids, calls


def test_a_short_page_does_not_end_the_listing_and_newest_first_pages_back():
    rows = [[{"message_type": "user_message", "content": f"u{i}"}] if i % 3 else [] for i in range(25)]
    handler, ids, calls = server(rows)
    with LettaClient("http://letta.test", "k", transport=httpx.MockTransport(handler)) as c:
        asc = list(c.iter_messages(CONV, page=5))
        assert [m["content"] for m in asc] == [f"u{i}" for i in range(25) if i % 3]
        assert [m["content"] for m in c.iter_messages(CONV, after=ids[10], page=5)] == \
            [f"u{i}" for i in range(11, 25) if i % 3]
        assert list(c.iter_messages_newest_first(CONV, page=5)) == asc[::-1]
