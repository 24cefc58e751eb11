"""``subconscious install`` / ``subconscious uninstall``: add or remove our hooks in a Claude Code
settings file, for people who do not use the plugin.

Target: the user settings (``$CLAUDE_CONFIG_DIR/settings.json``, else ``~/.claude/settings.json``),
``--project DIR`` (``DIR/.claude/settings.json``) or ``--settings FILE``. The hooks are read from the
plugin's ``hooks/hooks.json``. The file is rewritten only when something changes, atomically, keeping
its mode, its indentation and a timestamped backup next to it. A symlinked file (dotfiles) is written
through the link, and the output says where it points; under ``--project`` a link (the file, or ``.claude``)
that leads outside the project is refused — a cloned project must not make install write elsewhere. A file
that does not parse, or that would not survive a rewrite (``1e400``, ``NaN``), is never touched: exit 2 with
the reason.
"""

from __future__ import annotations

import argparse
import difflib
import os
import shutil
import sys
import time
from pathlib import Path

from ..base.atomic import FileChangedError, atomic_write

PACKAGE_DIR = Path(__file__).resolve().parents[1]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--project", metavar="DIR", help="the project's settings: DIR/.claude/settings.json")
    where.add_argument("--settings", metavar="FILE", help="this settings file")
    parser.add_argument("--dry-run", action="store_true", help="show the change as a diff; write nothing")
    parser.add_argument("--hooks-file", metavar="FILE", help=argparse.SUPPRESS)  # another hooks.json (tests, forks)
    if parser.prog.endswith(" install"):
        parser.add_argument("--served", action="store_true",
                            help="PreToolUse and UserPromptSubmit answered by `subconscious serve` (served mode) through "
                                 "a bash client that says nothing when the server is not there; without it, install "
                                 "writes command hooks (and switches served ones back)")
        parser.add_argument("--http", action="store_true",
                            help="with --served: Claude Code http hooks instead of the bash client (no process at all, "
                                 "but Claude Code's screen shows 'hook failed' while the server is down)")
        parser.add_argument("--port", type=int, default=None,
                            help="with --served: the port `subconscious serve` listens on (default: "
                                 "$SUBCONSCIOUS_SERVE_PORT, else 20000 + uid %% 10000)")


def target_path(args: argparse.Namespace, env=os.environ) -> Path:
    if args.settings:
        return Path(args.settings).expanduser()
    if args.project:
        return Path(args.project).expanduser() / ".claude" / "settings.json"
    config = env.get("CLAUDE_CONFIG_DIR")
    base = Path(config).expanduser() if config else Path(env.get("HOME") or Path.home()) / ".claude"
    return base / "settings.json"


def hooks_json(explicit: str | None = None) -> tuple[Path, Path | None]:
    """(hooks.json, the plugin dir it belongs to). The plugin's own file when this package runs from
    the plugin's checkout (the usual case), else the copy shipped inside the package."""
    if explicit:
        p = Path(explicit).expanduser()
        return p, p.resolve().parent.parent
    root = PACKAGE_DIR.parent
    if (root / ".claude-plugin" / "plugin.json").is_file() and (root / "hooks" / "hooks.json").is_file():
        return root / "hooks" / "hooks.json", root
    return PACKAGE_DIR / "data" / "hooks.json", None


