"""One hook's input as the handlers see it (:class:`HookEvent`) and each event's deadline: a leaf of the hooks
package that the dispatcher (run.py), the pipeline and every handler (events/) import, so that none of them
imports the dispatcher."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["HookEvent", "DEADLINES"]

# event name on the command line → deadline in seconds (hooks.json timeouts are 15/10/5/120; the rest of the
# lifecycle 5, except SessionEnd: Claude Code gives all its hooks 1.5 s)
DEADLINES: dict[str, float] = {
    "session-start": 12.0, "user-prompt-submit": 8.0, "pre-tool-use": 4.0, "stop": 10.0,
    "pre-compact": 4.0, "post-compact": 4.0, "subagent-start": 4.0, "subagent-stop": 4.0, "stop-failure": 4.0,
    "session-end": 1.2,
}


@dataclass
class HookEvent:
    name: str
    data: dict[str, Any]
    env: Any = field(default_factory=lambda: os.environ)
    started: float = field(default_factory=time.monotonic)

    @property
    def session_id(self) -> Any:
        return self.data.get("session_id")

    @property
    def cwd(self) -> str | None:
        cwd = self.data.get("cwd")
        return cwd if isinstance(cwd, str) and cwd else None
