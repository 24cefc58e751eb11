"""The plugin's own install (made by hooks/setup under Claude Code's plugin data dir), as doctor reports it:
its interpreter, its version, whether it still starts, and the last set-up's outcome (install.stamp,
setup.failed, setup.log; see hooks/run for their formats)."""

from __future__ import annotations

import glob
import os
import subprocess
import time
from pathlib import Path
from typing import Mapping

from .findings import INFO, WARNING, Finding

STAMP_FIELDS = ("plugin_dir", "command", "plugin_version", "package_version", "python", "python_version",
                "installed_at")
# what hooks/run's entry compares (its first argument): major.minor and the ABI flags
PROBE = ('import os, sys\nimport subconscious\nprint("%d.%d%s" % (sys.version_info[0], sys.version_info[1], '
         'getattr(sys, "abiflags", "")), os.path.realpath(sys.executable))')


def data_dirs(env: Mapping[str, str]) -> list[Path]:
    """The plugin's data dirs on this machine: CLAUDE_PLUGIN_DATA (inside a hook), else every
    ``<config>/plugins/data/subconscious-*`` that holds an install or a set-up log."""
    explicit = env.get("CLAUDE_PLUGIN_DATA")
    if explicit:
        return [Path(explicit)]
    config = env.get("CLAUDE_CONFIG_DIR") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".claude")
    found = sorted(glob.glob(os.path.join(glob.escape(config), "plugins", "data", "subconscious-*")))
    return [Path(d) for d in found if os.path.exists(os.path.join(d, "install.stamp"))
            or os.path.exists(os.path.join(d, "setup.log"))]


def _read(path: Path, cap: int = 1 << 16) -> str | None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        if not os.path.isfile(path):
            return None
        return os.read(fd, cap).decode("utf-8", "replace")
    finally:
        os.close(fd)


def _last_outcome(log: str | None) -> str | None:
    """The set-up log's last line saying how a set-up ended ('installed: ...', 'FAILED ...', 'already ...')."""
    if not log:
        return None
    for line in reversed(log.splitlines()):
        if " installed: " in line or " FAILED " in line or " already installed " in line:
            return line.strip()[:400]
    return None


def state(data: Path, now: float | None = None) -> dict:
    """What the install in ``data`` is, as plain values (doctor --json gives them as the finding's details)."""
    now = time.time() if now is None else now
    out: dict = {"data_dir": str(data)}
    text = _read(data / "install.stamp")
    if text is not None:
        out.update({k: v for k, v in zip(STAMP_FIELDS, text.splitlines()) if v})
    failed = _read(data / "setup.failed")
    if failed:
        lines = failed.splitlines() + ["", "", ""]
        after = lines[0].split()
        out["last_setup"] = {"result": lines[1] or "failed", "reason": lines[2],
                             "attempts": int(after[1]) if len(after) > 1 and after[1].isdigit() else None,
                             "retry_in_s": max(0, int(after[0]) - int(now)) if after and after[0].isdigit() else None}
    last = _last_outcome(_read(data / "setup.log", 1 << 20) if (data / "setup.log").exists() else None)
    if last:
        out["last_setup_line"] = last
    command = out.get("command")
    if command:
        python = os.path.join(os.path.dirname(command), "python")
        if not os.access(command, os.X_OK):
            out["starts"], out["why"] = False, f"{command} is gone"
        elif not os.access(python, os.X_OK):
            out["starts"], out["why"] = False, (f"its interpreter {python} does not run any more (it was "
                                                 f"{out.get('python', '?')})")
        else:
            try:
                p = subprocess.run([python, "-c", PROBE], capture_output=True, text=True, timeout=20,
                                   stdin=subprocess.DEVNULL)
                tag = p.stdout.split(" ", 1)[0].strip() if p.returncode == 0 else ""
            except (OSError, subprocess.SubprocessError):
                tag = ""
            if not tag:
                out["starts"], out["why"] = False, "it cannot import subconscious (its Python changed under it?)"
            elif out.get("python_version") and tag != out["python_version"]:
                out["starts"], out["why"] = False, f"its Python is now {tag}, it was made for {out['python_version']}"
            else:
                out["starts"], out["running_python"] = True, tag
    return out


def findings(env: Mapping[str, str], now: float | None = None) -> list[Finding]:
    rows = []
    for data in data_dirs(env):
        s = state(data, now)
        where = str(data)
        if "command" not in s:
            last = s.get("last_setup")
            why = f": {last['result']}: {last['reason']}" if last else ""
            rows.append(Finding("plugin-install", WARNING if last else INFO, where,
                                f"the plugin has no install of its own yet{why}", details=s))
            continue
        what = (f"subconscious {s.get('package_version', '?')} (plugin {s.get('plugin_version', '?')}) on Python "
                f"{s.get('python_version', '?')} at {s.get('python', '?')}, installed {s.get('installed_at', '?')}")
        if not s.get("starts"):
            rows.append(Finding("plugin-install", WARNING, where, f"the plugin's install does not start ({s['why']}): "
                                f"{what}. The next hook starts a repair in the background", details=s))
        elif "last_setup" in s:
            last = s["last_setup"]
            rows.append(Finding("plugin-install", WARNING, where, f"the plugin's install: {what}; its last set-up "
                                f"failed ({last['result']}: {last['reason']}), next try in "
                                f"{(last['retry_in_s'] or 0) // 60} min", details=s))
        else:
            rows.append(Finding("plugin-install", INFO, where, f"the plugin's install: {what}; it starts", details=s))
    return rows
