"""``subconscious memory [--label L] [--since TIME] [--json]``: the agent's memory blocks, and what changed
in them since a time (as the hooks inject a change: ``-`` removed lines, ``+`` added ones)."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--label", metavar="L", help="only the block with this label")
    parser.add_argument("--since", metavar="TIME",
                        help="also what changed since TIME: an ISO time (2026-12-01T09:30Z) or an age (2h, 3d)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def _baseline_text(base: dict | None) -> str:
    if base is None:
        return "nothing was seen of the memory that early: every block counts as new"
    if base["source"] == "session":
        return f"compared with what session {base['session'][:8]} on {base.get('host_name') or base.get('host')} " \
               f"was shown (as of {base['at']})"
    return f"compared with the memory as this machine read it at {base['at']}"


def render(data: dict, con) -> None:
    from .tables import Text

    agent = data["agent"]
    con.print(Text.assemble(("memory of ", ""), (str(agent.get("name") or "?"), "bold"), f" ({agent['id']})"))
    for b in data["blocks"]:
        limit = f"/{b['limit']}" if b.get("limit") else ""
        con.print()
        con.print(Text.assemble((b["label"], "bold cyan"), f"  {b['size']}{limit} chars"))
        if b["description"]:
            con.print(Text(b["description"], style="dim"))
        con.print(Text(b["value"] or "(empty)"))
    since = data.get("since")
    if since is None:
        return
    con.print()
    con.print(Text(f"changed since {since['at']}", style="bold"))
    con.print(Text(_baseline_text(since["baseline"]), style="dim"))
    if not since["changes"]:
        con.print("no change")
    for c in since["changes"]:
        con.print(Text.assemble((c["label"], "bold cyan"), f"  {c['status']}"))
        for line in c["removed"]:
            con.print(Text("- " + line, style="red"))
        for line in c["added"]:
            con.print(Text("+ " + line, style="green"))
        if c["status"] == "new" or (c["status"] == "modified" and not (c["removed"] or c["added"])):
            con.print(Text(c["value"]))


def run(args: argparse.Namespace) -> int:
    import time

    from ..see import parse_since
    from ..see import memory
    from .tables import run_with_home, show

    def work(home) -> int:
        since = parse_since(args.since, int(time.time() * 1000)) if args.since else None
        data = memory(home, label=args.label, since_ms=since)
        show(data, render, args.json)
        return 0

    return run_with_home("memory", work)
