"""Letta connection settings from the environment (pure; no I/O, no httpx)."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Mapping
from urllib.parse import urlsplit, urlunsplit

from .errors import LettaConfigError, display_url  # (display_url is the errors' own: they show URLs)

DEFAULT_BASE_URL = "https://api.letta.com"
CLOUD_HOSTS = frozenset({"api.letta.com"})
AGENT_ID_RE = re.compile(r"^agent-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")


def normalize_base_url(raw: str | None) -> str:
    """The API root, always ending in ``/v1`` and without a trailing slash.

    ``None``/blank → Letta Cloud. ``http://host:8283``, ``http://host:8283/``, ``http://host:8283/v1/`` all give
    ``http://host:8283/v1``; a path prefix (a reverse proxy) is kept: ``https://h/letta`` → ``https://h/letta/v1``.
    Query strings and fragments are dropped.
    """
    value = (raw or "").strip()
    if not value:
        value = DEFAULT_BASE_URL
    parts = urlsplit(value)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise LettaConfigError(f"LETTA_BASE_URL {display_url(value)!r} is not an http(s) URL",
                               "set it like http://localhost:8283 or https://api.letta.com (scheme included)")
    if not parts.hostname:
        raise LettaConfigError(f"LETTA_BASE_URL {display_url(value)!r} has no host name",
                               "set it like http://localhost:8283")
    path = re.sub(r"/+", "/", parts.path).rstrip("/")
    if not path.endswith("/v1"):
        path += "/v1"
    return urlunsplit((parts.scheme.lower(), parts.netloc, path, "", ""))


def is_cloud(base_url: str) -> bool:
    return (urlsplit(base_url).hostname or "").lower() in CLOUD_HOSTS


def check_id(value: str, kind: str) -> str:
    """An id that is safe to put in a URL path (agent-…, conv-…, message-…)."""
    if not isinstance(value, str) or not _ID_RE.match(value):
        raise LettaConfigError(f"{kind} {str(value)[:80]!r} is not a valid Letta id",
                               "ids look like agent-<uuid> or conv-<uuid>")
    return value


def validate_agent_id(value: str, source: str = "LETTA_AGENT_ID") -> str:
    """``agent-<uuid>`` or a LettaConfigError that explains what an agent id looks like."""
    v = (value or "").strip()
    if AGENT_ID_RE.match(v):
        return v
    if AGENT_ID_RE.match(v.lower()):
        return v.lower()
    if v and not v.startswith("agent-"):
        hint = (f"it looks like an agent name; {source} needs the id (agent-<uuid>), shown in the Letta ADE "
                "or by GET /v1/agents/?name=<name>. Unset it to let subconscious import its own agent")
    else:
        hint = f"{source} must look like agent-123e4567-e89b-42d3-a456-426614174000"
    raise LettaConfigError(f"{source} {v[:80]!r} is not a Letta agent id", hint)


@dataclass(frozen=True)
class LettaSettings:
    base_url: str
    api_key: str | None = field(repr=False)
    agent_id: str | None = None
    model: str | None = None
    context_window: int | None = None

    def __repr__(self) -> str:
        return (f"LettaSettings(base_url={display_url(self.base_url)!r}, api_key={'<set>' if self.api_key else None}, "
                f"agent_id={self.agent_id!r}, model={self.model!r}, context_window={self.context_window!r})")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "LettaSettings":
        """Read LETTA_BASE_URL, LETTA_API_KEY, LETTA_AGENT_ID, LETTA_MODEL, LETTA_CONTEXT_WINDOW."""
        env = os.environ if env is None else env
        base = normalize_base_url(env.get("LETTA_BASE_URL"))
        key = (env.get("LETTA_API_KEY") or "").strip() or None
        if key is None and is_cloud(base):
            raise LettaConfigError("LETTA_API_KEY is not set",
                                   "create a key at https://app.letta.com (API keys) and export LETTA_API_KEY, "
                                   "or point LETTA_BASE_URL at your own Letta server")
        agent = (env.get("LETTA_AGENT_ID") or "").strip()
        model = (env.get("LETTA_MODEL") or "").strip() or None
        cw_raw = (env.get("LETTA_CONTEXT_WINDOW") or "").strip()
        cw = None
        if cw_raw:
            try:
                cw = int(cw_raw)
            except ValueError:
                cw = -1
            if cw < 1000:
                raise LettaConfigError(f"LETTA_CONTEXT_WINDOW {cw_raw[:20]!r} is not a token count",
                                       "use a whole number of tokens such as 32000, or unset it")
        return cls(base_url=base, api_key=key, agent_id=validate_agent_id(agent) if agent else None,
                   model=model, context_window=cw)
