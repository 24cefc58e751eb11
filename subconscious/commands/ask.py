"""``subconscious ask TEXT [--json]``: one turn with the agent on a conversation of its own (never a
session's), the reply streamed to the terminal as it comes."""

from __future__ import annotations

import argparse
import json
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("text", nargs="+", metavar="TEXT", help="what to ask (words are joined with spaces)")
    parser.add_argument("--json", action="store_true", help="print one JSON object at the end instead of streaming")


def printer(con):
    """The ``on_item`` that prints each stream item as it arrives: reasoning dim, the reply plain."""
    from ..letta.messages import content_text
    from .tables import Text

    def show(item: dict) -> None:
        kind = item.get("message_type")
        if kind == "reasoning_message" and item.get("reasoning"):
            con.print(Text(str(item["reasoning"]), style="dim italic"))
        elif kind == "assistant_message":
            text = content_text(item.get("content"))
            if text:
                con.print(Text(text))
        elif kind == "tool_call_message":
            name = ((item.get("tool_call") or {}).get("name")) or "a tool"
            con.print(Text(f"[{name}]", style="dim"))
        con.file.flush()

    return show


def run(args: argparse.Namespace) -> int:
    from ..see import ask
    from .tables import console, run_with_home

    text = " ".join(args.text)

    def work(home) -> int:
        con = None if args.json else console()
        data = ask(home, text, on_item=None if con is None else printer(con))
        if args.json:
            print(json.dumps(data, indent=2))
        elif not data["reply"]:
            print(f"subconscious ask: the agent gave no answer (stop reason: {data['stop_reason']})", file=sys.stderr)
            return 1
        return 0

    return run_with_home("ask", work)
