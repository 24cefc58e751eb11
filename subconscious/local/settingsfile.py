"""Our hooks in a Claude Code settings file (``~/.claude/settings.json`` and friends): pure functions.

The hooks come from the plugin's ``hooks/hooks.json`` (same commands, matchers and timeouts), so the
plugin and ``subconscious install`` never drift. A handler is *ours* when it is a command that runs
``subconscious hook <event>`` (any version of our command line): Claude Code rewrites settings files and
drops keys it does not know, so no marker field would survive — the command is the mark.

- :func:`parse_settings` refuses what it cannot round-trip (not JSON, duplicate keys, a ``hooks`` of the
  wrong shape) rather than guess: the caller must then leave the file alone;
- :func:`install` = remove ours, then append ours per event: idempotent, other hooks untouched;
- :func:`uninstall` removes only ours; groups and events that only held ours go with them;
- :func:`served_hooks`: the same hooks with PreToolUse and UserPromptSubmit answered by ``subconscious serve``
  on 127.0.0.1 (served mode): through the bash client (:data:`CLIENT_NAME`, a command hook that is silent
  whatever fails), or as Claude Code ``http`` hooks; ours too, by the client's name or the URL path
  ``/subconscious/hook/<event>``, so switching back and forth and uninstalling find them.
"""

from __future__ import annotations

import copy
import json
import math
import re
from typing import Any

PLUGIN_ROOT_VARS = ("${CLAUDE_PLUGIN_ROOT}", "$CLAUDE_PLUGIN_ROOT")
_OURS = re.compile(r"\bsubconscious['\"]?\s+hook\s+(?:session-start|user-prompt-submit|pre-tool-use|stop|"
                   r"stop-failure|pre-compact|post-compact|subagent-start|subagent-stop|session-end)\b")
_OURS_URL = re.compile(r"^http://127\.0\.0\.1:\d{1,5}/subconscious/hook/(?:user-prompt-submit|pre-tool-use)$")
SERVED_EVENTS = {"PreToolUse": "pre-tool-use", "UserPromptSubmit": "user-prompt-submit"}
CLIENT_NAME = "subconscious-served"  # the bash client's $0: ``bash -c <client> subconscious-served <event> <port>``
TOKEN_HEADER = "X-Subconscious-Token"
TOKEN_VAR = "SUBCONSCIOUS_SERVE_TOKEN"
ENV_HEADER = "X-Subconscious-Env-"  # + a variable name: Claude Code's value of it, for the server
# What a command hook would read from Claude Code's environment, passed to the server in headers (an http hook
# gets no process environment); the server uses its own value where Claude Code has none. Nothing that decides
# where the API key goes: not LETTA_API_KEY, and not LETTA_BASE_URL — a request (from anyone who has the token)
# naming the Letta server would have the server send `Authorization: Bearer <key>` there. The key and the URL
# both stay in the server's own environment (the one SessionStart starts it with is Claude Code's).
FORWARDED_VARS = ("LETTA_MODE", "LETTA_HOME", "LETTA_AGENT_ID", "LETTA_SDK_TOOLS",
                  "SUBCONSCIOUS_FETCH_TTL", "SUBCONSCIOUS_HOST", "SUBCONSCIOUS_STATE_DIR")
# Never taken from a request, whatever an older settings file still sends.
NOT_FORWARDED = ("LETTA_API_KEY", "LETTA_BASE_URL")


class SettingsError(ValueError):
    """A settings or hooks file we will not touch; the message says why and what to do."""


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise SettingsError(f"the key {key!r} appears twice in one object; writing the file back would "
                                "drop one of them")
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise SettingsError(f"it holds {name}, which is not JSON (Claude Code could not read the file)")


