"""Bash (LETTA_SDK_TOOLS=full only), run inside a bubblewrap sandbox or not at all.

In the sandbox (``bwrap``): the whole filesystem is read-only, the user's home directory and /tmp are
empty, the project directory is the only writable place (its .git read-only), there is no network and
no access to other processes; the environment holds only PATH, LANG and HOME (= the project); stdin
is empty; the call is killed at the per-call timeout. Without bwrap on PATH (macOS, Windows, Linux
without the ``bubblewrap`` package) Bash is refused with an error, never run unconfined.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from typing import Any, Mapping

from .confine import Root, ToolError, ToolTimeout
from .limits import Limits
from .readers import _str

__all__ = ["bash", "sandbox_available", "sandbox_argv"]

MAX_COMMAND_CHARS = 8000


def sandbox_available() -> bool:
    return os.name == "posix" and shutil.which("bwrap") is not None


def sandbox_argv(bwrap: str, project: str, home: str | None, command: str) -> list[str]:
    argv = [bwrap, "--die-with-parent", "--new-session", "--unshare-all",
            "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    hide_home = bool(home) and os.path.isabs(home) and home != "/" and home != project and os.path.isdir(home)
    home_inside_project = hide_home and home.startswith(project.rstrip("/") + "/")
    if hide_home and not home_inside_project:
        argv += ["--tmpfs", home]  # hide the home directory (keys, tokens, other projects)...
    argv += ["--bind", project, project]  # ...then show the project again, writable
    if home_inside_project:
        argv += ["--tmpfs", home]
    git = os.path.join(project, ".git")
    if os.path.exists(git):
        argv += ["--ro-bind", git, git]
    argv += ["--chdir", project, "--clearenv",
             "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin", "--setenv", "HOME", project,
             "--setenv", "LANG", "C.UTF-8", "--setenv", "TERM", "dumb",
             "/bin/sh", "-c", command]
    return argv


def bash(root: Root, args: Mapping[str, Any], limits: Limits, deadline: float) -> str:
    command = _str(args, "command", required=True)
    if len(command) > MAX_COMMAND_CHARS:
        raise ToolError(f"the command is over {MAX_COMMAND_CHARS} characters")
    bwrap = shutil.which("bwrap") if os.name == "posix" else None
    if bwrap is None:
        raise ToolError("Bash runs only inside a bubblewrap sandbox, and bwrap is not installed on this machine "
                        "(Linux: install the 'bubblewrap' package); the command was not run")
    argv = sandbox_argv(bwrap, root.path, os.path.expanduser("~"), command)
    remaining = max(0.5, deadline - time.monotonic())
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    try:
        out, _ = proc.communicate(timeout=remaining)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.communicate()
        raise ToolTimeout(f"the command was killed after {remaining:.0f} s (per-call limit)") from None
    text = out[:limits.max_result_chars * 4].decode("utf-8", errors="replace")
    took = time.monotonic() - started
    return f"{text.rstrip()}\n[exit status {proc.returncode}, {took:.1f} s, run in a sandbox: project writable, no network]"
