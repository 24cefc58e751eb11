"""Shared by UserPromptSubmit and PreToolUse: fetch what the agent said since the session's watermark (and,
in full mode, its memory blocks), claim what this hook will show, and record it only once it is printed.

One note is shown once even when several hooks run at the same moment (parallel tool calls):

1. look back by id: pages of the conversation, newest first, until the watermark
   (``last_seen_message_id``) is reached — however many messages are new (up to ``MAX_PAGES`` pages);
2. claim (:mod:`subconscious.local.claims`, a machine-local compare-and-set): this hook takes the new notes that
   no other hook printed or holds;
3. print (hookrun writes and flushes stdout), then :meth:`Output.written`: the claimed notes are recorded
   as printed, and the watermark moves over the notes printed so far — by compare-and-set in the store,
   never back (a slower hook that fetched earlier cannot undo a newer one), never past a note not printed.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Callable

from ...local import claims
from ..pipeline import SessionContext, Skip

log = logging.getLogger("subconscious")
MAX_PAGES = 20


class Output(str):
    """A hook's stdout text; hookrun calls ``written()`` once the text was written and flushed."""

    written: Callable[[], None] | None = None


def claims_dir(ctx: SessionContext):
    return ctx.rt.local.root / "shown"


def now_ms() -> int:
    return int(time.time() * 1000)


def read_pages(page_of: Callable[[str | None], list[dict]], last_seen: str | None, page: int,
               max_pages: int = MAX_PAGES, time_left: Callable[[], float] = lambda: 1.0) -> tuple[list[dict], bool]:
    """Messages newest first, page after page (``before`` the oldest of the last page), until
    ``last_seen`` is among them; returns (messages, whether ``last_seen`` was reached). Pages by rows
    (:mod:`subconscious.letta.paging`): a short page is not the end, only an empty one is."""
    from ...letta.paging import Pages

    out: list[dict] = []
    pages = Pages(page_of, max_pages=max_pages, time_left=time_left)
    for batch in pages:
        out += batch
        if last_seen is not None and any(m.get("id") == last_seen for m in batch):
            return out, True
    if last_seen is not None and not pages.complete:
        log.warning("messages: more than %d messages since the last one shown (or the server is slow: %s); "
                    "older ones are not shown yet", len(out), pages.stopped)
    return out, False


def claim_notes(directory, session_id: str, look, *, owner: int, now: int, block_key: str | None = None,
                alive: Callable[[int], bool] | None = None) -> tuple[list[str], frozenset[str]]:
    """Step 2: claim the new notes (and a block change) nobody printed or holds: (ids claimed, ids printed)."""
    wanted = [n.id for n in look.notes] + ([block_key] if block_key else [])
    kw = {"alive": alive} if alive is not None else {}
    return claims.claim(directory, session_id, wanted, owner=owner, now_ms=now, **kw)


def to_show(look, mine) -> list:
    """The claimed notes, newest first (as the context builders take them)."""
    taken = set(mine)
    return [n for n in reversed(look.notes) if n.id in taken]


def after_printed(directory, session_id: str, look, mine, printed, *, owner: int) -> str | None:
    """Step 3, once the output is out: record the claimed notes as printed; returns where the watermark
    may move (over printed notes only)."""
    from ...injection.context import watermark_after

    done = claims.mark_printed(directory, session_id, mine, owner=owner) if mine else printed
    return watermark_after(look, done)


def watermark_change(look, conv: str, mark: str | None, also: Callable | None = None) -> Callable:
    """The store update (a compare-and-set inside ``update_session``): the watermark moves to ``mark`` only
    forward in the server's order; ``also(state)`` adds to the same write (the blocks shown)."""
    from ...injection.context import moves_forward

    def change(cur):
        if cur is None or cur.conversation_id != conv:
            return None  # a new conversation since: what this hook saw belongs to the old one
        out = cur
        if moves_forward(look, cur.last_seen_message_id, mark):
            out = out.evolve(last_seen_message_id=mark)
        if also is not None:
            out = also(out)
        return out if out is not cur else None

    return change


