"""``subconscious mcp``: an MCP server over stdio (the official ``mcp`` SDK) that the plugin declares, so
Claude Code itself can ask the subconscious and search its memory.

Tools:
  ask_subconscious(question)        one turn with the agent on its side conversation, the same one
                                    ``subconscious ask`` uses (never a session's conversation)
  search_memory(query, top_k=10)    the memory-block lines holding every word of the query, and the
                                    archival-memory passages nearest it (Letta's semantic search, where the
                                    server offers it); an empty query: every block whole

The SDK (~0.5 s and pydantic to import) is imported only here: the hooks never load this module. Every call
reads the shared home afresh (``subconscious.see``), so a session started after the server sees its
memory. Nothing is printed to stdout but the protocol. Every answer is :func:`subconscious.base.termtext.clean`
text: Claude Code shows tool results in the user's terminal, and the agent's text may hold escape sequences.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping

INSTRUCTIONS = (
    "The subconscious is a background Letta agent that reads every Claude Code session's transcript (on "
    "every machine of this user) and keeps memory across sessions. search_memory looks up what it remembers "
    "(its memory blocks and archival memory); ask_subconscious asks it a question directly, on a side "
    "conversation of its own.")
MAX_TOP_K = 50


# --------------------------------------------------------------------------- pure

ECHO_CHARS = 200  # of a query said back in an answer: the model sent it, a 2 MB one need not come back whole
REASON_CHARS = 1000  # of an error's text (a server's answer may quote the request)


def echo(query: str, limit: int = ECHO_CHARS) -> str:
    """The query as an answer names it: quoted, at most ``limit`` characters of it and how long it was."""
    if len(query) <= limit:
        return repr(query)
    return f"{query[:limit]!r}… ({len(query):,} characters)"


def search_text(result: Mapping[str, Any], query: str) -> str:
    """What ``search_memory`` answers, from :func:`subconscious.see.search_memory`'s result."""
    lines = []
    blocks = result.get("blocks") or []
    if blocks:
        lines.append(f"Memory blocks: {len(blocks)} line{'s' * (len(blocks) != 1)} holding every word of {echo(query)}")
        lines += [f"[{b.get('label')}] {b.get('line')}" for b in blocks]
    else:
        lines.append(f"Memory blocks: no line holds every word of {echo(query)}")
    archival = result.get("archival")
    if archival is None:
        why = str(result.get("archival_error") or "not offered by this server")
        why = why if len(why) <= REASON_CHARS else f"{why[:REASON_CHARS]}… ({len(why):,} characters)"
        lines.append(f"Archival memory: not searched ({why})")
    elif not archival:
        lines.append("Archival memory: no passages")
    else:
        lines.append(f"Archival memory: {len(archival)} passage{'s' * (len(archival) != 1)}, nearest first")
        for p in archival:
            when = f" ({p.get('timestamp')})" if p.get("timestamp") else ""
            tags = f" [tags: {', '.join(map(str, p.get('tags') or []))}]" if p.get("tags") else ""
            lines.append(f"- {p.get('content')}{when}{tags}")
    return "\n".join(lines)


def blocks_text(result: Mapping[str, Any]) -> str:
    """Every memory block whole (``search_memory`` with an empty query), from :func:`subconscious.see.memory`."""
    blocks = result.get("blocks") or []
    if not blocks:
        return "The subconscious has no memory blocks."
    parts = []
    for b in blocks:
        limit = f"/{b.get('limit')}" if b.get("limit") else ""
        head = f"## {b.get('label')} ({b.get('size', len(str(b.get('value') or '')))}{limit} chars)"
        if b.get("description"):
            head += f"\n{b.get('description')}"
        parts.append(f"{head}\n{b.get('value') or '(empty)'}")
    return "\n\n".join(parts)


def ask_text(result: Mapping[str, Any]) -> str | None:
    """The agent's reply to ``ask_subconscious`` (None when the turn ended without one)."""
    reply = str(result.get("reply") or "").strip()
    return reply or None


