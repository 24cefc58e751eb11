"""Paging the conversation's messages as Letta 0.16.8 does it: ``limit`` counts stored rows, each row becomes
zero or more messages, so a page may be short (or long) with more to come; an unknown ``after`` id is
ignored (the listing starts at the oldest message)."""

from __future__ import annotations

import httpx

from subconscious.letta.client import LettaClient
from tests.harness.sizes import examples

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


from hypothesis import assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

ROWS = st.lists(st.lists(st.sampled_from(["assistant_message", "reasoning_message", "user_message"]), max_size=2),
                max_size=40)


@given(ROWS, st.integers(1, 7), st.data())
@settings(max_examples=examples(150), deadline=None)
def test_the_hooks_look_back_reads_every_row_up_to_the_watermark(kinds, page, data):
    """Issue 25: the notes look-back (events/messages.read_pages) pages as the worker does: rows that carry
    no message (or several) never end it early; it reaches the watermark wherever it is."""
    from subconscious.hooks.events.messages import read_pages

    rows = [[{"message_type": k, "content": f"r{i}"} for k in row] for i, row in enumerate(kinds)]
    # ``page`` message-less rows in a row make an empty page: the listing's end as far as anyone can tell
    # (no id to page on) — a limit of the API (paging.py says so), not tested here
    assume(not any(all(not r for r in rows[i:i + page]) for i in range(len(rows) - page + 1)))
    handler, ids, _ = server(rows)
    with_msgs = [i for i, r in enumerate(rows) if r]
    mark_row = data.draw(st.sampled_from(with_msgs)) if with_msgs and data.draw(st.booleans()) else None
    mark = ids[mark_row] if mark_row is not None else None
    with LettaClient("http://letta.test", "k", transport=httpx.MockTransport(handler)) as c:
        got, found = read_pages(lambda before: c.list_messages(CONV, limit=page, before=before), mark, page,
                                max_pages=100)
    newest_first = [m for i in reversed(range(len(rows))) for m in rows[i]]
    assert found == (mark is not None)
    if mark is None:
        assert [m["content"] for m in got] == [m["content"] for m in newest_first]
    else:
        newer = [m["content"] for i in reversed(range(mark_row + 1, len(rows))) for m in rows[i]]
        assert [m["content"] for m in got][:len(newer)] == newer