def run(args: argparse.Namespace) -> int:
    from ..local.settingsfile import SettingsError, detect_indent, install, parse_settings, plugin_hooks, render, uninstall

    target = target_path(args)
    shown = str(target)
    real, outside = _where_it_writes(target, args)
    if outside is not None:
        return _fail(f"{shown} leads to {real}, outside {outside} (a symbolic link). Nothing was changed: "
                     f"if you mean to change that file, run `subconscious {args.verb} --settings {real}`", 2)
    if real != Path(os.path.realpath(target.parent)) / target.name:
        print(f"note: {shown} is a symbolic link to {real}; that file is the one changed")
    try:
        raw = target.read_bytes() if target.exists() else None
    except OSError as exc:
        return _fail(f"cannot read {shown}: {exc.strerror or exc}", 1)
    if raw is None and args.verb == "uninstall":
        print(f"{shown} does not exist; nothing to remove")
        return 0
    try:
        text = raw.decode("utf-8") if raw is not None else ""
    except UnicodeDecodeError:
        return _fail(f"{shown} is not UTF-8 text. Nothing was changed.", 2)
    try:
        settings = parse_settings(text, shown)
    except SettingsError as exc:
        return _fail(f"{exc}. Nothing was changed: fix the file (or move it away) and run this again.", 2)

    if args.verb == "install":
        hooks_file, plugin_root = hooks_json(getattr(args, "hooks_file", None))
        try:
            ours = plugin_hooks(hooks_file.read_text(encoding="utf-8"), str(plugin_root) if plugin_root else None)
        except (OSError, SettingsError) as exc:
            return _fail(f"cannot read our hooks from {hooks_file}: {exc}", 2)
        served_port = None
        if getattr(args, "http", False) and not getattr(args, "served", False):
            return _fail("--http goes with --served. Nothing was changed.", 2)
        if getattr(args, "served", False):
            from ..served import client_script, default_port
            from ..local.settingsfile import served_hooks

            client = None
            if not args.http:
                bash = shutil.which("bash")
                if not bash:
                    return _fail("served mode's client needs bash, which is not on PATH (or use --served --http). "
                                 "Nothing was changed.", 2)
                client = (os.path.realpath(bash), client_script())
            try:
                served_port = args.port if args.port is not None else default_port()
                ours = served_hooks(ours, served_port, client)
            except (ValueError, SettingsError, OSError) as exc:
                return _fail(f"{exc}. Nothing was changed.", 2)
        new = install(settings, ours)
        events = ", ".join(ours) + (f"; PreToolUse and UserPromptSubmit served by http://127.0.0.1:{served_port}"
                                    if served_port else "")
    else:
        new, removed = uninstall(settings)
    if new == settings and raw is not None:
        if args.verb == "install":
            print(f"subconscious hooks already in {shown} ({events}); nothing changed")
            if served_port:
                _served_notes(served_port, args.http)
        else:
            print(f"no subconscious hooks in {shown}; nothing changed")
        return 0

    try:
        new_text = render(new, detect_indent(text))
    except SettingsError as exc:
        return _fail(f"{exc}. Nothing was changed.", 2)
    if args.dry_run:
        diff = difflib.unified_diff(text.splitlines(keepends=True), new_text.splitlines(keepends=True),
                                    fromfile=shown, tofile=shown + " (after)")
        sys.stdout.writelines(diff)
        print(f"(dry run: {shown} not changed)")
        if args.verb == "install":
            _notes(new, target)
        return 0
    try:
        backup = _write(target, raw, new_text)
    except FileChangedError:
        return _fail(f"{shown} changed while we were editing it (Claude Code running?); nothing was "
                     "written — run this again", 1)
    except OSError as exc:
        return _fail(f"cannot write {shown}: {exc.strerror or exc}; nothing was changed", 1)
    kept = f"; the previous file is kept as {backup}" if backup else ""
    if args.verb == "install":
        print(f"added subconscious hooks to {shown} ({events}){kept}")
        _notes(new, target)
        if served_port:
            _served_notes(served_port, args.http)
        elif _has_served(settings):
            _served_off()
    else:
        print(f"removed {removed} subconscious hook{'s' if removed != 1 else ''} from {shown}{kept}")
        if _has_served(settings):
            _served_off()
    return 0


def _where_it_writes(target: Path, args: argparse.Namespace) -> tuple[Path, Path | None]:
    """(the real file a write lands in, the directory it escapes or None). Links are followed, but under
    ``--project`` the real file must stay inside the project directory."""
    real = Path(os.path.realpath(target))
    if getattr(args, "project", None):
        root = Path(os.path.realpath(Path(args.project).expanduser()))
        if real != root and root not in real.parents:
            return real, root
    return real, None


def _write(target: Path, raw: bytes | None, text: str) -> Path | None:
    """Back up the old bytes (same mode), then replace the file atomically; returns the backup path."""
    real = Path(os.path.realpath(target))  # a dotfiles link stays a link (run() checked where it leads)
    directory = real.parent
    if raw is None:
        directory.mkdir(parents=True, exist_ok=True)
    mode = (real.stat().st_mode & 0o777) if raw is not None else 0o600
    backup = None
    if raw is not None:
        backup = _backup(target, raw, mode)
    atomic_write(real, text, mode=mode, unchanged_since=raw)
    return backup


