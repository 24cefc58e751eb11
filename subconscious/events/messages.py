"""Shared by UserPromptSubmit and PreToolUse: fetch what the agent said (and, in full mode, its memory
blocks), work out what is new for this session, and remember what was shown."""

from __future__ import annotations

import time

from .. import localsession
from ..pipeline import SessionContext, Skip


def fetch_injection(ctx: SessionContext, *, limit: int, budget: float, pre_tool: bool,
                    local: localsession.LocalSession | None = None) -> str | None:
    """``local``: the machine-local session file if the caller already loaded it."""
    session = ctx.store.session(ctx.session_id)
    if session is None or not session.conversation_id:
        raise Skip("no conversation for this session yet (SessionStart has not run or failed)")
    local = local or localsession.load(ctx.sessions_dir, ctx.session_id)
    full = ctx.settings.mode == "full"
    from ..context import pre_tool_injection, prompt_injection

    keyring = cached = None
    if full:
        from ..blockcache import open_blocks
        from ..keys import KeyRing

        keyring = KeyRing.load(ctx.rt.local.keys)
        cached = open_blocks(session.last_block_values, keyring, ctx.session_id)  # {} = nothing readable here
    from ..letta import lite  # stdlib reads: these hooks skip httpx's import cost

    ctx.require_key()
    s = ctx.settings
    messages = lite.list_messages(s.base_url, session.conversation_id, api_key=s.api_key, limit=limit,
                                  timeout=ctx.remaining(budget))
    blocks = []
    if full and session.agent_id:
        agent = lite.get_agent(s.base_url, session.agent_id, api_key=s.api_key, timeout=ctx.remaining(budget))
        blocks = agent.get("blocks") or []
    local.last_fetch_ms = int(time.time() * 1000)
    localsession.save(ctx.sessions_dir, local)
    build = pre_tool_injection if pre_tool else prompt_injection
    extra = {} if pre_tool else {"sdk_tools": ctx.settings.sdk_tools}
    injection = build(ctx.settings.mode, local.agent_name, messages, session.last_seen_message_id,
                      blocks, (cached or None) if full else None, **extra)
    blocks_changed = full and injection.block_values is not None and injection.block_values != cached
    if injection.last_seen_id != session.last_seen_message_id or blocks_changed:
        policy = None
        if blocks_changed:
            from ..keys import read_policy

            policy = read_policy(ctx.store)

        def change(cur):  # one write for what was shown: the last message and the blocks
            cur = (cur or session).evolve(last_seen_message_id=injection.last_seen_id)
            if policy is not None:
                from ..blockcache import with_blocks

                cur, _ = with_blocks(cur, injection.block_values, keyring, policy)
            return cur

        ctx.store.update_session(ctx.session_id, change)
    return injection.text


def fresh_enough(local: localsession.LocalSession, ttl_ms: int) -> bool:
    return 0 <= int(time.time() * 1000) - local.last_fetch_ms < ttl_ms
