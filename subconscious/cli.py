"""The ``subconscious`` command. Only the verb being run has its module imported, so a hook pays
only for what it uses."""

from __future__ import annotations

import sys

# verb → (module, help). The module has ``add_arguments(parser)`` and ``run(args) -> int``.
VERBS: dict[str, tuple[str, str]] = {
    "status": ("subconscious.commands.status", "show where state lives and what was found there"),
    "preview": ("subconscious.commands.preview", "show exactly what the next delivery to Letta would send (sends nothing)"),
    "hook": ("subconscious.commands.hook", "run a Claude Code hook (JSON on stdin); always exits 0"),
    "worker": ("subconscious.commands.worker", "deliver pending transcripts to Letta (started by the Stop hook)"),
    "key": ("subconscious.commands.key", "encrypt the cached memory blocks in the shared home: init, export, import, rotate"),
    "doctor": ("subconscious.commands.doctor", "find and repair what sync engines, git and clocks did to the shared state"),
    "watch": ("subconscious.commands.watch", "fold sync engines' conflict copies as they appear (runs until stopped)"),
    "merge-driver": ("subconscious.commands.merge_driver", "git merge driver for our state files (git passes: ancestor, ours, theirs, path)"),
    "sync": ("subconscious.commands.sync", "set up a sync engine for the shared state (setup-git)"),
    "demo": ("subconscious.commands.demo", "simulate several machines sharing one state dir: conflicts made and repaired"),
    "gc": ("subconscious.commands.gc", "retire sessions idle for longer than an age on every machine; prune backups/ and quarantine/"),
    "export": ("subconscious.commands.export", "write the home's state (entries, sessions, settings; sealed stays sealed) to one archive"),
    "import": ("subconscious.commands.import_", "merge an export archive into the home (idempotent; never overwrites newer state)"),
    "install": ("subconscious.commands.install", "add our hooks to Claude Code's settings.json (without the plugin)"),
    "uninstall": ("subconscious.commands.install", "remove our hooks from Claude Code's settings.json"),
    "serve": ("subconscious.commands.serve", "answer PreToolUse/UserPromptSubmit as http hooks on 127.0.0.1 (served mode; runs until stopped)"),
    "memory": ("subconscious.commands.memory", "show the agent's memory blocks, and what changed since a time"),
    "messages": ("subconscious.commands.messages", "show what the agent said: when, to which session and machine, shown yet"),
    "sessions": ("subconscious.commands.sessions", "list every session of the shared home, from every machine"),
    "ask": ("subconscious.commands.ask", "ask the agent something (its own conversation, never a session's); streamed"),
    "mcp": ("subconscious.commands.mcp", "the MCP server the plugin declares (stdio): ask_subconscious, search_memory"),
    "ui": ("subconscious.commands.ui", "a local page (127.0.0.1, per-run token): memory, messages, sessions, the home's health"),
}


def build_parser(active: str | None) -> argparse.ArgumentParser:
    import argparse
    import importlib

    from . import __version__

    parser = argparse.ArgumentParser(
        prog="subconscious",
        description="A background Letta agent for Claude Code, with state that is safe to sync between machines.",
    )
    parser.add_argument("--version", action="version", version=f"subconscious {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    for verb, (module, help_text) in VERBS.items():
        p = sub.add_parser(verb, help=help_text, description=help_text)
        if verb == active:
            importlib.import_module(module).add_arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    from .hotpath import hook_event, run_hook  # before argparse: hooks run on every tool call and prompt

    event = hook_event(argv)
    if event is not None:
        return run_hook(event)
    active = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(active if active in VERBS else None)
    if active == "hook":  # a usage error must not exit 2: Claude Code would block the prompt or tool call
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:
            return 0 if exc.code in (0, None) else _hook_usage_error(argv)
    else:
        args = parser.parse_args(argv)
    if not args.verb:
        parser.print_help()
        return 2
    import importlib

    return int(importlib.import_module(VERBS[args.verb][0]).run(args) or 0)


def _hook_usage_error(argv: list[str]) -> int:
    from .hookrun import _logger

    try:
        _logger().warning("hook: bad arguments %r ignored", argv[1:])
    except Exception:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
