"""Starting the detached worker: a new session (process group) of its own, no inherited stdio, so the
hook returns at once and Claude Code never waits for delivery. :func:`pickup`: the retries that do not wait
for a Stop (a delivery that failed, a turn the user interrupted)."""

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


CLAIM_SECONDS = 120.0  # a retry started by one hook is not started again by the next for this long
MAX_PICKUPS = 3  # workers one hook starts at most
SAFETY_NET_SECONDS = 600.0  # a prompt's lines are delivered this long after it even if no Stop comes


def pickup(sessions_dir, *, now: float | None = None, arm: str | None = None) -> list[str]:
    """Start a worker for every session whose retry marker is due (one listdir of a small directory, no
    parsing: cheap on the hook's path). ``arm``: this session's prompt began a turn; if no Stop delivers it
    (the user interrupts, the session ends), a worker is started ``SAFETY_NET_SECONDS`` later."""
    import time

    from ..local import sessions as localsession

    now = time.time() if now is None else now
    started: list[str] = []
    for sid, due in localsession.pending_marks(sessions_dir):
        if due > now or len(started) >= MAX_PICKUPS:
            continue
        try:
            os.utime(sessions_dir / localsession.PENDING / sid, (now + CLAIM_SECONDS, now + CLAIM_SECONDS))
            spawn_worker(sid)
        except (OSError, ValueError):
            continue
        started.append(sid)
    if arm is not None:
        try:
            localsession.mark_pending(sessions_dir, arm, now + SAFETY_NET_SECONDS, "a turn without a Stop yet",
                                      keep_earlier=True)
        except (OSError, ValueError):
            pass
    return started
