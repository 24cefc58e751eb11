"""Tool definitions (name, description, JSON schema) and :func:`execute`: one approval request ->
one ToolResult, with the mode's policy, the per-call timeout, redaction and the result cap applied."""
from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass
from typing import Callable

from ..letta.messages import ClientTool, ToolCallRequest, ToolResult
from ..privacy.redact import redact
from .confine import Root, ToolError
from .limits import DEFAULT_LIMITS, Limits
from .modes import ALL_TOOLS, allowed_tools

__all__ = ["SCHEMAS", "DESCRIPTIONS", "offered", "client_tools", "ToolContext", "Outcome", "execute", "run_tool", "finish_text"]

log = logging.getLogger("subconscious")

_PATH_NOTE = "Relative to the project directory, or absolute inside it."
SCHEMAS: dict[str, dict] = {
    "Read": {"type": "object", "properties": {
        "file_path": {"type": "string", "description": "The file to read. " + _PATH_NOTE},
        "offset": {"type": "integer", "description": "First line to show, 1-based (default 1)."},
        "limit": {"type": "integer", "description": "How many lines to show (default and maximum 2000)."},
    }, "required": ["file_path"]},
    "Grep": {"type": "object", "properties": {
        "pattern": {"type": "string", "description": "Python regular expression searched for in each line."},
        "path": {"type": "string", "description": "File or directory to search (default: the project). " + _PATH_NOTE},
        "glob": {"type": "string", "description": "Only files whose name matches, e.g. '*.py' or '*.{ts,tsx}' "
                                                  "(a pattern with '/' is matched against the relative path)."},
        "case_insensitive": {"type": "boolean", "description": "Ignore case (default false)."},
        "output_mode": {"type": "string", "enum": ["content", "files_with_matches", "count"],
                        "description": "content (default): path:line:text; files_with_matches: paths; "
                                       "count: path:number."},
    }, "required": ["pattern"]},
    "Glob": {"type": "object", "properties": {
        "pattern": {"type": "string", "description": "Glob matched against paths relative to path: '*' and '?' stay "
                                                     "within a directory, '**/' spans directories, e.g. '**/*.py'."},
        "path": {"type": "string", "description": "Directory to search (default: the project). " + _PATH_NOTE},
    }, "required": ["pattern"]},
    "Write": {"type": "object", "properties": {
        "file_path": {"type": "string", "description": "The file to create or overwrite. " + _PATH_NOTE},
        "content": {"type": "string", "description": "The whole new content of the file."},
    }, "required": ["file_path", "content"]},
    "Edit": {"type": "object", "properties": {
        "file_path": {"type": "string", "description": "The file to change. " + _PATH_NOTE},
        "old_string": {"type": "string", "description": "Exact text to replace; must occur once unless replace_all."},
        "new_string": {"type": "string", "description": "The replacement text."},
        "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)."},
    }, "required": ["file_path", "old_string", "new_string"]},
    "Bash": {"type": "object", "properties": {
        "command": {"type": "string", "description": "A shell command, run with /bin/sh in the project directory."},
    }, "required": ["command"]},
}
_SEES = (" It runs on the user's machine and sees only the session's project directory (not .git internals, files "
         "excluded by .gitignore, or files named like credentials); secrets in its result are redacted.")
DESCRIPTIONS = {
    "Read": "Read a text file of the user's project, with line numbers. Binary files are described, not shown." + _SEES,
    "Grep": "Search the user's project for a regular expression; lists matching lines (path:line:text)." + _SEES,
    "Glob": "List the user's project files whose path matches a glob, most recently modified first." + _SEES,
    "Write": "Create or overwrite a file in the user's project (only when the session clearly asks for it)." + _SEES,
    "Edit": "Replace exact text in a file of the user's project (only when the session clearly asks for it)." + _SEES,
    "Bash": "Run a shell command in the user's project directory inside a sandbox: no network, only /usr and a few "
            "/etc files besides the project, no home directory; .git, .claude, .envrc, editor and CI config are "
            "read-only; output, processes, memory and time are limited.",
}


