"""Machine-local facts about one session (never synced): the agent's name, when messages were last
fetched (the PreToolUse TTL), and the worker's job — the transcript path, a start message to send,
the range of the last delivery attempt. Kept in ``<state dir>/sessions/<id>.json``."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .state.files import atomic_write
from .state.ids import check_session_id


@dataclass
class LocalSession:
    session_id: str
    agent_name: str = "Subconscious"
    last_fetch_ms: int = 0
    transcript_path: str | None = None
    cwd: str | None = None
    pending_start: str | None = None  # the session-start message, until delivered
    pending_update: str | None = None  # the last payload the Stop hook built (fallback if the transcript goes)
    pending_cursor: list[int] | None = None  # [cursor before, cursor after] of pending_update
    attempt: list[int] | None = None  # [first line, last line] of a delivery whose outcome is unknown
    failures: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def path_for(sessions_dir: Path, session_id: str) -> Path:
    return sessions_dir / f"{check_session_id(session_id)}.json"


def load(sessions_dir: Path, session_id: str) -> LocalSession:
    try:
        data = json.loads(path_for(sessions_dir, session_id).read_text())
        known = {k: v for k, v in data.items() if k in LocalSession.__dataclass_fields__}
        return LocalSession(**{**known, "session_id": session_id})
    except (OSError, ValueError, TypeError):
        return LocalSession(session_id)


def save(sessions_dir: Path, state: LocalSession) -> None:
    atomic_write(path_for(sessions_dir, state.session_id), json.dumps(asdict(state)) + "\n", durable=False)


def pending(sessions_dir: Path) -> list[str]:
    """Sessions with something for the worker to deliver."""
    out = []
    try:
        names = sorted(p.stem for p in sessions_dir.glob("*.json"))
    except OSError:
        return out
    for sid in names:
        s = load(sessions_dir, sid)
        if s.pending_start or s.transcript_path or s.pending_update:
            out.append(sid)
    return out
