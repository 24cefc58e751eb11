"""Wiring for commands: environment → settings, this host, machine-local dirs and the store."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

from ..config import Settings, load_settings
from .identity import Host, LocalDirs, host_identity, local_dirs
from ..state.store.core import Store


@dataclass(frozen=True)
class Runtime:
    settings: Settings
    local: LocalDirs
    host: Host

    def store(self, *, read_only: bool = False) -> Store:
        return Store(
            self.settings.state_home,
            self.host.id,
            self.local.locks,
            self.local.clocks,
            host_name=self.host.name,
            read_only=read_only,
        )


def runtime(env: Mapping[str, str] = os.environ, cwd: str | None = None) -> Runtime:
    settings = load_settings(env, cwd)
    local = local_dirs(env)
    return Runtime(settings, local, host_identity(local, env))
