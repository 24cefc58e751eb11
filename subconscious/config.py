"""Environment → settings. Upstream-compatible variables plus SUBCONSCIOUS_HOST / SUBCONSCIOUS_STATE_DIR.

Pure where it matters: :func:`expand_letta_home` and :func:`load_settings` take the environment as a
mapping, so tests need no monkeypatching.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

MODES = ("whisper", "full", "off")
SDK_TOOLS = ("read-only", "full", "off")
DEFAULT_BASE_URL = "https://api.letta.com"
STATE_SUBDIR = Path(".letta") / "claude"

_HOME_VAR = re.compile(r"\$(?:HOME\b|\{HOME\})")
_ANY_VAR = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|%[A-Za-z_][A-Za-z0-9_]*%")


class ConfigError(ValueError):
    """A setting that cannot be used as given; the message says which and how to fix it."""


def expand_letta_home(raw: str, user_home: str, cwd: str) -> Path:
    """Expand ``$HOME``, ``${HOME}`` and a leading ``~`` in LETTA_HOME (Claude Code's settings.json
    passes them literally); refuse any other unexpanded variable instead of creating a directory
    literally named ``$VAR`` (upstream issue #48)."""
    text = raw.strip()
    if not text:
        raise ConfigError("LETTA_HOME is set but empty; unset it or give a directory")
    text = _HOME_VAR.sub(lambda _: user_home, text)
    if text == "~" or text.startswith("~/"):
        text = user_home + text[1:]
    leftover = _ANY_VAR.search(text)
    if leftover:
        raise ConfigError(
            f"LETTA_HOME={raw!r} contains {leftover.group(0)}, which was not expanded "
            "(only $HOME, ${HOME} and ~ are); write the directory out in full"
        )
    if text.startswith("~"):
        raise ConfigError(f"LETTA_HOME={raw!r}: only a leading '~/' is expanded, not '~user'")
    path = Path(text)
    return path if path.is_absolute() else Path(cwd) / path


@dataclass(frozen=True)
class Settings:
    letta_home: Path  # LETTA_HOME (or the project dir)
    state_home: Path  # the shared, synced state dir: <letta_home>/.letta/claude
    mode: str
    sdk_tools: str
    agent_id: str | None
    base_url: str
    api_key: str | None = field(repr=False)
    model: str | None
    context_window: int | None
    debug: bool
    project: str | None
    letta_home_explicit: bool


def _choice(env: Mapping[str, str], name: str, allowed: tuple[str, ...], default: str) -> str:
    value = (env.get(name) or default).strip().lower()
    if value not in allowed:
        raise ConfigError(f"{name}={env.get(name)!r} is not one of {', '.join(allowed)}")
    return value


def load_settings(env: Mapping[str, str] = os.environ, cwd: str | None = None, home: str | None = None) -> Settings:
    """Settings for a command run in ``cwd`` (a hook passes the session's cwd). ``home``: the session's
    home as recorded at its start (an absolute path): used as it is, whatever LETTA_HOME and ``cwd`` say now."""
    cwd = cwd or env.get("CLAUDE_PROJECT_DIR") or os.getcwd()
    user_home = env.get("HOME") or str(Path.home())
    raw_home = env.get("LETTA_HOME")
    if home is not None and os.path.isabs(home):
        letta_home = Path(home)
    else:
        letta_home = expand_letta_home(raw_home, user_home, cwd) if raw_home is not None else Path(cwd)
    window = env.get("LETTA_CONTEXT_WINDOW")
    if window is not None and window.strip():
        if not window.strip().isdigit():
            raise ConfigError(f"LETTA_CONTEXT_WINDOW={window!r} is not a whole number of tokens")
        context_window: int | None = int(window)
    else:
        context_window = None
    return Settings(
        letta_home=letta_home,
        state_home=letta_home / STATE_SUBDIR,
        mode=_choice(env, "LETTA_MODE", MODES, "whisper"),
        sdk_tools=_choice(env, "LETTA_SDK_TOOLS", SDK_TOOLS, "read-only"),
        agent_id=(env.get("LETTA_AGENT_ID") or "").strip() or None,
        base_url=(env.get("LETTA_BASE_URL") or "").strip() or DEFAULT_BASE_URL,
        api_key=(env.get("LETTA_API_KEY") or "").strip() or None,
        model=(env.get("LETTA_MODEL") or "").strip() or None,
        context_window=context_window,
        debug=(env.get("LETTA_DEBUG") or "").strip().lower() in ("1", "true", "yes", "on"),
        project=(env.get("LETTA_PROJECT") or "").strip() or None,
        letta_home_explicit=raw_home is not None,
    )
