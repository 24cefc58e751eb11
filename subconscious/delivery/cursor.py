"""The transcript and the cursor, for the delivery loop in :mod:`.worker`: reading the complete lines of a
transcript, finding the line at the cursor (a transcript rewritten under it is detected), moving the cursor
once lines reached the agent (with the identity of the lines delivered), and how long one update may be.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ..local import sessions as localsession
from .plan import DEFAULT_CONTEXT_WINDOW, update_limit

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
    from .plan import locate

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

    # the notices first: a worker killed after this and before the cursor moved finds the attempt still
    # recorded, judges it done and comes back here (nothing is sent again); the other order sent a notice
    # a second time (the cursor had moved on, the notice was still queued for the next update)
    notices.delivered(sessions_dir, session_id, list(inserted or ()), list(skipped or ()))
    store.update_session(session_id, lambda cur, last=last: cur.evolve(
        last_processed_index=max(cur.last_processed_index, last)))
    ids = [u for u in (line_uuid(l) for l in lines[max(frm + 1, 0):to + 1]) if u]
    if ids:
        with open(_uuids_path(sessions_dir, session_id), "a", encoding="utf-8") as f:
            f.write("\n".join(ids) + "\n")
    local = localsession.load(sessions_dir, session_id)
    local.anchor = anchor_at(lines, to, last)
    local.stuck_key = None
    local.attempt, local.attempt_key, local.attempt_after = None, None, None
    local.attempt_inserts, local.attempt_skipped, local.running_since = None, None, None
    local.failures, local.last_error = 0, None
    local.pending_update, local.pending_cursor = None, None
    localsession.save(sessions_dir, local)


ANCHOR_LOOKBACK = 10_000  # lines: a cursor this far past any line with a uuid is trusted by its index


def anchor_at(lines: list[str], to: int, cursor: int) -> list | None:
    """The cursor's identity once the line at index ``to`` was delivered: ``[cursor, uuid, back]``, the
    last delivered line that has a uuid, ``back`` lines before ``to`` (Claude Code's last line is often a
    bookkeeping line without one); None when no delivered line has one."""
    from .transcript import line_uuid

    for i in range(min(to, len(lines) - 1), max(-1, to - ANCHOR_LOOKBACK), -1):
        u = line_uuid(lines[i])
        if u:
            return [cursor, u, to - i]
    return None


def _max_chars(client, agent_id: str | None, local: localsession.LocalSession, sessions_dir: Path) -> int:
    """How long one update may be: a share of the agent's context window (read once per session)."""
    from ..letta.errors import LettaError

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
