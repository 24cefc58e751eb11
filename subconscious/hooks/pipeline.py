"""What every hook needs before it can act: validated input, settings, the store, a Letta client.

Imports are local to each function so that a hook pays only for what it touches.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from ..local import sessions as localsession
from .event import HookEvent
from ..local.runtime import Runtime
from ..state.ids import check_session_id
from ..state.store.core import Store


class Skip(Exception):
    """Nothing to do for this hook (mode off, no session yet, …); the reason is logged at debug level."""

    quiet = True


@dataclass
class SessionContext:
    event: HookEvent
    rt: Runtime
    store: Store
    session_id: str
    local: localsession.LocalSession | None = None  # the machine-local session file, as loaded at the start

    def __post_init__(self):
        if self.local is None:
            self.local = localsession.load(self.sessions_dir, self.session_id)

    @property
    def settings(self):
        return self.rt.settings

    @property
    def sessions_dir(self) -> Path:
        return self.rt.local.root / "sessions"

    def require_key(self) -> None:
        from ..letta.config import is_cloud, normalize_base_url

        if not self.settings.api_key and is_cloud(normalize_base_url(self.settings.base_url)):
            raise Skip("LETTA_API_KEY is not set (needed for Letta Cloud)")

    def client(self, timeout: float | None = None):
        from ..letta.client import LettaClient

        self.require_key()
        kw = {}
        if timeout is not None:
            import httpx

            kw["timeout"] = httpx.Timeout(timeout, connect=min(3.0, timeout))
        return LettaClient(self.settings.base_url, self.settings.api_key, **kw)

    def remaining(self, budget: float) -> float:
        """Seconds left of ``budget`` since the hook started (for request timeouts)."""
        return max(0.5, budget - (time.monotonic() - self.event.started))


def session_runtime(session_id: str, env=os.environ, cwd: str | None = None
                    ) -> tuple[Runtime, localsession.LocalSession]:
    """The runtime of one session, with its home as recorded in the machine-local session file (field
    ``home``, set once by SessionStart): hooks and the worker use the same home whatever the cwd does (a
    ``cd``, a worktree). Before anything is recorded, the home comes from ``env``/``cwd`` as usual."""
    from ..config import load_settings
    from ..local.identity import host_identity, local_dirs

    dirs = local_dirs(env)
    local = localsession.load(dirs.root / "sessions", check_session_id(session_id))
    settings = load_settings(env, cwd, home=local.home)
    return Runtime(settings, dirs, host_identity(dirs, env)), local


def open_session(event: HookEvent) -> SessionContext:
    sid = check_session_id(event.session_id)
    rt, local = session_runtime(sid, event.env, cwd=event.cwd)  # served mode: Claude Code's env, per request
    if rt.settings.mode == "off":
        raise Skip("LETTA_MODE=off")
    store = rt.store()
    store.lease_wait_s = lease_budget(event.name)
    return SessionContext(event, rt, store, sid, local)


def lease_budget(event_name: str) -> float:
    """How long one write of this hook waits for a view lease another holder keeps: an eighth of the hook's
    deadline, at most :data:`~.state.viewlock.LEASE_WAIT_S` (SessionEnd's 1.2 s left its end record no time:
    1 s of waiting, then the deadline). A write that does not get it is in this host's files all the same."""
    from .event import DEADLINES
    from ..state.viewlock import LEASE_WAIT_S

    deadline = DEADLINES.get(event_name)
    return LEASE_WAIT_S if deadline is None else min(LEASE_WAIT_S, deadline / 8)


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1000) % 1000:03d}Z"
