"""What every ``see`` function reads: this machine's runtime, the shared home (read only, through the
Store API), the sessions' merged states, the keys this machine holds, and a Letta client. Each is read
once, when first asked for."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping


@dataclass
class SeeHome:
    env: Mapping[str, str] = field(default_factory=lambda: os.environ)
    cwd: str | None = None
    client: Any = None  # a LettaClient; made from the settings when None

    @cached_property
    def rt(self):
        from ..local.runtime import runtime

        return runtime(self.env, self.cwd)

    @cached_property
    def store(self):
        return self.rt.store(read_only=True)

    @cached_property
    def snapshot(self):
        return self.store.read()

    @cached_property
    def session_states(self) -> dict:
        """session id → its merged SessionState (None when no version of it could be read)."""
        return {sid: state for sid, state, _ in self.store.sessions()}

    @cached_property
    def keyring(self):
        from ..privacy.keys import KeyRing

        try:
            return KeyRing.load(self.rt.local.keys)
        except Exception:  # noqa: BLE001 - no readable keys: sealed values stay unread
            return None

    @property
    def local_root(self) -> Path:
        return self.rt.local.root

    @property
    def host_id(self) -> str:
        return self.rt.host.id

    def host_names(self) -> dict[str, str]:
        """host id → readable name, from the hosts' shards (this host's own name too)."""
        names = {h: info.name for h, info in self.snapshot.shards.items()}
        names[self.rt.host.id] = self.rt.host.name
        return names

    def letta(self):
        if self.client is None:
            from ..letta.client import LettaClient

            s = self.rt.settings
            self.client = LettaClient(s.base_url, s.api_key)
        return self.client

    def agent_id(self) -> str | None:
        """The agent every machine feeds: LETTA_AGENT_ID, else the one pinned in the shared home, else the
        agent of the newest session."""
        if self.rt.settings.agent_id:
            return self.rt.settings.agent_id
        pinned = self.snapshot.settings.get("agentId")
        if pinned is not None and isinstance(pinned.value, str):
            return pinned.value
        live = sorted(self.snapshot.live.values(), key=lambda c: c.stamp, reverse=True)
        return next((c.agent_id for c in live if c.agent_id), None)

    def writable_store(self):
        return self.rt.store()

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
