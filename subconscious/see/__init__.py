"""See and ask the subconscious: what it knows, what it said, which sessions feed it — as plain data.

Every function returns dicts/lists of JSON-ready values (``json.dumps`` takes them as they are) and is the
one place the command line (``subconscious memory|messages|sessions|ask``), the MCP server and the viewer
get these facts from. Nothing here is imported by a hook.

Interface (stable; fields may be added, none removed)::

    from subconscious.see import SeeHome, memory, memory_history, messages, sessions, ask, health
    home = SeeHome()                  # env=os.environ, cwd=None, client=None (a LettaClient from settings)
    try: ...
    finally: home.close()             # closes the client it made

    memory(home, label=None, since_ms=None) -> {
        "agent": {"id", "name"},
        "blocks": [{"label", "description", "size", "limit", "value", "id"}],   # by label
        "since": None | {"at": iso, "baseline": None | {"at_ms", "at", "source", "session"?, "host"?,
                         "host_name"?}, "changes": [{"label", "status": new|modified|removed,
                         "removed": [line], "added": [line], "value"}]}}         # as the hooks inject
        # LookupError: no agent yet, or no block with that label
    memory_history(home) -> {"agent", "timeline": [{"at_ms", "at", "source": session|seen|server,
                              "values": {label: value}, "changes": None | [change as above], ...}]}
        # oldest first, ends with the server's values now ("source": "server")
    set_block(home, label, value) -> block row          # an explicit edit, through the Letta API
    search_memory(home, query, top_k=10) -> {"agent", "blocks": [{"label", "line"}],
                              "archival": None | [{"content", "timestamp", "tags"}], "archival_error"}

    messages(home, session=None, host=None, limit=20) -> {
        "messages": [{"id", "date", "text", "shown": bool, "session", "conversation", "host",
                      "host_name"}],          # newest first, across sessions; host = id or name
        "sessions": n_scanned, "errors": [{"session", "conversation", "error"}]}

    sessions(home, server=True) -> {
        "sessions": [{"session", "project", "host", "host_name", "conversation", "agent",
                      "started", "updated", "cursor", "last_seen_message_id",
                      "last_delivery",        # server: date of the newest message the worker sent
                      "pending",              # [status pending rows] on its own machine, None elsewhere
                      "ended", "end_reason"}],   # None until the session record has them
        "hosts": {id: name}, "this_host": id, "errors": [...]}
    session_rows(home) -> the same rows from the state files alone (no server call)

    ask(home, text, on_item=None) -> {"agent", "conversation", "created": bool, "reply": str,
                                       "messages": [{"type", "text", "id", "date"}], "stop_reason"}
        # one turn on the agent's side conversation (shared setting "askConversation", created once,
        # reused by every machine, never a session's conversation); on_item(item) sees each stream item
    health(home) -> what `subconscious doctor --json` prints

Times: ISO 8601 strings (UTC, ``Z``); ``subconscious.see.when.parse_since("2h" | iso, now_ms)`` turns what a
person types into ``since_ms``. Errors of the server are ``subconscious.letta.errors.LettaError``.
"""

from __future__ import annotations

from .ask import ask, side_conversation
from .health import health
from .home import SeeHome
from .memory import memory, memory_history, search_memory, set_block
from .messages import messages
from .sessions import session_rows, sessions
from .when import parse_since

__all__ = ["SeeHome", "memory", "memory_history", "search_memory", "set_block", "messages", "sessions",
           "session_rows", "ask", "side_conversation", "health", "parse_since"]
