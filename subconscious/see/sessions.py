"""Every session of the shared home, from every machine: project, host, started, last delivery, cursor,
pending, ended.

From the shared state (the Store API): the session's merged record (conversation, cursor =
``lastProcessedIndex``, watermark = ``lastSeenMessageId``, ``startedAt``, the end when the record has one)
and its machine (the host that recorded its conversation in ``conversations.json``, else its record's
writer). From this machine's own files: what is pending here (retry markers of the worker). From the
server, when asked: the last delivery (the newest message the worker sent into the session's
conversation) and the project named by the session's start message (its ``project_id``, the same on every
machine; without the server, this machine's own sessions show their project directory's name).
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

from .when import iso_ms

_PROJECT_TEXT = re.compile(r"<project>([^<]*)</project>")
_PROJECT_ID = re.compile(r"<project_id>([^<]*)</project_id>")
_PROJECT_ATTRS = re.compile(r"<project\s+([^>]*?)/?>")
_ATTR = re.compile(r'(\w+)="([^"]*)"')


# --------------------------------------------------------------------------- pure

def _extra(state) -> dict:
    raw = getattr(state, "extra", "") or ""
    try:
        out = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return out if isinstance(out, dict) else {}


def _first(*values: Any) -> Any:
    return next((v for v in values if v not in (None, "")), None)


def project_of_start(text: str) -> str | None:
    """The project a ``<claude_code_session_start>`` message names: its ``project_id`` (the identity every
    machine shares: a normalised git remote), else its ``id`` attribute, else its text."""
    import html

    m = _PROJECT_ATTRS.search(text)
    if m:
        attrs = dict(_ATTR.findall(m.group(1)))
        name = attrs.get("id") or attrs.get("name")
        if name:
            return html.unescape(name)
    m = _PROJECT_ID.search(text) or _PROJECT_TEXT.search(text)  # the id is the same on every machine
    return html.unescape(m.group(1)).strip() or None if m else None


def session_row(sid: str, state, conversation, host_names: Mapping[str, str], *, this_host: str,
                local: Mapping[str, Any] | None = None, pending: list[dict] | None = None) -> dict:
    """One session as plain data. ``conversation``: its live entry of the conversations map (or None);
    ``local``: this machine's session file as a dict, if it has one; ``pending``: this machine's pending
    deliveries of it."""
    extra = _extra(state) if state is not None else {}
    host = _first(getattr(conversation, "host", None), getattr(state, "host", None))
    local = local or {}
    local_extra = local.get("extra") if isinstance(local.get("extra"), dict) else {}
    root = local.get("project_root")
    project = _first(extra.get("project") if isinstance(extra.get("project"), str) else None,
                     (extra.get("project") or {}).get("id") if isinstance(extra.get("project"), dict) else None,
                     local_extra.get("project") if isinstance(local_extra.get("project"), str) else None,
                     root.rstrip("/").rsplit("/", 1)[-1] if isinstance(root, str) and root else None)
    ended = _first(getattr(state, "ended_at", None), extra.get("endedAt"), extra.get("ended_at"))
    reason = _first(getattr(state, "end_reason", None), extra.get("endReason"), extra.get("end_reason"))
    here = host == this_host
    return {
        "session": sid,
        "project": project,
        "host": host,
        "host_name": host_names.get(host, host) if host else None,
        "conversation": _first(getattr(state, "conversation_id", None), getattr(conversation, "conversation_id", None)),
        "agent": _first(getattr(state, "agent_id", None), getattr(conversation, "agent_id", None)),
        "started": getattr(state, "started_at", None),
        "updated": iso_ms(state.stamp.wall) if state is not None and state.stamp.wall else None,
        "cursor": getattr(state, "last_processed_index", None),
        "last_seen_message_id": getattr(state, "last_seen_message_id", None),
        "last_delivery": None,
        "pending": (pending or []) if here else None,  # None: kept on the session's own machine, not seen here
        "ended": ended,
        "end_reason": reason,
    }


def last_delivery(messages_newest_first, limit: int = 200) -> str | None:
    """The date of the newest message the worker sent (a user message) in a conversation listing."""
    for i, m in enumerate(messages_newest_first):
        if m.get("message_type") == "user_message":
            return m.get("date")
        if i >= limit:
            return None
    return None


# --------------------------------------------------------------------------- shell

def session_rows(home) -> list[dict]:
    """Every session of the shared home from the state files alone (no server call), oldest start first."""
    from ..local import sessions as localsession
    from ..local.sessions import pending_deliveries

    sessions_dir = home.local_root / "sessions"
    try:
        pend = pending_deliveries(sessions_dir)
    except OSError:
        pend = []
    names = home.host_names()
    live = home.snapshot.live
    rows = []
    for sid, state in home.session_states.items():
        local = None
        if localsession.path_for(sessions_dir, sid).exists():
            try:
                from dataclasses import asdict

                local = asdict(localsession.load(sessions_dir, sid))
            except Exception:  # noqa: BLE001 - a damaged local file: no local facts
                local = None
        rows.append(session_row(sid, state, live.get(sid), names, this_host=home.host_id, local=local,
                                pending=[p for p in pend if p["session"] == sid]))
    return sorted(rows, key=lambda r: (r["started"] or "", r["session"]))


def sessions(home, *, server: bool = True) -> dict:
    """``{sessions: [row…], hosts: {id: name}, this_host, errors}``; with ``server`` each row also gets its
    last delivery and the project its start message names."""
    rows = session_rows(home)
    errors: list[dict] = []
    if server:
        from ..letta.errors import LettaConnectionError

        client = home.letta()
        down: Exception | None = None  # the server did not answer: the other rows do not wait for it again
        for r in rows:
            if not r["conversation"]:
                continue
            if down is not None:
                errors.append({"session": r["session"], "conversation": r["conversation"], "error": f"not read: the server did not answer before ({type(down).__name__})"})
                continue
            try:
                r["last_delivery"] = last_delivery(client.iter_messages_newest_first(r["conversation"], page=50))
                for m in client.list_messages(r["conversation"], limit=5, order="asc"):
                    if m.get("message_type") == "user_message":  # the start message: the same on every machine
                        from ..letta.messages import content_text

                        r["project"] = project_of_start(content_text(m.get("content"))) or r["project"]
                        break
            except Exception as exc:  # noqa: BLE001 - one unreadable conversation does not hide the others
                errors.append({"session": r["session"], "conversation": r["conversation"], "error": str(exc)})
                if isinstance(exc, LettaConnectionError):
                    down = exc
    return {"sessions": rows, "hosts": home.host_names(), "this_host": home.host_id, "errors": errors}