def _backup(target: Path, raw: bytes, mode: int) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(100):
        candidate = target.with_name(f"{target.name}.bak-{stamp}" + (f"-{n}" if n else ""))
        try:
            fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        except FileExistsError:
            continue
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        return candidate
    raise OSError(f"too many backups of {target} this second")


def _notes(settings: dict, target: Path) -> None:
    import shutil

    from ..local.settingsfile import SettingsError, enabled_plugin, parse_settings

    user = target_path(argparse.Namespace(settings=None, project=None))
    sources = [(target, settings)]
    if user.exists() and user.resolve() != target.resolve():
        try:
            sources.append((user, parse_settings(user.read_text(encoding="utf-8"), str(user))))
        except (OSError, UnicodeDecodeError, SettingsError):
            pass
    for path, data in sources:
        for plugin in enabled_plugin(data):
            print(f"note: the plugin {plugin} is enabled in {path}: with both, every hook runs twice. Keep one: "
                  f"`claude plugin disable {plugin}`, or `subconscious uninstall`")
    if settings.get("disableAllHooks") is True:
        print('note: this file sets "disableAllHooks": true, so Claude Code will not run these hooks')
    if shutil.which("subconscious") is None and not (Path.home() / ".local" / "bin" / "subconscious").exists():
        print("note: `subconscious` is not on PATH nor in ~/.local/bin; until it is, the hooks say so and do nothing")


def _has_served(settings: dict) -> bool:
    from ..local.settingsfile import is_ours, is_served_client

    return any((h.get("type") == "http" or is_served_client(h)) and is_ours(h) for groups in (settings.get("hooks") or {}).values()
               for g in groups for h in g.get("hooks", []))


def _served_off() -> None:
    """This file's served hooks are gone: SessionStart stops starting the server."""
    from ..local.identity import local_dirs
    from ..local.autostart import disable

    try:
        if disable(local_dirs().root):
            print("note: served mode is off: SessionStart no longer starts `subconscious serve` "
                  "(a running one keeps running until stopped)")
    except OSError:
        pass


def _served_notes(port: int, http: bool) -> None:
    """What served mode needs besides the settings: the token in Claude Code's environment; the marker that
    has SessionStart start the server when nothing answers on its port."""
    from ..local.identity import local_dirs
    from ..local.autostart import enable
    from ..local.servetoken import ensure_token

    try:
        token = ensure_token(local_dirs().root)
        enable(local_dirs().root, port)
    except (OSError, RuntimeError) as exc:
        print(f"note: cannot make the served mode's token ({exc}); `subconscious serve` will say why")
        return
    given = os.environ.get("SUBCONSCIOUS_SERVE_TOKEN")
    if not http:
        if given and given != token:
            print("note: SUBCONSCIOUS_SERVE_TOKEN is set to another token: the client sends it, and the server "
                  "refuses it (a silent skip). Unset it, or: export SUBCONSCIOUS_SERVE_TOKEN=$(subconscious serve "
                  "--print-token)")
        print("note: SessionStart starts `subconscious serve` when nothing answers on the port (or run it "
              "yourself: deploy/ has a systemd user unit and a launchd agent). While none answers, the two hooks "
              "say nothing: Claude Code goes on as without them. `subconscious install` switches back to command "
              "hooks")
        return
    if given != token:
        state = "is set to another token" if given else "is not set here"
        print(f"note: SUBCONSCIOUS_SERVE_TOKEN {state}: Claude Code must have it, or the server refuses its hooks "
              "(a silent skip). In your shell profile: export SUBCONSCIOUS_SERVE_TOKEN=$(subconscious serve --print-token)")
    print("note: SessionStart starts `subconscious serve` when nothing answers on the port (or run it "
          "yourself: deploy/ has a systemd user unit and a launchd agent). While none answers, the two hooks are "
          "skipped and Claude Code's screen says so under each prompt and tool call. `subconscious install` "
          "switches back to command hooks")


def _fail(message: str, code: int) -> int:
    print(f"subconscious: {message}", file=sys.stderr)
    return code
