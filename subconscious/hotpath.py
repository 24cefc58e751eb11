"""The entry of ``subconscious hook <event>``: the cheap path first, the full one when it must.

Claude Code runs PreToolUse on every tool call (hundreds in a long session), nearly always within the
fetch TTL of the last fetch: then all there is to do is read stdin, read one small machine-local file
(``<state dir>/shown/<id>.json``: when this session last fetched) and compare a time. This module does
exactly that with what the interpreter has already loaded plus ``json`` — no store, no Letta client, no
``logging``, no ``platformdirs``, no dataclasses — and exits 0.

Anything it is not sure about (input that is not a plain JSON object with a valid session id, a setting
it does not recognise, no claims file, the TTL over) goes to :func:`subconscious.hookrun.run` with the
bytes already read, which decides and logs exactly as before: this path only ever takes the shortcut on
evidence, never a decision of its own. The never-break guarantees hold here too: a deadline (SIGALRM
through the builtin ``_signal``, so ``signal``/``enum`` are not imported) logs its reason and exits 0; a
reason to log imports the real logger only when there is something to write.
"""

from __future__ import annotations

import os
import sys
import time

# the shortcut's deadline (hookrun.EVENTS gives the full path's: pre-tool-use 4 s, its hooks.json timeout 5 s)
SHORTCUT_DEADLINE = 4.0
STDIN_CAP = 8 * 1024 * 1024  # as hookrun.STDIN_CAP
MODES = ("whisper", "full")
_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")


def _log(level: str, message: str) -> None:
    """One line in the per-user log, through the real (redacting) logger: imported only now."""
    try:
        from .hookrun import _logger

        getattr(_logger(), level)(message)
    except Exception:  # noqa: BLE001 - no log to write: nothing else to do
        pass


def _debug() -> bool:
    return os.environ.get("LETTA_DEBUG", "") in ("1", "true", "yes")


def plain_session_id(value: object) -> str | None:
    """``value`` if it passes :func:`subconscious.state.ids.check_session_id` without needing the conflict-copy
    classifier (letters, digits, ``-``, ``_``; 1-128, starting with a letter or digit, no copy marker), else
    None (the full path then checks it and says why)."""
    if (not isinstance(value, str) or not 0 < len(value) <= 128 or value[0] in "-_"
            or not _ID_CHARS.issuperset(value) or "_conflict-" in value or "-safeBackup-" in value):
        return None
    return value


def state_dir(env=os.environ) -> str | None:
    """The machine-local state dir as :func:`subconscious.localstate.local_dirs` finds it, where that takes
    no ``platformdirs``: ``SUBCONSCIOUS_STATE_DIR``, or on Linux and macOS the XDG rule (``XDG_STATE_HOME`` if
    absolute, else the platform's default under an absolute ``HOME``). None elsewhere (the full path decides)."""
    raw = env.get("SUBCONSCIOUS_STATE_DIR")
    if raw:
        return os.path.abspath(os.path.expanduser(raw))
    xdg = env.get("XDG_STATE_HOME", "")
    home = env.get("HOME", "")
    if sys.platform.startswith("linux"):
        base = xdg if xdg.startswith("/") else (home + "/.local/state" if home.startswith("/") else None)
    elif sys.platform == "darwin":
        base = xdg if xdg.startswith("/") else (home + "/Library/Application Support" if home.startswith("/") else None)
    else:
        return None
    return None if base is None else os.path.abspath(os.path.join(base, "subconscious"))


def fetch_ttl_ms(env=os.environ) -> int | None:
    """``SUBCONSCIOUS_FETCH_TTL`` (seconds, default 5) in ms, as events/pre_tool.py reads it; None for a value
    that path would fail on (it logs why)."""
    try:
        ttl = float(env.get("SUBCONSCIOUS_FETCH_TTL", "5"))
    except ValueError:
        ttl = 5.0
    if ttl != ttl or ttl in (float("inf"), float("-inf")):
        return None
    return int(ttl * 1000)


def last_fetch_ms(directory: str, session_id: str) -> int | None:
    """When this session last began a fetch on this machine (the claims file, :mod:`subconscious.claims`:
    written by atomic rename, so read whole without its lock); None when there is none to read."""
    try:
        with open(os.path.join(directory, "shown", session_id + ".json"), "rb") as f:
            raw = f.read(1 << 20)
        import json

        value = json.loads(raw).get("fetch_ms")
    except (OSError, ValueError, AttributeError, RecursionError):
        return None
    return value if type(value) is int else None


def within_ttl(raw: bytes, env=os.environ, now_ms: int | None = None) -> bool:
    """True when this PreToolUse has nothing to do: another hook of the session began a fetch less than the
    TTL ago (or LETTA_MODE is off). False means "not sure": the full path runs."""
    import json

    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return False
    if not isinstance(data, dict):
        return False
    sid = plain_session_id(data.get("session_id"))
    mode = (env.get("LETTA_MODE") or "whisper").strip().lower()
    if sid is None or mode not in MODES:
        return mode == "off" and sid is not None  # off: the full path would skip it too
    ttl, directory = fetch_ttl_ms(env), state_dir(env)
    if ttl is None or directory is None:
        return False
    fetched = last_fetch_ms(directory, sid)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    return fetched is not None and 0 <= now - fetched < ttl


def _on_deadline(signum, frame):  # pragma: no cover - exercised by the fault tests in a subprocess
    _log("warning", "hook pre-tool-use: gave up after %.1f s (deadline) — Claude Code goes on without it"
         % SHORTCUT_DEADLINE)
    os._exit(0)


def run_hook(event: str, stdin=None) -> int:
    """``subconscious hook <event>``: the shortcut where it applies, else hookrun.run. Always 0."""
    if event != "pre-tool-use":
        from .hookrun import run

        return run(event, stdin=stdin)
    stdin = sys.stdin if stdin is None else stdin
    try:
        import _signal

        _signal.signal(_signal.SIGALRM, _on_deadline)
        _signal.setitimer(_signal.ITIMER_REAL, SHORTCUT_DEADLINE)
    except (ImportError, AttributeError, ValueError, OSError):  # no SIGALRM (Windows), not the main thread
        _signal = None
    try:
        raw = stdin.buffer.read(STDIN_CAP + 1) if hasattr(stdin, "buffer") else stdin.read(STDIN_CAP + 1)
    except (OSError, ValueError) as exc:
        _log("warning", "hook pre-tool-use: malformed input on stdin (%s); did nothing" % str(exc)[:200])
        return 0
    try:
        if isinstance(raw, str):
            raw = raw.encode("utf-8", "surrogatepass")
        skip = len(raw) <= STDIN_CAP and within_ttl(raw)
    except Exception:  # noqa: BLE001 - not sure: the full path decides (and logs why)
        skip = False
    finally:
        if _signal is not None:
            _signal.setitimer(_signal.ITIMER_REAL, 0)
    if skip:
        if _debug():
            _log("debug", "hook pre-tool-use: skipped: fetched less than the TTL ago (or LETTA_MODE=off)")
        return 0
    import io

    from .hookrun import run

    return run(event, stdin=io.BytesIO(raw))
