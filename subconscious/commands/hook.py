"""``subconscious hook <event>``: what the Claude Code plugin runs. Always exits 0."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("event", nargs="?", default="",
                        help="session-start | user-prompt-submit | pre-tool-use | stop (hook JSON on stdin)")


def run(args: argparse.Namespace) -> int:
    from ..hooks.run import run as run_hook

    return run_hook(args.event)
