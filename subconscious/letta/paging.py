"""Paging a conversation's messages the way Letta pages them: by rows (stdlib only, no IO of its own).

Letta 0.16.8 applies ``limit`` to its stored rows and then converts each row into zero or more messages
(an assistant row holds reasoning and tool calls; some rows carry no message at all), so a page can be
shorter than ``limit`` — or longer — while more follows. The listing is over only when a page comes back
empty (or the server ignores the cursor: a page of nothing new). A limit of the API: ``limit`` rows in a
row that carry no message make an empty page too, with no id to page on — so listings ask for pages of
50 or 100 rows (nearly every row carries a message). Every listing of a conversation goes
through :class:`Pages`: the worker's (:meth:`subconscious.letta.client.LettaClient.iter_messages`), the
hooks' notes look-back (:mod:`subconscious.hooks.events.messages`), the re-injection after a compaction
(:mod:`subconscious.hooks.events.reinject`) and the viewer/CLI (through the client).
"""

from __future__ import annotations

from typing import Callable, Iterator

END, STUCK, MAX_PAGES, OUT_OF_TIME = "end", "stuck", "max-pages", "out-of-time"


class Pages:
    """Iterate the pages (lists of message dicts) ``fetch(cursor)`` returns, ``cursor`` the id of the last
    message of the previous page (None first); each page holds only messages not seen before. After the
    iteration, ``stopped`` says why it ended: :data:`END` (an empty page: nothing follows), :data:`STUCK`
    (nothing new, or no id to page on), :data:`MAX_PAGES` or :data:`OUT_OF_TIME` (``time_left()`` below 1 s
    after a page) — the last two with more possibly left."""

    def __init__(self, fetch: Callable[[str | None], list[dict]], *, cursor: str | None = None,
                 max_pages: int = 50, time_left: Callable[[], float] | None = None):
        self.fetch, self.cursor, self.max_pages, self.time_left = fetch, cursor, max_pages, time_left
        self.stopped: str | None = None
        self.pages = 0

    def __iter__(self) -> Iterator[list[dict]]:
        seen: set = set()
        cursor = self.cursor
        while True:
            if self.pages >= self.max_pages:
                self.stopped = MAX_PAGES
                return
            if self.pages and self.time_left is not None and self.time_left() < 1.0:
                self.stopped = OUT_OF_TIME
                return
            batch = [m for m in self.fetch(cursor) if isinstance(m, dict)]
            self.pages += 1
            if not batch:
                self.stopped = END
                return
            fresh = [m for m in batch if m.get("id") is None or m.get("id") not in seen]
            seen.update(m.get("id") for m in fresh)
            ids = [m.get("id") for m in batch if isinstance(m.get("id"), str) and m.get("id")]
            if fresh:
                yield fresh
            if not fresh or not ids or ids[-1] == cursor:
                self.stopped = STUCK
                return
            cursor = ids[-1]

    @property
    def complete(self) -> bool:
        """Whether the listing reached the conversation's end (nothing was left unread)."""
        return self.stopped in (END, STUCK)
