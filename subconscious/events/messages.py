"""Shared by UserPromptSubmit and PreToolUse: fetch what the agent said (and, in full mode, its memory
blocks), work out what is new for this session, and remember what was shown."""

from __future__ import annotations

import time

from .. import localsession
from ..pipeline import SessionContext, Skip


def fetch_injection(ctx: SessionContext, *, limit: int, budget: float, pre_tool: bool) -> str | None:
    session = ctx.store.session(ctx.session_id)
    if session is None or not session.conversation_id:
        raise Skip("no conversation for this session yet (SessionStart has not run or failed)")
    local = localsession.load(ctx.sessions_dir, ctx.session_id)
    full = ctx.settings.mode == "full"
    from ..blockcache import load_blocks, store_blocks
    from ..context import pre_tool_injection, prompt_injection
    from ..keys import KeyRing

    keyring = KeyRing.load(ctx.rt.local.keys) if full else None
    cached = load_blocks(ctx.store, keyring, ctx.session_id) if full else None
    with ctx.client(timeout=ctx.remaining(budget)) as client:
        messages = client.list_messages(session.conversation_id, limit=limit)
        blocks = []
        if full and session.agent_id:
            blocks = client.get_agent(session.agent_id, include_blocks=True).get("blocks") or []
    local.last_fetch_ms = int(time.time() * 1000)
    localsession.save(ctx.sessions_dir, local)
    build = pre_tool_injection if pre_tool else prompt_injection
    injection = build(ctx.settings.mode, local.agent_name, messages, session.last_seen_message_id,
                      blocks, (cached or None) if full else None)
    if injection.last_seen_id != session.last_seen_message_id:
        ctx.store.update_session(ctx.session_id, lambda cur: cur.evolve(last_seen_message_id=injection.last_seen_id))
    if full and injection.block_values is not None and injection.block_values != cached:
        store_blocks(ctx.store, keyring, ctx.session_id, injection.block_values)
    return injection.text


def fresh_enough(ctx: SessionContext, ttl_ms: int) -> bool:
    local = localsession.load(ctx.sessions_dir, ctx.session_id)
    return 0 <= int(time.time() * 1000) - local.last_fetch_ms < ttl_ms
