"""Escaping for what the subconscious injects into Claude Code, and the only tag names it emits. Pure.

All text from the agent or the user goes through :func:`escape` (element text) or :func:`escape_attr`
(attribute values), so nothing it writes can close our tags or open new ones; :data:`TAG_NAMES` lists every
tag name :mod:`.context` emits, and nothing from the agent ever becomes one.
"""

from __future__ import annotations

import re

# Every tag name the injections emit (context.py and its parts); nothing from the agent ever becomes one.
TAG_NAMES = frozenset({"letta_message", "instruction", "letta_context", "letta_memory_blocks", "letta_memory_block",
                       "letta_memory_update", "letta_update"})


_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")  # not allowed in XML 1.0


def escape(text: str) -> str:
    """Escape ``& < >``, drop characters XML cannot hold (NUL, ANSI escapes, lone surrogates) and
    turn carriage returns into newlines."""
    text = _NOT_XML.sub("", text).replace("\r\n", "\n").replace("\r", "\n")
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def escape_attr(text: str) -> str:
    return (escape(text).replace('"', "&quot;").replace("'", "&apos;")
            .replace("\r", " ").replace("\n", " ").replace("\t", " "))
