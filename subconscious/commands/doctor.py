"""``subconscious doctor [--json] [--fix]``: what happened to the shared state, at a glance.

Exit 0 when clean, 1 when problems were found (after ``--fix``: only for what remains), 2 for usage
errors. Without ``--fix`` nothing is changed.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Mapping

from ..doctor.findings import report_json  # noqa: F401 (the JSON form is the report's own: see/health.py shows it)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object (for scripts)")
    parser.add_argument("--fix", action="store_true", help="repair what is safe (keeps backups) and report what remains")
    parser.add_argument("--skew-threshold", type=float, default=None, metavar="SECONDS",
                        help="report clocks further apart than this (default 120)")


def render(report, con, title: str | None = None) -> None:
    """The report for people, on the rich console ``con``: one row per finding, its path and message stacked
    in the last column so nothing wraps into the other columns in an 80-column terminal."""
    from ..doctor.findings import ordered, summary
    from .tables import Text, table

    if title:
        con.print(Text(title, style="bold"))
    c = report.counts
    if c:
        engines = ", ".join(f"{e} {n}" for e, n in report.by_engine.items())
        con.print(f"{c.get('sessions', 0)} sessions, {c.get('conversations', 0)} conversations, "
                  f"{c.get('hosts', 0)} hosts, {c.get('conflict_copies', 0)} conflict copies"
                  + (f" ({engines})" if engines else ""))
    if report.findings:
        t = table(("severity", {"no_wrap": True}), ("kind", {"no_wrap": True}), ("fix", {"no_wrap": True}),
                  ("path / what", {"ratio": 1, "overflow": "fold"}))
        for f in ordered(report.findings):
            style = {"error": "bold red", "warning": "yellow"}.get(f.severity, "dim")
            what = Text(f.path or "-", style="cyan")
            what.append("\n" + f.message, style="")
            t.add_row(Text(f.severity, style=style), f.kind, "yes" if f.fixable else "no", what)
        con.print(t)
    con.print(summary(report.findings))


def run_doctor(env: Mapping[str, str], cwd: str, *, fix: bool, as_json: bool, skew: float | None,
               out=sys.stdout) -> int:
    from ..doctor.analysis import DEFAULT_SKEW_S
    from ..doctor.checks import diagnose
    from ..doctor.findings import exit_code
    from ..base.termtext import json_dumps

    threshold = DEFAULT_SKEW_S if skew is None else skew
    before = diagnose(env, cwd, skew_threshold_s=threshold)
    if not fix:
        if as_json:
            print(json_dumps(report_json(before), indent=2), file=out)
        else:
            from .tables import console

            title = f"subconscious doctor: {before.home} (host {before.host})" if before.home else "subconscious doctor"
            render(before, console(out), title)
        return exit_code(before.findings)
    from ..doctor.fix import apply

    actions = apply(before, env)
    after = diagnose(env, cwd, skew_threshold_s=threshold)
    if as_json:
        print(json_dumps(report_json(before, after, actions), indent=2), file=out)
    else:
        from .tables import console

        con = console(out)
        title = f"subconscious doctor --fix: {before.home} (host {before.host})" if before.home else "subconscious doctor"
        render(before, con, title + "\nbefore:")
        con.print("fixed:" if actions else "fixed: nothing to do")
        for a in actions:
            con.print(f"  - {a}")
        render(after, con, "after:")
    return exit_code(after.findings)


def run(args: argparse.Namespace) -> int:
    if args.skew_threshold is not None and args.skew_threshold <= 0:
        print("subconscious doctor: --skew-threshold must be a positive number of seconds", file=sys.stderr)
        return 2
    return run_doctor(os.environ, os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd(), fix=args.fix, as_json=args.json, skew=args.skew_threshold)
