"""What the agent said to each session: when, to which session, on which machine, and whether Claude Code
was shown it yet.

"Shown" is the session's watermark in the shared state (``lastSeenMessageId``): the hooks move it over a
note only once they have printed it into Claude Code's context (hooks/events/messages.py), so a note at or
before the watermark (in the server's order) was shown, a note after it not yet.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Mapping

from ..letta.messages import content_text
from .when import ms_of_iso

PAGE = 50


# --------------------------------------------------------------------------- pure

def conversation_notes(messages_newest_first: Iterable[Mapping[str, Any]], last_seen: str | None,
                       limit: int | None = None) -> list[dict]:
    """The agent's notes (assistant messages with text), newest first, at most ``limit``:
    ``{id, date, text, shown}``. ``shown``: at or older than ``last_seen`` (never, when it is None)."""
    out: list[dict] = []
    reached = False
    for m in messages_newest_first:
        if last_seen is not None and m.get("id") == last_seen:
            reached = True
        if m.get("message_type") != "assistant_message":
            continue
        text = content_text(m.get("content"))
        if not text.strip():
            continue
        out.append({"id": m.get("id"), "date": m.get("date"), "text": text, "shown": reached})
        if limit is not None and len(out) >= limit:
            break
    return out


def newest_first(rows: Iterable[dict], limit: int | None) -> list[dict]:
    """Notes of several conversations, newest first by date (undated last), at most ``limit``."""
    ordered = sorted(rows, key=lambda r: ms_of_iso(r.get("date")) or 0, reverse=True)
    return ordered if limit is None else ordered[:limit]


def matches_host(row: Mapping[str, Any], host: str | None) -> bool:
    return host is None or host in (row.get("host"), row.get("host_name"))


# --------------------------------------------------------------------------- shell

def _notes_of(client, conversation_id: str, last_seen: str | None, limit: int | None) -> list[dict]:
    pages: Iterator[dict] = client.iter_messages_newest_first(conversation_id, page=PAGE)
    return conversation_notes(pages, last_seen, limit)


def messages(home, *, session: str | None = None, host: str | None = None, limit: int | None = 20) -> dict:
    """``{messages: [{id, date, text, shown, session, conversation, host, host_name}…], errors: [...]}``,
    newest first across every session of the shared home (``session``/``host``: only those; a host is
    matched by id or readable name)."""
    from .sessions import session_rows

    rows = [r for r in session_rows(home) if r["conversation"] and (session is None or r["session"] == session)
            and matches_host(r, host)]
    client = home.letta()
    found: list[dict] = []
    errors: list[dict] = []
    from ..letta.errors import LettaConnectionError

    down: Exception | None = None  # the server did not answer: the other sessions do not wait for it again
    for r in rows:
        if down is not None:
            errors.append({"session": r["session"], "conversation": r["conversation"], "error": f"not read: the server did not answer before ({type(down).__name__})"})
            continue
        try:
            notes = _notes_of(client, r["conversation"], r["last_seen_message_id"], limit)
        except Exception as exc:  # noqa: BLE001 - one unreadable conversation does not hide the others
            errors.append({"session": r["session"], "conversation": r["conversation"], "error": str(exc)})
            if isinstance(exc, LettaConnectionError):
                down = exc
            continue
        for n in notes:
            n.update(session=r["session"], conversation=r["conversation"], host=r["host"], host_name=r["host_name"])
        found += notes
    return {"messages": newest_first(found, limit), "sessions": len(rows), "errors": errors}
