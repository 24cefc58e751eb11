"""What the hooks' cheap paths read, and how: the hook's input, the machine-local state dir, the fetch TTL, the
claims file and the shared home's JSON files, with what the interpreter has already loaded plus
:mod:`subconscious.base.fastjson`. A leaf of the hooks package: the entry (:mod:`.hotentry`) and the fetch
shortcut (:mod:`.fetch_shortcut`) both read through it, so neither borrows the other's privates.
"""

from __future__ import annotations

import os
import sys

__all__ = ["STDIN_CAP", "MODES", "plain_session_id", "state_dir", "fetch_ttl_ms", "last_fetch_ms", "read_input",
           "read_json", "read_shared", "has_text", "log", "debug"]

STDIN_CAP = 8 * 1024 * 1024  # as hookrun.STDIN_CAP
MODES = ("whisper", "full")
_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")


def _log(level: str, message: str) -> None:
    """One line in the per-user log, through the real (redacting) logger: imported only now."""
    try:
        from .run import _logger

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
    """The machine-local state dir as :func:`subconscious.local.identity.local_dirs` finds it, where that takes
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
    """When this session last began a fetch on this machine (the claims file, :mod:`subconscious.local.claims`:
    written by atomic rename, so read whole without its lock); None when there is none to read."""
    try:
        with open(os.path.join(directory, "shown", session_id + ".json"), "rb") as f:
            raw = f.read(1 << 20)
        from ..base import fastjson as json

        value = json.loads(raw).get("fetch_ms")
    except (OSError, ValueError, AttributeError, RecursionError):
        return None
    return value if type(value) is int else None


def _input(raw: bytes, env) -> tuple[dict, str, str] | None:
    """(hook input, session id, mode) when the input is a plain JSON object with a valid session id and
    LETTA_MODE is one this path knows; None otherwise (the full path decides, and logs why)."""
    from ..base import fastjson as json

    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    sid = plain_session_id(data.get("session_id"))
    mode = (env.get("LETTA_MODE") or "whisper").strip().lower()
    if sid is None or (mode not in MODES and mode != "off"):
        return None
    return data, sid, mode


def _text(value) -> bool:
    return isinstance(value, str) and bool(value)


def _read_json(path: str):
    from ..base import fastjson as json

    try:
        with open(path, "rb") as f:
            value = json.loads(f.read())
    except (OSError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _read_shared(home: str, name: str):
    """A JSON object from the shared state dir (``<home>/.letta/claude/<name>``) as the store reads it: never
    through a symbolic link below the home (then None: the full path decides)."""
    from ..base import fastjson as json

    directory = os.path.join(home, ".letta")
    for d in (directory, os.path.join(directory, "claude")):
        if os.path.islink(d):
            return None
    try:
        fd = os.open(os.path.join(directory, "claude", name), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            value = json.loads(f.read(1 << 22))
    except (OSError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


# the public names (the underscored ones are what the entry has always called them)
log, debug, read_input, read_json, read_shared, has_text = _log, _debug, _input, _read_json, _read_shared, _text
