"""``subconscious ask TEXT [--json]``: one turn with the agent on a conversation of its own (never a
session's), the reply streamed to the terminal as it comes."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("text", nargs="+", metavar="TEXT", help="what to ask (words are joined with spaces)")
    parser.add_argument("--json", action="store_true", help="print one JSON object at the end instead of streaming")


def printer(con):
    """The ``on_item`` that prints the turn as it arrives: reasoning dim, the reply plain, each piece of a
    token-streamed message where the last one ended (a new line when another message begins)."""
    from ..letta.messages import content_text
    from .tables import Text

    current: list = [None]  # (type, id) of the message being printed

    def show(item: dict) -> None:
        kind = item.get("message_type")
        if kind == "reasoning_message":
            piece, style = str(item.get("reasoning") or ""), "dim italic"
        elif kind == "assistant_message":
            piece, style = content_text(item.get("content")), ""
        elif kind == "tool_call_message":
            piece, style = f"[{(item.get('tool_call') or {}).get('name') or 'a tool'}]", "dim"
        elif kind == "stop_reason" and current[0] is not None:
            con.print()
            current[0] = None
            return
        else:
            return
        key = (kind, item.get("id"))
        if kind == "tool_call_message" and current[0] == key:
            return  # the rest of a streamed tool call: its name was printed
        if current[0] is not None and current[0] != key:
            con.print()
        current[0] = key
        con.print(Text(piece, style=style), end="")
        con.file.flush()

    return show


def run(args: argparse.Namespace) -> int:
    from ..see import ask
    from .tables import console, json_dumps, run_with_home

    text = " ".join(args.text)

    def work(home) -> int:
        con = None if args.json else console()
        data = ask(home, text, on_item=None if con is None else printer(con))
        if args.json:
            print(json_dumps(data, indent=2))
        elif not data["reply"]:
            from .common import fail

            return fail("ask", f"the agent gave no answer (stop reason: {data['stop_reason']})", "no_answer", 1)
        return 0

    return run_with_home("ask", work)