# --------------------------------------------------------------------------- shell

def build_server(home_factory: Callable[[], Any] | None = None):
    """The MCPServer with both tools. ``home_factory`` makes a :class:`subconscious.see.SeeHome` per call."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations

    from .. import __version__
    from ..base.termtext import clean

    def new_home():
        if home_factory is not None:
            return home_factory()
        from ..see import SeeHome

        return SeeHome(env=os.environ, cwd=os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd())

    def reason(exc: BaseException) -> str:
        text = str(exc).strip("'\"") or type(exc).__name__
        text = clean(text)
        return text if len(text) <= REASON_CHARS else f"{text[:REASON_CHARS]}… ({len(text):,} characters)"

    server = MCPServer("subconscious", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")

    @server.tool(name="search_memory", title="Search the subconscious's memory",
                 annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
                 description="Search what the subconscious remembers across sessions and machines: the lines of "
                             "its memory blocks that hold every word of the query, and its archival-memory "
                             "passages nearest the query (semantic search). An empty query returns every memory block whole.")
    def search_memory(query: str, top_k: int = 10) -> str:
        from ..see import search_memory as search
        from ..see import memory

        home = new_home()
        try:
            if not query.strip():
                return clean(blocks_text(memory(home)))
            return clean(search_text(search(home, query, top_k=max(1, min(int(top_k), MAX_TOP_K))), query))
        except LookupError as exc:
            raise ToolError(reason(exc)) from None
        except Exception as exc:  # noqa: BLE001 - the model reads why; a LettaError says what to do
            raise ToolError(f"could not search the memory: {reason(exc)}") from None
        finally:
            home.close()

    @server.tool(name="ask_subconscious", title="Ask the subconscious",
                 annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False),
                 description="Ask the subconscious (the background agent that has read every session of this user, "
                             "on every machine) a question and get its answer. It runs on a conversation of its "
                             "own, never a session's; the agent may update its memory while answering.")
    def ask_subconscious(question: str) -> str:
        from ..see import ask

        if not question.strip():
            raise ToolError("give a question")
        home = new_home()
        try:
            result = ask(home, question)
        except (LookupError, ValueError) as exc:
            raise ToolError(reason(exc)) from None
        except Exception as exc:  # noqa: BLE001
            raise ToolError(f"the subconscious could not answer: {reason(exc)}") from None
        finally:
            home.close()
        text = ask_text(result)
        if text is None:
            raise ToolError(f"the agent's turn ended without an answer (stop reason {result.get('stop_reason')})")
        return clean(text)

    return server


STDIN_GRACE_S = 1.0


def exit_when_stdin_closes(grace: float = STDIN_GRACE_S) -> bool:
    """Exit the process ``grace`` seconds after the other end of stdin closes, whatever is in flight.

    Claude Code stops the server by closing its stdin and waiting for it to exit (MCP's stdio shutdown),
    but the SDK waits for every running call first, and a call can wait on Letta for minutes. A thread
    polls a duplicate of fd 0 (the SDK moves the original) for the hang-up; a call still running then has
    nobody to answer, and every state write is atomic (a kill is safe). False where there is no poll()."""
    import select
    import threading

    if not hasattr(select, "poll"):
        return False
    try:
        fd = os.dup(0)
    except OSError:
        return False
    poller = select.poll()
    poller.register(fd, 0)  # POLLHUP and POLLERR are reported whatever is asked for

    def watch() -> None:
        import sys
        import time

        while True:
            events = poller.poll()
            if any(ev & (select.POLLHUP | select.POLLERR | select.POLLNVAL) for _, ev in events):
                break
        time.sleep(grace)  # the SDK's own exit first, when nothing is in flight
        try:
            sys.stdout.flush()
        except Exception:  # noqa: BLE001 - exiting either way
            pass
        os._exit(0)

    threading.Thread(target=watch, name="stdin-hang-up", daemon=True).start()
    return True


def serve_stdio() -> int:
    server = build_server()
    exit_when_stdin_closes()
    server.run("stdio")
    return 0
