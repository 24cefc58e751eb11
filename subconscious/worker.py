"""The worker: delivers a session's start message and transcript updates to its Letta conversation.

- one worker per session at a time on this machine (a machine-local lock); a worker started while
  another delivers waits for it, then finds nothing or the newest lines;
- each round rebuilds the update from the transcript at the committed cursor (the Stop hook's payload
  is the fallback when the transcript file is gone), so ranges never overlap or leave gaps;
- the cursor advances only after the agent's turn completed; on failure everything stays for the next
  Stop, and a range whose outcome is unknown (the stream broke after the server took it) is looked up
  in the conversation before it is sent again: delivered exactly once.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path

from . import localsession
from .runtime import Runtime
from .state.locks import LockTimeout, host_lock

log = logging.getLogger("subconscious")
MAX_ROUNDS = 20
CONFLICT_RETRIES = 3
_LINES = re.compile(r'<lines first="(\d+)" last="(\d+)"/>')


@dataclass
class Delivery:
    session_id: str
    sent: int = 0  # updates delivered
    started: bool = False  # start message delivered
    error: str | None = None


def _already_delivered(client, conversation_id: str, session_id: str, first: int) -> int | None:
    """The last line of the newest delivered update of this session that covers line ``first`` or later,
    if the conversation has one (updates go out in order: every line up to it has arrived)."""
    from .letta.messages import content_text
    from .transcript import lines_marker

    head = lines_marker(session_id, first).rsplit("<lines", 1)[0]  # this session's update, any range
    marker = re.compile(re.escape(head) + _LINES.pattern)
    done = None
    for message in client.list_messages(conversation_id, limit=50):
        if message.get("message_type") != "user_message":
            continue
        for found in marker.finditer(content_text(message.get("content"))):
            if int(found.group(2)) >= first:
                done = max(done or 0, int(found.group(2)))
    return done


def _send(client, conversation_id: str, text: str, rt: Runtime, cwd: str | None) -> None:
    """Send one message and consume the agent's whole turn; raises on any failure."""
    from .letta.errors import LettaConflictError, LettaError

    for attempt in range(CONFLICT_RETRIES + 1):
        try:
            turn = _turn(client, conversation_id, text, rt, cwd)
            if not turn.ok:
                raise LettaError(f"the agent's turn ended with {turn.stop_reason!r}", "see the server's log")
            return
        except LettaConflictError:  # another run on this conversation is still going: wait and retry
            if attempt == CONFLICT_RETRIES:
                raise
            time.sleep(2.0 * (attempt + 1))


def _turn(client, conversation_id: str, text: str, rt: Runtime, cwd: str | None):
    """The agent's whole turn, with the client-side tools of LETTA_SDK_TOOLS confined to ``cwd``, the project
    directory recorded at SessionStart (never Claude Code's directory at a later Stop) (tools/loop.py)."""
    from .tools.loop import run_turn

    return run_turn(client, conversation_id, text, mode=rt.settings.sdk_tools, cwd=cwd)


def deliver(rt: Runtime, session_id: str, *, lock_timeout: float = 300.0) -> Delivery:
    result = Delivery(session_id)
    sessions_dir = rt.local.root / "sessions"
    try:
        with host_lock(rt.local.locks, f"{rt.host.id}.deliver.{session_id}", timeout=lock_timeout):
            _deliver_locked(rt, session_id, sessions_dir, result)
    except LockTimeout as exc:
        result.error = str(exc)
        log.warning("worker %s: %s", session_id, exc)
    return result


def _deliver_locked(rt: Runtime, session_id: str, sessions_dir: Path, result: Delivery) -> None:
    from .letta.client import LettaClient
    from .letta.errors import LettaError
    from .transcript import build_update, complete_lines

    store = rt.store()
    s = rt.settings
    with LettaClient(s.base_url, s.api_key) as client:
        for _ in range(MAX_ROUNDS):
            local = localsession.load(sessions_dir, session_id)
            session = store.session(session_id)
            if session is None or not session.conversation_id:
                result.error = "no conversation recorded for this session"
                return
            conv = session.conversation_id
            try:
                if local.pending_start:
                    result.started = _deliver_start(client, conv, local, sessions_dir, rt)
                cursor = session.last_processed_index
                payload, last = None, cursor
                if local.transcript_path and Path(local.transcript_path).is_file():
                    text = Path(local.transcript_path).read_text(encoding="utf-8", errors="replace")
                    update = build_update(complete_lines(text), cursor, session_id)
                    payload, last = update.payload, update.cursor
                elif local.pending_update and local.pending_cursor and local.pending_cursor[0] == cursor:
                    payload, last = local.pending_update, local.pending_cursor[1]
                if payload is None:
                    if last > cursor:
                        store.update_session(session_id, lambda cur, last=last: cur.evolve(last_processed_index=last))
                    _clear_pending(sessions_dir, session_id, last)
                    return
                # an outcome never learnt, or a cursor at the start (new, or its session file was rebuilt
                # after damage): what the conversation already holds is not sent again
                if (local.attempt and local.attempt[0] == cursor + 1) or cursor < 0:
                    done = _already_delivered(client, conv, session_id, cursor + 1)
                    if done is not None:
                        log.info("worker %s: lines %d-%d had arrived already; not sent again", session_id, cursor + 1, done)
                        store.update_session(session_id, lambda cur, d=done: cur.evolve(last_processed_index=d))
                        local.attempt = None
                        localsession.save(sessions_dir, local)
                        continue
                local.attempt = [cursor + 1, last]
                localsession.save(sessions_dir, local)
                _send(client, conv, payload, rt, local.project_root)
                store.update_session(session_id, lambda cur, last=last: cur.evolve(last_processed_index=last))
                local = localsession.load(sessions_dir, session_id)
                local.attempt, local.failures = None, 0
                localsession.save(sessions_dir, local)
                _clear_pending(sessions_dir, session_id, last)
                result.sent += 1
                log.info("worker %s: delivered lines %d-%d to %s", session_id, cursor + 1, last, conv)
            except LettaError as exc:
                local = localsession.load(sessions_dir, session_id)
                local.failures += 1
                localsession.save(sessions_dir, local)
                result.error = str(exc)
                log.warning("worker %s: delivery failed, kept for the next Stop: %s", session_id, exc)
                return


def _deliver_start(client, conv: str, local: localsession.LocalSession, sessions_dir: Path, rt: Runtime) -> bool:
    """Send the session-start message once. A send whose outcome was never learnt is looked for in the
    conversation first (the message carries its own timestamp, so its text is unique)."""
    text = local.pending_start or ""
    if local.start_attempted and _conversation_has(client, conv, text):
        log.info("worker %s: the start message had arrived already; not sent again", local.session_id)
    else:
        local.start_attempted = True
        localsession.save(sessions_dir, local)
        _send(client, conv, text, rt, local.project_root)
    local.pending_start, local.start_attempted = None, False
    localsession.save(sessions_dir, local)
    return True


def _conversation_has(client, conversation_id: str, text: str) -> bool:
    from .letta.messages import content_text

    return any(m.get("message_type") == "user_message" and content_text(m.get("content")) == text
               for m in client.list_messages(conversation_id, limit=50))


def _clear_pending(sessions_dir: Path, session_id: str, delivered_to: int) -> None:
    local = localsession.load(sessions_dir, session_id)
    if local.pending_cursor and local.pending_cursor[1] <= delivered_to:
        local.pending_update, local.pending_cursor = None, None
        localsession.save(sessions_dir, local)
