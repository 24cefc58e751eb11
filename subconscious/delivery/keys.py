"""How a delivered update is recognised again: its idempotency key, the marker it leaves in the
conversation, and the digest by which a final answer delivered ahead of its transcript line is known. Pure.
"""

from __future__ import annotations

from typing import Sequence

from .update_xml import xml_escape


def lines_marker(session_id: str, first: int) -> str:
    """What a delivered update starting at line ``first`` contains (searched for in the conversation)."""
    return '<session_id>%s</session_id>\n<lines first="%d" last="' % (xml_escape(session_id), first)


def delivery_key(session_id: str, first: int, last: int, raw_lines: Sequence[str]) -> str:
    """The idempotency key of an update: its session, first and last line and a digest of the raw lines it
    covers. The same range of the same lines always has the same key; a rewritten transcript gets new ones."""
    import hashlib

    h = hashlib.sha256(("%s\0%d\0%d\0" % (session_id, first, last)).encode())
    for line in raw_lines:
        h.update(line.encode("utf-8", "surrogatepass"))
        h.update(b"\n")
    return h.hexdigest()[:20]


def answer_digest(text: str) -> str:
    """How a final answer is recognised when its transcript line arrives after it was delivered."""
    import hashlib

    return hashlib.sha256(text.strip().encode("utf-8", "surrogatepass")).hexdigest()[:20]