def offered(mode: str) -> tuple[str, ...]:
    """Tool names offered in ``mode`` on this machine: Bash only where its sandbox exists."""
    names = allowed_tools(mode)
    if "Bash" in names:
        from .shell import sandbox_available
        if not sandbox_available():
            names = tuple(n for n in names if n != "Bash")
    return names


def client_tools(mode: str) -> list[ClientTool]:
    """The ClientTool definitions offered in ``mode`` (empty for ``off``)."""
    return [ClientTool(n, DESCRIPTIONS[n], SCHEMAS[n]) for n in offered(mode)]


def _impl(name: str) -> Callable:
    if name in ("Read", "Grep", "Glob"):
        from . import readers
        return {"Read": readers.read, "Grep": readers.grep, "Glob": readers.glob}[name]
    if name in ("Write", "Edit"):
        from . import writers
        return {"Write": writers.write, "Edit": writers.edit}[name]
    from . import shell
    return shell.bash


@dataclass
class ToolContext:
    mode: str
    root: Root | None
    root_error: str | None = None  # why there is no root (no project directory known here)
    limits: Limits = DEFAULT_LIMITS

    @classmethod
    def for_session(cls, mode: str, cwd: str | None, limits: Limits = DEFAULT_LIMITS) -> "ToolContext":
        if not allowed_tools(mode):
            return cls(mode, None, "no client-side tools in this mode", limits)
        if not cwd:
            why = "the session's project directory is not known on this machine (it is recorded at SessionStart)"
            log.warning("tools: none for this turn: %s", why)
            return cls(mode, None, why, limits)
        try:
            return cls(mode, Root(cwd), None, limits)
        except ToolError as e:
            log.warning("tools: none for this turn: %s", e)
            return cls(mode, None, str(e), limits)


@dataclass(frozen=True)
class Outcome:
    result: ToolResult
    name: str
    ran: bool      # the tool was run (False: refused by policy, cap or bad arguments)
    ms: int


def finish_text(text: str, limits: Limits) -> str:
    """Hide <private> text, redact secrets, then cap the size (the cut never splits a secret: redaction
    comes first)."""
    from ..privacy.private import hide_private

    cap = limits.max_result_chars
    text = redact(hide_private(text)[:cap + 8192])
    if len(text) > cap:
        text = text[:cap] + f"\n[... result cut at {cap:,} characters]"
    return text


def _error(req: ToolCallRequest, text: str, limits: Limits, ran: bool, t0: float) -> Outcome:
    return Outcome(ToolResult(req.tool_call_id, finish_text("Error: " + text, limits), "error"), req.name, ran,
                   int((time.monotonic() - t0) * 1000))


def refuse(req: ToolCallRequest, why: str, limits: Limits = DEFAULT_LIMITS) -> Outcome:
    return _error(req, why, limits, False, time.monotonic())


def _path_forms(root: Root, p: str) -> list[str]:
    """A path a call names, as given, inside the project, and resolved (links followed to decide only), for
    matching SUBCONSCIOUS_PRIVATE_PATHS: a link to a private file is private (Edit/Write too, not only Read)."""
    forms = [p, os.path.join(str(root.given), p)]
    if "\x00" not in p and len(p) <= 4096:
        real = os.path.realpath(os.path.join(root.path, os.path.expanduser(p) if p.startswith("~/") else p))
        rel = root.rel_of(real)
        forms += [real] + ([rel] if rel else [])
    return forms


