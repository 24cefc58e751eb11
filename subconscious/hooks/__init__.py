"""The hook path: what Claude Code runs on every event and waits on.

Owns the full path's entry (:mod:`.run`), the shortcut that answers a PreToolUse from the last fetch
without the full path (:mod:`.fetch_shortcut`), the pipeline every event goes through and the events
themselves (:mod:`.events`). May import :mod:`subconscious.injection`, :mod:`subconscious.delivery`,
:mod:`subconscious.local`, :mod:`subconscious.privacy`, :mod:`subconscious.letta`,
:mod:`subconscious.state`, :mod:`subconscious.base` and :mod:`subconscious.config`; never a surface
(commands, viewer, served, mcp) and never :mod:`subconscious.cli`.
"""