def page_reader(ctx: SessionContext, conv: str, page: int, budget: float, *,
                strict: bool = True) -> Callable[[str | None], list[dict]]:
    """Reads one page of ``conv``'s messages, newest first, before a message id (None: the newest), through
    the stdlib client within the hook's ``budget``: the notes look-back's and the re-injection's page.
    ``strict``: an answer that is not a list is a LettaProtocolError (else: an empty page, the end)."""
    from ...letta import lite  # stdlib reads: these hooks skip httpx's import cost
    from ...letta.config import check_id
    from ...letta.errors import LettaProtocolError

    s = ctx.settings
    path = f"conversations/{check_id(conv, 'conversation id')}/messages"

    def page_of(before: str | None) -> list[dict]:
        params = {"limit": page, "order": "desc"}
        if before:
            params["before"] = before
        body = lite.get_json(s.base_url, path, api_key=s.api_key, params=params, timeout=ctx.remaining(budget),
                             what=f"listing messages of {conv}")
        if not isinstance(body, list):
            if not strict:
                return []
            raise LettaProtocolError("listing messages: the answer is not a list", "", detail=str(body)[:200])
        return [m for m in body if isinstance(m, dict)] if strict else body

    return page_of


def fetch_injection(ctx: SessionContext, *, page: int, budget: float, pre_tool: bool) -> Output | None:
    session = ctx.store.session(ctx.session_id)
    if session is None or not session.conversation_id:
        raise Skip("no conversation for this session yet (SessionStart has not run or failed)")
    local = ctx.local
    full = ctx.settings.mode == "full"
    from ...injection.context import as_block, look_back, pre_tool_injection, prompt_injection

    keyring = cached = policy = None
    if full:
        from ...injection.blockcache import machine_policy, open_cached
        from ...privacy.keys import KeyRing

        keyring = KeyRing.load(ctx.rt.local.keys)
        policy = machine_policy(ctx.store, keyring)  # the shared setting as this machine's pin allows
        # {} = nothing readable here; a plain, retired-key or older value while on is refused (logged)
        cached = open_cached(ctx.store, keyring, ctx.session_id, session.last_block_values, policy)
    from ...letta import lite  # stdlib reads: these hooks skip httpx's import cost

    ctx.require_key()
    s = ctx.settings
    conv, base = session.conversation_id, session.last_seen_message_id
    page_of = page_reader(ctx, conv, page, budget)
    messages, found = read_pages(page_of, base, page,
                                 time_left=lambda: budget - (time.monotonic() - ctx.event.started))
    blocks = []
    if full and session.agent_id:
        agent = lite.get_agent(s.base_url, session.agent_id, api_key=s.api_key, timeout=ctx.remaining(budget))
        blocks = agent.get("blocks") or []
    look = look_back(messages, base, found)

    values = shown = block_key = None
    if full:
        values = {b.label: b.value for b in map(as_block, blocks)}
        shown = cached or None
        if values != cached and not (pre_tool and shown is None):  # a change of blocks to show
            import hashlib
            import json

            digest = hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()[:24]
            block_key = claims.BLOCKS + digest
    directory, owner = claims_dir(ctx), os.getpid()
    mine, printed = claim_notes(directory, ctx.session_id, look, owner=owner, now=now_ms(), block_key=block_key)
    blocks_mine = block_key is not None and block_key in mine
    last_values = shown if blocks_mine or not full else values  # another hook shows this block change
    build = pre_tool_injection if pre_tool else prompt_injection
    extra = {} if pre_tool else {"sdk_tools": ctx.settings.sdk_tools}
    injection = build(ctx.settings.mode, local.agent_name, to_show(look, mine), None, blocks, last_values, **extra)
    if injection.deferred:  # left for the next hook by Claude Code's limit: not this hook's to record
        claims.release(directory, ctx.session_id, injection.deferred, owner=owner)
        mine = [n for n in mine if n not in set(injection.deferred)]

    def written() -> None:
        mark = after_printed(directory, ctx.session_id, look, mine, printed, owner=owner)
        new_values = injection.block_values if blocks_mine else None
        if mark == base and new_values is None:
            return
        also = None
        if new_values is not None:
            from ...injection.blockcache import seen_versions, with_blocks

            seen = seen_versions(ctx.store, keyring, ctx.session_id) if policy and policy.enabled else None
            also = lambda state: with_blocks(state, new_values, keyring, policy, seen)[0]  # noqa: E731
        ctx.store.update_session(ctx.session_id, watermark_change(look, conv, mark, also))

    if not injection.text:
        written()  # nothing to print: still move the watermark over what others printed
        return None
    out = Output(injection.text)
    out.written = written
    return out


def take_fetch(ctx: SessionContext, ttl_ms: int) -> bool:
    """The fetch TTL as a compare-and-set: True for the one hook that fetches now."""
    return claims.take_fetch(claims_dir(ctx), ctx.session_id, ttl_ms, now_ms())
