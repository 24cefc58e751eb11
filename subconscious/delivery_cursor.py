"""The transcript and the cursor, for the delivery loop in :mod:`.worker`: reading the complete lines of a
transcript, finding the line at the cursor (a transcript rewritten under it is detected), moving the cursor
once lines reached the agent (with the identity of the lines delivered), and how long one update may be.
"""

from __future__ import annotations

import logging
from pathlib import Path

from . import localsession
from .delivery_plan import DEFAULT_CONTEXT_WINDOW, update_limit

log = logging.getLogger("subconscious")


def _read_lines(path: str | None) -> list[str] | None:
    from .transcript import complete_lines

    if not path:
        return None
    try:
        return complete_lines(Path(path).read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None


def _uuids_path(sessions_dir: Path, session_id: str) -> Path:
    return sessions_dir / f"{session_id}.uuids"


def _delivered_uuids(sessions_dir: Path, session_id: str) -> set[str]:
    try:
        return set(_uuids_path(sessions_dir, session_id).read_text().split())
    except OSError:
        return set()


def _position(lines: list[str], cursor: int, local: localsession.LocalSession, sessions_dir: Path) -> int:
    """The index in ``lines`` of the line at the cursor (delivery_plan.locate); a transcript rewritten under
    the cursor is logged and its new offset saved."""
    from .delivery_plan import locate

    where = locate(lines, cursor, local.offset, local.anchor, lambda: _delivered_uuids(sessions_dir, local.session_id))
    if where.rewritten:
        log.warning("worker %s: the transcript changed under the cursor (line %d of %d lines is not the line "
                    "delivered last); going on after line %d of the file", local.session_id, cursor - local.offset,
                    len(lines), where.position)
        local.offset = where.offset
        localsession.save(sessions_dir, local)
    return where.position


def _advance(store, sessions_dir: Path, session_id: str, lines: list[str], frm: int, to: int, last: int,
             inserted=(), skipped=()) -> None:
    """The lines ``frm+1..to`` of the file (``..last`` in cursor terms) reached the agent, with the notices
    ``inserted`` and without the answers ``skipped``: move the cursor, remember their identity, drop those
    notices, forget the attempt."""
    from . import notices
    from .transcript import line_uuid

    store.update_session(session_id, lambda cur, last=last: cur.evolve(
        last_processed_index=max(cur.last_processed_index, last)))
    ids = [u for u in (line_uuid(l) for l in lines[max(frm + 1, 0):to + 1]) if u]
    if ids:
        with open(_uuids_path(sessions_dir, session_id), "a", encoding="utf-8") as f:
            f.write("\n".join(ids) + "\n")
    local = localsession.load(sessions_dir, session_id)
    at = lines[to] if 0 <= to < len(lines) else ""
    u = line_uuid(at)
    local.anchor = [last, u] if u else None
    notices.delivered(sessions_dir, session_id, list(inserted or ()), list(skipped or ()))
    local.attempt, local.attempt_key, local.attempt_after = None, None, None
    local.attempt_inserts, local.attempt_skipped = None, None
    local.failures, local.last_error = 0, None
    local.pending_update, local.pending_cursor = None, None
    localsession.save(sessions_dir, local)


def _max_chars(client, agent_id: str | None, local: localsession.LocalSession, sessions_dir: Path) -> int:
    """How long one update may be: a share of the agent's context window (read once per session)."""
    from .letta.errors import LettaError

    if local.context_window is None and agent_id:
        try:
            agent = client.get_agent(agent_id, include_blocks=False)
            cfg = agent.get("llm_config") if isinstance(agent.get("llm_config"), dict) else {}
            window = cfg.get("context_window") or agent.get("context_window_limit")
            if isinstance(window, int) and window > 0:
                local.context_window = window
                localsession.save(sessions_dir, local)
        except LettaError as exc:
            log.info("worker %s: could not read the agent's context window (%s); assuming %d tokens",
                     local.session_id, exc, DEFAULT_CONTEXT_WINDOW)
    return update_limit(local.context_window)
