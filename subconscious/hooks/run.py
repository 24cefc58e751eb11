"""Running one Claude Code hook so that it can never break Claude Code.

- stdin is read once (capped at 8 MiB) and parsed as the store parses its files
  (:func:`subconscious.state.jsontext.loads_state`: a BOM is fine; deep nesting, huge integers, NaN,
  bad UTF-8 are all just "malformed"); malformed input is logged with a one-line reason, not raised;
- a hard deadline below the hook's timeout in hooks.json: when it passes, the reason is logged and the
  process exits 0 at once (SIGALRM), whatever it was waiting on;
- any exception is logged with a one-line reason (the traceback only with LETTA_DEBUG), never printed;
- stdout gets the hook's output only when the handler finished; the exit code is always 0.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import time

from ..state.jsontext import loads_state
from .event import DEADLINES, HookEvent  # noqa: F401 (HookEvent: re-exported)

# event name on the command line → (handler module, deadline in seconds: event.DEADLINES)
_HANDLERS = {
    "session-start": "session_start", "user-prompt-submit": "prompt", "pre-tool-use": "pre_tool", "stop": "stop",
    "pre-compact": "pre_compact", "post-compact": "post_compact", "subagent-start": "subagent_start",
    "subagent-stop": "subagent_stop", "stop-failure": "stop_failure", "session-end": "session_end",
}
EVENTS: dict[str, tuple[str, float]] = {
    name: ("subconscious.hooks.events." + module, DEADLINES[name]) for name, module in _HANDLERS.items()}
STDIN_CAP = 8 * 1024 * 1024


PICKUP_EVENTS = ("session-start", "user-prompt-submit", "stop")  # never PreToolUse (the hot path)


def _pickup(event: HookEvent) -> None:
    """Retries that do not wait for a Stop (spawn.pickup): due deliveries of any session on this machine."""
    from ..local.identity import local_dirs
    from ..delivery.spawn import pickup
    from ..state.ids import check_session_id

    try:
        sid = check_session_id(event.session_id) if event.name == "user-prompt-submit" else None
    except ValueError:
        sid = None
    try:
        pickup(local_dirs(event.env).root / "sessions", arm=sid)
    except Exception:  # noqa: BLE001 - a retry is never worth breaking a hook for
        pass


SERVED_CHECK_EVENTS = ("session-start", "stop")  # still command hooks in served mode: they restart its server


def _ensure_served(event: HookEvent, log) -> None:
    """Served mode on (a marker file) and nothing on its port: start ``subconscious serve`` (local.autostart)."""
    from ..local.identity import local_dirs

    try:
        marker = local_dirs(event.env).root / "serve" / "enabled.json"
        if os.path.exists(marker):  # command mode: this stat is all it costs
            from ..local.autostart import ensure

            ensure(marker, event.env, log, wait=1.5 if event.name == "session-start" else 0.0)
    except Exception as exc:  # noqa: BLE001 - never worth breaking a hook for
        if log:
            log.warning("hook %s: could not start subconscious serve: %s: %s", event.name, type(exc).__name__,
                        str(exc)[:300])


def _logger():
    from ..local.identity import local_dirs
    from ..local.log import setup

    return setup(local_dirs(os.environ).logs, debug=os.environ.get("LETTA_DEBUG", "") in ("1", "true", "yes"))


def _stderr_logger(exc: Exception):
    """Warnings to stderr (secrets redacted) when the per-user log cannot be written."""
    import logging

    from ..local.log import redact

    secrets = tuple(v for k, v in os.environ.items() if k == "LETTA_API_KEY" and v)

    class Redacting(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            return redact(super().format(record), secrets)

    log = logging.getLogger("subconscious")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(Redacting("subconscious: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.WARNING)
    log.propagate = False
    log.warning("cannot write the log (%s: %s); reasons go to stderr", type(exc).__name__, str(exc)[:300])
    return log


def _exit_now(stdout) -> None:
    """End the process now (``os._exit``: no clean-up, the log's handlers flush on every record)."""
    if hasattr(signal, "SIGALRM"):
        signal.setitimer(signal.ITIMER_REAL, 0)
    try:
        stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # Claude Code closed the pipe: nothing more to tell it
        pass
    os._exit(0)


def run(event_name: str, stdin=None, stdout=None, fast_exit: bool = False) -> int:
    """Run one hook; always 0. With ``fast_exit`` (a hook process, not a test calling in), a hook that
    recorded notes as shown ends the process right after, so a kill cannot land between the record and
    the exit (the note would be recorded as shown and Claude Code would show nothing)."""
    stdin = stdin if stdin is not None else sys.stdin
    stdout = stdout if stdout is not None else sys.stdout
    try:
        log = _logger()
    except Exception as exc:  # no writable state dir: say why on stderr (Claude Code's debug log), go on
        log = _stderr_logger(exc)
    spec = EVENTS.get(event_name)
    if spec is None:
        if log:
            log.warning("hook: unknown event %r ignored (known: %s)", event_name, ", ".join(EVENTS))
        return 0
    module_name, deadline = spec

    def on_deadline(signum, frame):  # pragma: no cover - exercised by the fault tests in a subprocess
        if log:
            log.warning("hook %s: gave up after %.1f s (deadline) — Claude Code goes on without it", event_name, deadline,
                        extra={"fixed_text": True})
        os._exit(0)

    if hasattr(signal, "SIGALRM"):
        signal.signal(signal.SIGALRM, on_deadline)
        signal.setitimer(signal.ITIMER_REAL, deadline)
    try:
        raw = stdin.buffer.read(STDIN_CAP + 1) if hasattr(stdin, "buffer") else stdin.read(STDIN_CAP + 1)
        if len(raw) > STDIN_CAP:
            raise ValueError(f"hook input larger than {STDIN_CAP} bytes")
        data = loads_state(raw) if raw else {}
        if not isinstance(data, dict):
            raise ValueError(f"hook input is a JSON {type(data).__name__}, expected an object")
    except (ValueError, OSError) as exc:  # Unparseable and UnicodeDecodeError are ValueErrors
        if log:
            log.warning("hook %s: malformed input on stdin (%s); did nothing", event_name, str(exc)[:200])
        return 0
    event = HookEvent(event_name, data)
    try:
        handler = importlib.import_module(module_name).handle
        output = handler(event)
        # the side jobs come before the output: once a note is recorded as shown the process must end at once,
        # since Claude Code shows nothing of a hook killed before it exits (a timeout, a cancelled prompt)
        if event_name in PICKUP_EVENTS:
            _pickup(event)
        if event_name in SERVED_CHECK_EVENTS:
            _ensure_served(event, log)
        if log:
            log.debug("hook %s: done in %.0f ms", event_name, (time.monotonic() - event.started) * 1000)
        if output:
            stdout.write(output if output.endswith("\n") else output + "\n")
            stdout.flush()
            written = getattr(output, "written", None)  # what was shown is recorded only once it is out
            if written is not None:
                written()
                if fast_exit:
                    _exit_now(stdout)
    except Exception as exc:  # noqa: BLE001 - the whole point: log, never raise into Claude Code
        if log and getattr(exc, "quiet", False):
            log.debug("hook %s: skipped: %s", event_name, exc)
        elif log:
            log.warning("hook %s: %s: %s", event_name, type(exc).__name__, str(exc)[:500],
                        exc_info=os.environ.get("LETTA_DEBUG", "") in ("1", "true", "yes"))
    finally:
        if hasattr(signal, "SIGALRM"):
            signal.setitimer(signal.ITIMER_REAL, 0)
    return 0