def _finite(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise SettingsError(f"the number {literal[:40]} is out of range for a JSON reader: written back it would "
                            "become Infinity, which Claude Code cannot read")
    return value


def parse_json_object(text: str, what: str) -> dict[str, Any]:
    """``text`` as a JSON object (blank text is an empty object); SettingsError otherwise. Numbers that would
    not survive a rewrite (``1e400`` becomes ``Infinity``) and the non-JSON ``NaN``/``Infinity`` are refused."""
    if not text.strip():
        return {}
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicate_keys, parse_constant=_no_constant,
                          parse_float=_finite)
    except json.JSONDecodeError as exc:
        raise SettingsError(f"{what} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except SettingsError as exc:
        raise SettingsError(f"{what}: {exc}") from None
    except (ValueError, RecursionError) as exc:  # e.g. an integer longer than Python's digit limit, deep nesting
        raise SettingsError(f"{what} cannot be read back safely: {str(exc)[:120]}") from None
    if not isinstance(data, dict):
        raise SettingsError(f"{what} holds a JSON {type(data).__name__}, not an object")
    return data


def _check_hooks(hooks: Any, what: str) -> None:
    if not isinstance(hooks, dict):
        raise SettingsError(f'{what}: "hooks" is a {type(hooks).__name__}, expected an object of events')
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            raise SettingsError(f'{what}: "hooks.{event}" is a {type(groups).__name__}, expected a list')
        for i, group in enumerate(groups):
            if not isinstance(group, dict) or not isinstance(group.get("hooks", []), list):
                raise SettingsError(f'{what}: "hooks.{event}[{i}]" is not a group {{"matcher", "hooks": [...]}}')


def parse_settings(text: str, what: str = "the settings file") -> dict[str, Any]:
    data = parse_json_object(text, what)
    if "hooks" in data:
        _check_hooks(data["hooks"], what)
    return data


def plugin_hooks(hooks_json_text: str, plugin_root: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """The ``hooks`` of the plugin's hooks.json; ``${CLAUDE_PLUGIN_ROOT}`` spelled out (settings files
    have no plugin root). Every handler must be ours, or install could not find it again."""
    data = parse_json_object(hooks_json_text, "hooks.json")
    hooks = data.get("hooks")
    _check_hooks(hooks, "hooks.json")
    if not hooks:
        raise SettingsError("hooks.json has no hooks")
    out = copy.deepcopy(hooks)
    for event, groups in out.items():
        for group in groups:
            group["hooks"] = [settings_handler(h) for h in group.get("hooks", [])]
            for handler in group["hooks"]:
                command = handler.get("command", "")
                if any(v in command for v in PLUGIN_ROOT_VARS):
                    if plugin_root is None:
                        raise SettingsError("hooks.json uses ${CLAUDE_PLUGIN_ROOT} but no plugin dir is known")
                    for v in PLUGIN_ROOT_VARS:
                        command = command.replace(v, plugin_root)
                    handler["command"] = command
                if not is_ours(handler):
                    raise SettingsError(f"hooks.json: the {event} hook does not run `subconscious hook …`")
    return out


# A settings file has no plugin dir and no plugin data dir: there our hooks are this shell form, which finds
# the command a user installed (PATH, else pipx's ~/.local/bin) and keeps a failure from blocking (exit 2 -> 1).
# As hooks/run does, it runs the interpreter pip's script names (its first line, a plain absolute path; a
# line `from subconscious.cli import main` below it) with the hook entry, skipping the script's own
# `import re` (~5 ms a hook); any other script runs as it is. The
# comment at the end names the command for is_ours (and for a reader of the file).
# HOOK_ENTRY is the program both give that python (`python -c HOOK_ENTRY <version> <script> hook <event>`): an install
# without the entry runs its script instead. hooks/run spells it out too (tests/unit/test_launcher_entry.py
# checks the two are the same).
# Its first argument is the Python the install was made with ("3.11", empty: any): another one, or a package that no
# longer imports (a Python upgraded under its venv), ends it with 87 or 86 before it reads or prints anything. The
# current directory leaves sys.path first, as -P would do (not -P itself: a Python older than 3.11 under the venv
# would stop at the option, on stderr, instead of at the version check).
HOOK_ENTRY = ('import sys\nif sys.path[:1] == [""]:\n    del sys.path[0]\n'
              'if sys.argv[1] and sys.argv[1] != "%d.%d%s" % (sys.version_info[0], sys.version_info[1], '
              'getattr(sys, "abiflags", "")):\n    sys.exit(87)\ntry:\n    import subconscious\nexcept BaseException:\n'
              '    sys.exit(86)\ntry:\n    from subconscious.hotpath import launch\nexcept ImportError:\n    import os\n'
              '    os.execv(sys.argv[2], sys.argv[2:])\nlaunch(sys.argv[3:])')
SETTINGS_COMMAND = (
    "s=$(command -v subconscious 2>/dev/null) || s=; "
    "if [ -z \"$s\" ] && [ -x \"$HOME/.local/bin/subconscious\" ]; then s=$HOME/.local/bin/subconscious; fi; "
    "if [ -z \"$s\" ]; then echo 'subconscious: command not found on PATH or in ~/.local/bin, so this hook did "
    "nothing. Install it with: pip install subconscious (or: pipx install subconscious)' >&2; exit 0; fi; "
    "p=; m=; {{ read -r p; i=0; while [ $i -lt 12 ] && read -r l; do if [ \"$l\" = 'from subconscious.cli import main' ]; "
    "then m=1; break; fi; i=$((i + 1)); done; }} <\"$s\" 2>/dev/null; [ -n \"$m\" ] || p=; "
    "case $p in '#!/'*) p=${{p#??}} ;; *) p= ;; esac; "
    "case $p in *' '* | *'\t'*) p= ;; esac; case ${{p##*/}} in python*) ;; *) p= ;; esac; "
    "if [ -n \"$p\" ] && [ -x \"$p\" ]; then \"$p\" -c '" + HOOK_ENTRY + "' '' "
    "\"$s\" hook {event} || exit 1; else \"$s\" hook {event} || exit 1; fi; exit 0  # subconscious hook {event}")
_LAUNCHER_EVENT = re.compile(r"[a-z][a-z-]*")


def settings_handler(handler: Any) -> Any:
    """A plugin handler in the launcher's exec form (``/bin/sh ${CLAUDE_PLUGIN_ROOT}/hooks/run <event>``) as
    a settings-file handler (:data:`SETTINGS_COMMAND`, same timeout and other keys); others as they are."""
    args = handler.get("args") if isinstance(handler, dict) else None
    if not (isinstance(args, list) and len(args) == 2 and all(isinstance(a, str) for a in args)
            and args[0].endswith("/hooks/run") and _LAUNCHER_EVENT.fullmatch(args[1])):
        return handler
    out = {k: v for k, v in handler.items() if k != "args"}
    out["command"] = SETTINGS_COMMAND.format(event=args[1])
    return out


def is_ours(handler: Any) -> bool:
    if not isinstance(handler, dict):
        return False
    kind = handler.get("type", "command")
    if kind == "http":
        return isinstance(handler.get("url"), str) and _OURS_URL.match(handler["url"]) is not None
    return kind == "command" and (is_served_client(handler) or (
        isinstance(handler.get("command"), str) and _OURS.search(handler["command"]) is not None))


def is_served_client(handler: Any) -> bool:
    """A command hook in the bash client's exec form (``bash -c <script> subconscious-served <event> <port>``)."""
    args = handler.get("args") if isinstance(handler, dict) else None
    return (isinstance(args, list) and len(args) == 5 and all(isinstance(a, str) for a in args)
            and args[0] == "-c" and args[2] == CLIENT_NAME and args[3] in SERVED_EVENTS.values()
            and args[4].isdigit())


def served_hooks(ours: dict[str, list[dict[str, Any]]], port: int,
                 client: tuple[str, str] | None = None) -> dict[str, list[dict[str, Any]]]:
    """``ours`` with the PreToolUse and UserPromptSubmit handlers answered by ``subconscious serve`` on
    ``127.0.0.1:port`` (same matchers and timeouts). ``client`` = (bash's absolute path, the client script's
    text): command hooks running that script (it reads the token from the state dir or
    ``$SUBCONSCIOUS_SERVE_TOKEN``); None: Claude Code http hooks, the token from Claude Code's environment
    (``$SUBCONSCIOUS_SERVE_TOKEN``, named in ``allowedEnvVars``). The token is never written into the file."""
    if not 0 < port < 65536:
        raise SettingsError(f"port {port} is out of range")
    if client is not None and not (client[0].startswith("/") and client[1].strip()):
        raise SettingsError(f"the served client needs bash by its absolute path, not {client[0]!r}")
    out = copy.deepcopy(ours)
    for event, name in SERVED_EVENTS.items():
        for group in out.get(event, []):
            group["hooks"] = [(_client_handler(h, name, port, client) if client else _http_handler(h, name, port))
                              if is_ours(h) else h for h in group.get("hooks", [])]
    return out


def _client_handler(command_handler: dict[str, Any], event: str, port: int, client: tuple[str, str]) -> dict[str, Any]:
    handler: dict[str, Any] = {"type": "command", "command": client[0],
                               "args": ["-c", client[1], CLIENT_NAME, event, str(port)]}
    if "timeout" in command_handler:
        handler["timeout"] = command_handler["timeout"]
    return handler


def _http_handler(command_handler: dict[str, Any], event: str, port: int) -> dict[str, Any]:
    headers = {TOKEN_HEADER: "${%s}" % TOKEN_VAR}
    headers.update({ENV_HEADER + var: "${%s}" % var for var in FORWARDED_VARS})
    handler: dict[str, Any] = {"type": "http", "url": f"http://127.0.0.1:{port}/subconscious/hook/{event}",
                               "headers": headers, "allowedEnvVars": [TOKEN_VAR, *FORWARDED_VARS]}
    if "timeout" in command_handler:
        handler["timeout"] = command_handler["timeout"]
    return handler


def count_ours(settings: dict[str, Any]) -> int:
    return sum(1 for groups in (settings.get("hooks") or {}).values() for g in groups
               for h in g.get("hooks", []) if is_ours(h))


def uninstall(settings: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """(settings without our handlers, how many were removed). Nothing else changes, except that a
    group, an event or the ``hooks`` object left empty by the removal goes too."""
    if not count_ours(settings):
        return copy.deepcopy(settings), 0
    out = copy.deepcopy(settings)
    removed = 0
    hooks = out["hooks"]
    for event in list(hooks):
        groups, removed_here = [], 0
        for group in hooks[event]:
            handlers = group.get("hooks", [])
            kept = [h for h in handlers if not is_ours(h)]
            removed_here += len(handlers) - len(kept)
            if len(kept) == len(handlers):
                groups.append(group)
            elif kept:
                groups.append({**group, "hooks": kept})
        removed += removed_here
        if groups or not removed_here:
            hooks[event] = groups
        else:  # only ours were there
            del hooks[event]
    if not hooks:
        del out["hooks"]
    return out, removed


def install(settings: dict[str, Any], ours: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """``settings`` with our hooks (and only one copy of them): any older copy removed, ours appended
    after the other hooks of each event."""
    out, _ = uninstall(settings)
    hooks = out.setdefault("hooks", {})
    for event, groups in ours.items():
        hooks.setdefault(event, []).extend(copy.deepcopy(groups))
    return out


def enabled_plugin(settings: dict[str, Any]) -> list[str]:
    """Our plugin's ids enabled in these settings (``enabledPlugins``: ``{"subconscious@market": true}``)."""
    enabled = settings.get("enabledPlugins")
    if not isinstance(enabled, dict):
        return []
    return sorted(k for k, v in enabled.items() if isinstance(k, str) and k.startswith("subconscious@") and v is True)


def detect_indent(text: str) -> int | str:
    """The indentation the file uses (so a rewrite keeps its look); 2 when it cannot tell."""
    for line in text.splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and len(stripped) < len(line):
            lead = line[: len(line) - len(stripped)]
            return "\t" if lead.startswith("\t") else len(lead)
    return 2


def render(settings: dict[str, Any], indent: int | str = 2) -> str:
    """The file's new text; never ``NaN``/``Infinity`` (not JSON: Node's JSON.parse rejects them)."""
    try:
        return json.dumps(settings, indent=indent, ensure_ascii=False, allow_nan=False) + "\n"
    except ValueError as exc:
        raise SettingsError(f"the settings cannot be written as JSON: {exc}") from None
