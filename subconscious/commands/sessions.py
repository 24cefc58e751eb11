"""``subconscious sessions [--json]``: every session of the shared home, from every machine — project,
machine, started, last delivery, cursor, pending, ended."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    parser.add_argument("--offline", action="store_true",
                        help="the state files only: no call to the Letta server (no last delivery)")


def _pending(row: dict) -> str:
    p = row["pending"]
    if p is None:
        return "?"  # kept on its own machine
    if not p:
        return "none"
    failures = sum(d["failures"] for d in p)
    return f"{len(p)}" + (f" ({failures} failed)" if failures else "")


def render(data: dict, con) -> None:
    from .tables import Text, short_id, short_time, table

    rows = data["sessions"]
    if not rows:
        con.print("no sessions in the shared home yet")
        return
    any_ended = any(r["ended"] for r in rows)
    columns = [("session", {"no_wrap": True}), ("project", {"overflow": "fold", "ratio": 2}),
               ("machine", {"overflow": "fold", "ratio": 1}), ("started", {"no_wrap": True}),
               ("delivered", {"no_wrap": True}), ("cursor", {"justify": "right", "no_wrap": True}),
               ("pending", {"no_wrap": True})]
    if any_ended:  # the column costs width: only when a session has ended
        columns.append(("ended", {"overflow": "fold", "ratio": 1}))
    t = table(*columns)
    for r in rows:
        here = r["host"] == data["this_host"]
        cells = [short_id(r["session"]), r["project"] or "-",
                 Text(r["host_name"] or r["host"] or "-", style="bold" if here else ""),
                 short_time(r["started"]), short_time(r["last_delivery"]),
                 "-" if r["cursor"] is None else str(r["cursor"]), _pending(r)]
        if any_ended:
            cells.append(short_time(r["ended"]) + (f" {r['end_reason']}" if r.get("end_reason") else "")
                         if r["ended"] else "")
        t.add_row(*cells)
    con.print(t)
    if any(r["pending"] is None for r in rows):
        con.print(Text("pending ?: known on the session's own machine only", style="dim"))
    for e in data["errors"]:
        con.print(Text(f"! session {e['session']}: {e['error']}", style="red"))


def run(args: argparse.Namespace) -> int:
    from ..see import sessions
    from .tables import run_with_home, show

    def work(home) -> int:
        data = sessions(home, server=not args.offline)
        show(data, render, args.json)
        return 0

    return run_with_home("sessions", work)
