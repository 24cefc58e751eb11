"""A real stdio MCP server named ``filesystem``, for driving Claude Code's MCP tool calls offline (the ``mcp``
package's MCPServer: mcp 2.x renamed FastMCP).

It mirrors the tools of ``@modelcontextprotocol/server-filesystem`` that the tests need, with the same names,
parameters and result text, so Claude Code writes them to its transcript exactly as it would the real ones
(``mcp__filesystem__read_text_file`` ...):

``read_text_file(path, head=None, tail=None)``  the file's text; the first/last N lines with ``head``/``tail``
``write_file(path, content)``                   ``Successfully wrote to <path>``
``read_multiple_files(paths)``                  ``<path>:\\n<content>\\n`` per file, joined by ``\\n---\\n``
                                                (``<path>: Error - <why>`` for a file it could not read)

Paths are taken as given (relative ones against the server's working directory); with directories on the
command line (as the real server takes its allowed directories) a path outside them is refused.

Run: ``python -m tests.harness.mcp_filesystem [ALLOWED_DIR ...]`` (from the repo root, or with the repo on
PYTHONPATH). :func:`write_mcp_config` writes the ``--mcp-config`` file that makes Claude Code start it; run
``claude -p`` with :data:`CLAUDE_ENV` too: Claude Code 2.1.3xx otherwise defers MCP tools behind its ToolSearch
tool, so they are not in the request's ``tools`` and the fake API ignores ``[[tool:mcp__filesystem__...]]``.

    cfg = write_mcp_config(sandbox.root / "mcp.json", allowed_dirs=[sandbox.project_dir])
    sandbox.run("[[tool:mcp__filesystem__read_text_file {...}]] go", env=CLAUDE_ENV,
                allowed_tools=tool_names(), extra_args=["--mcp-config", str(cfg)])
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Iterable, Optional

__all__ = ["SERVER_NAME", "TOOLS", "CLAUDE_ENV", "tool_names", "write_mcp_config", "build_server", "main"]

SERVER_NAME = "filesystem"
TOOLS = ("read_text_file", "write_file", "read_multiple_files")
REPO_ROOT = Path(__file__).resolve().parents[2]
#: For ``claude -p``: offer MCP tools in every request rather than deferring them behind ToolSearch.
CLAUDE_ENV = {"ENABLE_TOOL_SEARCH": "false"}


def tool_names(tools: Iterable[str] = TOOLS) -> tuple[str, ...]:
    """The names Claude Code gives this server's tools (``mcp__filesystem__<tool>``), e.g. for --allowedTools."""
    return tuple("mcp__%s__%s" % (SERVER_NAME, t) for t in tools)


def write_mcp_config(path: Path, allowed_dirs: Iterable[Path] = (), env: Optional[dict] = None) -> Path:
    """Write a ``--mcp-config`` file that starts this server (this interpreter, the repo on PYTHONPATH)."""
    cfg = {"mcpServers": {SERVER_NAME: {
        "command": sys.executable,
        "args": ["-m", "tests.harness.mcp_filesystem", *[str(d) for d in allowed_dirs]],
        "env": {"PYTHONPATH": str(REPO_ROOT), "PYTHONDONTWRITEBYTECODE": "1", **(env or {})},
    }}}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(cfg, indent=2))
    return path


def _lines(text: str) -> list[str]:
    lines = text.split("\n")
    if lines and lines[-1] == "":  # the newline that ends the last line starts no line of its own
        lines.pop()
    return lines


def build_server(allowed_dirs: Iterable[str] = ()):
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    allowed = [os.path.realpath(d) for d in allowed_dirs]
    mcp = MCPServer(SERVER_NAME, log_level="WARNING")

    def resolve(p: str) -> str:
        full = os.path.realpath(os.path.expanduser(p))
        if allowed and not any(full == a or full.startswith(a.rstrip(os.sep) + os.sep) for a in allowed):
            raise ToolError("Access denied - path outside allowed directories: %s not in %s"
                             % (full, ", ".join(allowed)))
        return full

    @mcp.tool(structured_output=False)
    def read_text_file(path: str, head: Optional[int] = None, tail: Optional[int] = None) -> str:
        """Read the complete contents of a file from the file system as text. Use 'head' to read only the
        first N lines of a file, or 'tail' to read only the last N lines."""
        if head is not None and tail is not None:
            raise ToolError("Cannot specify both head and tail parameters simultaneously")
        text = Path(resolve(path)).read_text(encoding="utf-8")
        if head is not None:
            return "\n".join(_lines(text)[:head])
        if tail is not None:
            return "\n".join(_lines(text)[-tail:]) if tail > 0 else ""
        return text

    @mcp.tool(structured_output=False)
    def write_file(path: str, content: str) -> str:
        """Create a new file or completely overwrite an existing file with new content."""
        full = resolve(path)
        Path(full).write_text(content, encoding="utf-8")
        return "Successfully wrote to %s" % path

    @mcp.tool(structured_output=False)
    def read_multiple_files(paths: list[str]) -> str:
        """Read the contents of multiple files simultaneously."""
        out = []
        for p in paths:
            try:
                out.append("%s:\n%s\n" % (p, Path(resolve(p)).read_text(encoding="utf-8")))
            except Exception as e:  # noqa: BLE001 - reported per file, as the real server does
                out.append("%s: Error - %s" % (p, e))
        return "\n---\n".join(out)

    return mcp


def main(argv: list[str]) -> int:
    build_server(argv).run("stdio")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
