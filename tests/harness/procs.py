"""Process helpers shared by the harnesses (they only ever signal PIDs they recorded)."""

from __future__ import annotations

import os
from pathlib import Path


def pid_alive(pid: int) -> bool:
    """Is ``pid`` running? A zombie (exited, not yet reaped) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:  # it exited between the two looks
        return False
    except OSError:  # no /proc here: kill(0) said it exists
        return True
    try:
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except IndexError:
        return True