def execute(req: ToolCallRequest, ctx: ToolContext) -> Outcome:
    """Run one requested tool if the mode allows it; every failure is an error result, never an exception."""
    t0 = time.monotonic()
    lim = ctx.limits
    allowed = allowed_tools(ctx.mode)
    if req.name not in allowed:
        known = "is not available" if req.name in ALL_TOOLS else "is not a tool this machine offers"
        offered = ", ".join(allowed) if allowed else "none"
        return _error(req, f"{req.name} {known} (LETTA_SDK_TOOLS={ctx.mode} allows: {offered}); it was not run.",
                      lim, False, t0)
    if req.arguments is None:
        return _error(req, "the arguments are not a JSON object; the tool was not run.", lim, False, t0)
    if ctx.root is None:
        return _error(req, f"{ctx.root_error}; the tool was not run.", lim, False, t0)
    from ..privacy.private import is_private_path, private_globs, private_result, tool_paths

    globs = private_globs()
    if globs and any(is_private_path(f, globs) for p in tool_paths(req.arguments) for f in _path_forms(ctx.root, p)):
        return _error(req, f"{req.name} names a private path (SUBCONSCIOUS_PRIVATE_PATHS): its contents never leave "
                      "the user's machine; it was not run.", lim, False, t0)
    got = _run_isolated(req.name, ctx.root.given, req.arguments, lim)
    ms = int((time.monotonic() - t0) * 1000)
    if got is None:
        return _error(req, f"{req.name} did not finish within {lim.call_timeout:g} s and was stopped.", lim, True, t0)
    kind, text = got
    if kind == "error":
        return Outcome(ToolResult(req.tool_call_id, finish_text("Error: " + text, lim), "error"), req.name, True, ms)
    text = private_result(req.name, req.arguments, text, globs, note=False)  # a backstop: the tools skip them
    return Outcome(ToolResult(req.tool_call_id, finish_text(text, lim), "success"), req.name, True, ms)


def run_tool(name: str, cwd: str, args: dict, limits: Limits, timeout: float) -> tuple[str, str]:
    """Run one tool in this process: ("ok", text) or ("error", message)."""
    deadline = time.monotonic() + timeout
    try:
        return "ok", _impl(name)(Root(cwd), args, limits, deadline)
    except ToolError as e:
        return "error", str(e)
    except Exception as e:  # noqa: BLE001 - the agent gets an error result, the worker goes on
        return "error", f"the tool failed ({type(e).__name__}: {e})"


# Bash's sweep after the command (shell.py: what the command planted is moved aside) must finish, or what it
# planted stays on disk until the next Bash call in that project (maybe never): once the command is over and
# the sandbox gone, the child says so and gets this long more (a tree the scan could check within one call,
# plus what one command added, is swept well within it); only past it is the child killed, and the next call
# sweeps first.
def sweep_budget(timeout: float) -> float:
    return max(60.0, 4.0 * timeout)


def _bound_child(timeout: float, name: str = "") -> None:
    """Backstops for a child the worker can no longer stop: die with the worker (Linux), and a CPU limit."""
    try:
        import resource
        cpu = int(timeout + (sweep_budget(timeout) if name == "Bash" else 0)) + 3
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 2))
    except (ImportError, ValueError, OSError):
        pass
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal
            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def _child(conn, name: str, cwd: str, args: dict, limits: Limits, timeout: float) -> None:
    _bound_child(timeout, name)
    if name == "Bash":
        from . import shell
        shell.on_sweep = lambda: conn.send(("sweeping", ""))
    try:
        conn.send(run_tool(name, cwd, args, limits, timeout))
    finally:
        conn.close()


def _run_isolated(name: str, cwd: str, args: dict, limits: Limits) -> tuple[str, str] | None:
    """Run one tool in a child process, killed at the per-call timeout (a regular expression that
    backtracks forever, or a read stuck on a network filesystem, cannot be interrupted in-process).
    None when it was stopped."""
    import multiprocessing as mp

    method = "fork" if sys.platform.startswith("linux") else "spawn"
    mpc = mp.get_context(method)
    recv, send = mpc.Pipe(duplex=False)
    proc = mpc.Process(target=_child, args=(send, name, cwd, dict(args), limits, limits.call_timeout),
                       name=f"subconscious-tool-{name}", daemon=True)
    proc.start()
    send.close()
    try:
        wait = limits.call_timeout + (1.0 if method == "fork" else 5.0)
        while recv.poll(wait):
            try:
                got = recv.recv()
            except (EOFError, OSError):
                return "error", "the tool process ended without an answer"
            if got[0] != "sweeping":
                return got
            wait = sweep_budget(limits.call_timeout)  # the command is over: let its sweep finish
        return None
    finally:
        recv.close()
        if proc.is_alive():
            proc.kill()
        proc.join(5.0)
