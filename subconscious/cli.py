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
    process = argv is None  # the console script or ``python -m subconscious``, not a caller in this process
    argv = sys.argv[1:] if argv is None else argv
    from .hooks.hotentry import hook_event, run_hook  # before argparse: hooks run on every tool call and prompt

    event = hook_event(argv)
    if event is not None:
        return run_hook(event, fast_exit=process)
    if next((a for a in argv if not a.startswith("-")), None) == "mcp":
        return _main(argv)  # stdout is the MCP protocol (JSON), nobody's terminal
    return _filtered_main(argv, as_json="--json" in argv)


def _main(argv: list[str]) -> int:
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


class _Filtered:
    """A text stream every write to which goes through ``keep_safe`` first; it remembers whether anything
    was written (and, with ``keep``, the last of it). ``unfiltered`` is the stream underneath (rich's console writes
    there: it cleans the text itself and adds its own colour codes after)."""

    def __init__(self, stream, keep_safe, keep: bool = False):
        from collections import deque

        # the last writes only: a long-running verb (serve, watch) may write to stderr for days
        self.unfiltered, self._safe, self.written = stream, keep_safe, False
        self.kept = deque(maxlen=64) if keep else None

    def write(self, text: str) -> int:
        if text:
            self.written = True
            if self.kept is not None:
                self.kept.append(text)
        self.unfiltered.write(self._safe(text))
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name):
        return getattr(self.unfiltered, name)


def _filtered_main(argv: list[str], *, as_json: bool) -> int:
    """Run a verb with stdout and stderr filtered: no escape or control sequence that the agent, the
    server or a file in the shared home wrote reaches the terminal through any verb (termtext.clean; under
    ``--json`` stdout is JSON, whose DEL, C1 and bidi controls are escaped). Under ``--json`` a failure
    that printed nothing on stdout (a usage or configuration error, the server down, an exception) prints
    ``{"error": …, "kind": …, "exit": N}`` there, so a script reading stdout always gets one JSON object;
    the exit stays non-zero and stderr says it as before."""
    from .commands import common
    from .base.termtext import clean, json_escape

    out = _Filtered(sys.stdout, json_escape if as_json else clean)
    err = _Filtered(sys.stderr, clean, keep=as_json)
    sys.stdout, sys.stderr = out, err  # type: ignore[assignment]
    kind = None
    try:
        try:
            code = _main(argv)
        except SystemExit as exc:  # argparse: a usage error (2), --help/--version (0)
            if not as_json:
                raise
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
            kind = "usage"
        except Exception as exc:  # noqa: BLE001 - said on stdout as JSON, and the traceback on stderr
            if not as_json:
                raise
            import traceback

            traceback.print_exc()
            code, kind = 1, "internal"
            common.last_error = {"error": f"{type(exc).__name__}: {exc}", "kind": kind, "exit": 1}
    finally:
        sys.stdout, sys.stderr = out.unfiltered, err.unfiltered
    if as_json and code and not out.written:
        import json
        import re

        said = [line for line in "".join(err.kept or []).splitlines() if line.strip()]
        error = dict(common.last_error or {})
        if not error or kind == "usage":
            line = re.sub(r"^subconscious(?: [\w-]+)?: (?:error: )?", "", said[-1]) if said else f"exit {code}"
            error = {"error": clean(line).strip(),
                     "kind": kind or ("usage" if code == 2 else "error")}
        error["exit"] = code
        print(json.dumps(error, indent=2))
    return code


def _hook_usage_error(argv: list[str]) -> int:
    from .hooks.run import _logger

    try:
        _logger().warning("hook: bad arguments %r ignored", argv[1:])
    except Exception:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
