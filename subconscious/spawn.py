"""Starting the detached worker: a new session (process group) of its own, no inherited stdio, so the
hook returns at once and Claude Code never waits for delivery."""

from __future__ import annotations

import os
import subprocess
import sys


def spawn_worker(session_id: str, cwd: str | None = None) -> int:
    kwargs: dict = {
        "stdin": subprocess.DEVNULL,
        "stdout": subprocess.DEVNULL,
        "stderr": subprocess.DEVNULL,
        "cwd": cwd if cwd and os.path.isdir(cwd) else None,
        "close_fds": True,
    }
    if os.name == "posix":
        kwargs["start_new_session"] = True
    else:  # pragma: no cover - Windows
        kwargs["creationflags"] = subprocess.DETACHED_PROCESS | subprocess.CREATE_NEW_PROCESS_GROUP  # type: ignore[attr-defined]
    proc = subprocess.Popen([sys.executable, "-m", "subconscious", "worker", "--session", session_id], **kwargs)
    return proc.pid
