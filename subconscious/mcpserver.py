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
memory. Nothing is printed to stdout but the protocol.
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

def search_text(result: Mapping[str, Any], query: str) -> str:
    """What ``search_memory`` answers, from :func:`subconscious.see.search_memory`'s result."""
    lines = []
    blocks = result.get("blocks") or []
    if blocks:
        lines.append(f"Memory blocks: {len(blocks)} line{'s' * (len(blocks) != 1)} holding every word of {query!r}")
        lines += [f"[{b.get('label')}] {b.get('line')}" for b in blocks]
    else:
        lines.append(f"Memory blocks: no line holds every word of {query!r}")
    archival = result.get("archival")
    if archival is None:
        lines.append(f"Archival memory: not searched ({result.get('archival_error') or 'not offered by this server'})")
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

    from . import __version__

    def new_home():
        if home_factory is not None:
            return home_factory()
        from .see import SeeHome

        return SeeHome(env=os.environ, cwd=os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd())

    def reason(exc: BaseException) -> str:
        return str(exc).strip("'\"") or type(exc).__name__

    server = MCPServer("subconscious", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")

    @server.tool(name="search_memory", title="Search the subconscious's memory",
                 annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
                 description="Search what the subconscious remembers across sessions and machines: the lines of "
                             "its memory blocks that hold every word of the query, and its archival-memory "
                             "passages nearest the query (semantic search). An empty query returns every memory block whole.")
    def search_memory(query: str, top_k: int = 10) -> str:
        from .see import memory, search_memory as search

        home = new_home()
        try:
            if not query.strip():
                return blocks_text(memory(home))
            return search_text(search(home, query, top_k=max(1, min(int(top_k), MAX_TOP_K))), query)
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
        from .see import ask

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
        return text

    return server


def serve_stdio() -> int:
    server = build_server()
    server.run("stdio")
    return 0
