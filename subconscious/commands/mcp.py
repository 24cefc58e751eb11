"""``subconscious mcp``: the MCP server the plugin declares (stdio; Claude Code starts it). See
subconscious/mcp/server.py for its tools."""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--list-tools", action="store_true", help="print the tools' names and descriptions and exit")


def run(args: argparse.Namespace) -> int:
    try:
        from ..mcp.server import build_server, serve_stdio
    except ImportError as exc:  # the SDK is missing from this installation
        print(f"subconscious mcp: the MCP SDK is not installed ({exc}); `pip install 'mcp>=2.3,<3'` next to "
              "subconscious, or reinstall subconscious", file=sys.stderr)
        return 1
    if args.list_tools:
        import anyio

        tools = anyio.run(build_server().list_tools)
        for tool in tools:
            print(f"{tool.name}: {tool.description}")
        return 0
    return serve_stdio()
