"""``subconscious messages [--session ID] [--host NAME] [--limit N] [--json]``: what the agent said, newest
first — when, to which session, on which machine, and whether Claude Code was shown it yet."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--session", metavar="ID", help="only this session's messages")
    parser.add_argument("--host", metavar="NAME", help="only sessions of this machine (host id or name)")
    parser.add_argument("--limit", metavar="N", type=int, default=20, help="at most N messages (default 20)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def render(data: dict, con) -> None:
    from .tables import Text, short_id, short_time, table

    if not data["messages"]:
        con.print(f"no messages from the agent ({data['sessions']} sessions looked at)")
    t = table(("when", {"no_wrap": True}), ("machine", {"no_wrap": True, "max_width": 12}),
              ("session", {"no_wrap": True}), ("shown", {"no_wrap": True}), ("message", {"ratio": 1}))
    for m in data["messages"]:
        shown = Text("shown", style="green") if m["shown"] else Text("not shown", style="yellow")
        t.add_row(short_time(m["date"]), m.get("host_name") or m.get("host") or "-", short_id(m["session"]), shown,
                  Text(m["text"]))
    if data["messages"]:
        con.print(t)
    for e in data["errors"]:
        con.print(Text(f"! session {e['session']}: {e['error']}", style="red"))


def run(args: argparse.Namespace) -> int:
    from ..see import messages
    from .tables import run_with_home, show

    if args.limit is not None and args.limit < 1:
        from .common import fail

        return fail("messages", "--limit must be at least 1", "usage", 2)

    def work(home) -> int:
        data = messages(home, session=args.session, host=args.host, limit=args.limit)
        show(data, render, args.json)
        if data["errors"] and not data["messages"]:  # nothing could be read: say why, one line, as other verbs
            from .common import fail

            first = data["errors"][0]
            return fail("messages", f"{len(data['errors'])} of {data['sessions']} conversations could not be read "
                                    f"(session {first['session']}: {first['error']})", "server", 1)
        return 0

    return run_with_home("messages", work)
