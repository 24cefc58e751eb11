"""The worker: delivers a session's start message and transcript updates to its Letta conversation.

What "delivered" means: the agent's turn on the message *completed* with an OK stop reason. Each update
carries an idempotency key (``<lines first="…" last="…" delivery="K"/>``: the session, its first and last
line and a digest of those lines). The cursor moves only once a turn on K completed; then:

- one worker per session at a time on this machine (a machine-local lock); a worker started while
  another delivers waits for it, then finds nothing or the newest lines;
- each round rebuilds the update from the transcript at the committed cursor, bounded by the agent's
  context window (``max_chars``), so ranges never overlap or leave gaps and a backlog drains in pieces;
- before a range that was sent once is sent again, the conversation is read from the message that was
  newest when it was sent (paged, however long the turns since) and the turn on K is judged
  (letta/messages.py ``delivery_outcome``): completed → the cursor moves on; still running → later;
  waiting for client-tool results → those are answered and the turn finished; stored but failed (an LLM
  error after the server took it) → a short message re-delivers it *by reference* (the agent already has
  its text in the conversation; it is not repeated); never stored → sent again;
- the cursor is anchored to line identity (the ``uuid`` of the line at the cursor); a transcript that was
  rewritten or shrank is detected and delivery goes on after the last line already delivered;
- a failure leaves a retry marker (localsession.mark_pending) with a backoff; the next hook of any session
  on this machine starts a worker for it (spawn.pickup), so nothing waits for another Stop;
- notices (notices.py: a subagent's transcript, a compaction, an answer the file lags on) ride in the update
  before their line; the attempt records which (``attempt_inserts``), and only a completed turn on it drops
  them, so each reaches the agent once.

Sending and settling a turn is in :mod:`.delivery_turns`, the transcript and the cursor in
:mod:`.delivery_cursor`; this module is the delivery loop (and re-exports the names it always had).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

from . import localsession
from .delivery_cursor import _advance, _delivered_uuids, _max_chars, _position, _read_lines, _uuids_path
from .delivery_turns import (
    _MARK,
    CONFLICT_RETRIES,
    Pending,
    _judge,
    _key_matcher,
    _newest_id,
    _newest_mark,
    _reference,
    _run_of,
    _send,
    _settle,
    _start_key,
    _turn,
)
from .runtime import Runtime
from .state.locks import LockTimeout, host_lock

log = logging.getLogger("subconscious")
MAX_ROUNDS = 50
BACKOFF_FIRST, BACKOFF_MAX = 15.0, 1800.0  # seconds before the retry of a failed delivery (doubling)


@dataclass
class Delivery:
    session_id: str
    sent: int = 0  # updates delivered
    started: bool = False  # start message delivered
    error: str | None = None
    more: bool = False  # stopped after MAX_ROUNDS with lines left


def backoff(failures: int) -> float:
    return min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** max(0, failures - 1))


# --------------------------------------------------------------------------- the worker


def deliver(rt: Runtime, session_id: str, *, lock_timeout: float = 300.0, client=None,
            max_chars: int | None = None) -> Delivery:
    """Deliver what is pending for ``session_id``. ``client``: a Letta client to use (tests); ``max_chars``:
    the update bound instead of the one from the agent's context window."""
    result = Delivery(session_id)
    sessions_dir = rt.local.root / "sessions"
    try:
        with host_lock(rt.local.locks, f"{rt.host.id}.deliver.{session_id}", timeout=lock_timeout):
            if client is not None:
                _deliver_locked(rt, session_id, sessions_dir, result, client, max_chars)
            else:
                from .letta.client import LettaClient

                s = rt.settings
                with LettaClient(s.base_url, s.api_key) as own:
                    _deliver_locked(rt, session_id, sessions_dir, result, own, max_chars)
    except LockTimeout as exc:
        result.error = str(exc)
        log.warning("worker %s: %s", session_id, exc)
        _mark(sessions_dir, session_id, time.time() + 60.0, f"waiting for another worker: {exc}")
        return result
    except Exception as exc:  # noqa: BLE001 - e.g. the shared home unwritable: kept, retried later
        result.error = f"{type(exc).__name__}: {exc}"
        log.warning("worker %s: delivery failed, kept and retried later: %s", session_id, result.error[:500])
    try:
        if result.error is not None:
            local = localsession.load(sessions_dir, session_id)
            _mark(sessions_dir, session_id, time.time() + backoff(max(1, local.failures)), result.error)
        elif result.more:
            _mark(sessions_dir, session_id, time.time(), "more lines to deliver")
        else:
            localsession.clear_pending(sessions_dir, session_id)
    except OSError as exc:
        log.warning("worker %s: could not record the retry (%s)", session_id, exc)
    return result


def _mark(sessions_dir: Path, session_id: str, due: float, reason: str) -> None:
    try:
        localsession.mark_pending(sessions_dir, session_id, due, reason)
    except OSError as exc:
        log.warning("worker %s: could not record the retry (%s)", session_id, exc)


def _project(rt: Runtime, local) -> dict[str, str]:
    """The session's project as every machine names it (git remote, branch, this machine): in each update."""
    from .project import identify

    try:
        return identify(local.project_root or local.cwd or ".", machine=rt.host.name).attrs()
    except (OSError, ValueError) as exc:  # never worth failing a delivery for
        log.debug("worker: no project identity (%s)", exc)
        return {}


def _notices(sessions_dir: Path, session_id: str, lines: list[str], local, limit: int, private_paths=()):
    """The session's notices as transcript inserts (notices.py); moot ones (a subagent that left no
    transcript, an answer the file has caught up with) are dropped."""
    from . import notices

    pending = notices.load_all(sessions_dir, session_id)
    if not pending:
        return (), None
    inserts, moot, skip = notices.inserts(pending, lines, local.offset, limit, private_paths)
    if moot:
        notices.remove(sessions_dir, session_id, moot)
    return inserts, skip


def _budget(rt: Runtime, store, caps):
    """Today's use against the caps (None without caps: nothing to read)."""
    from .budget import read_usage
    from .delivery_plan import Budget

    if caps is None or not caps.any:
        return None
    today = read_usage(store, rt.host.id, caps)
    return Budget(caps, today.mine, today.everyone)


def _deliver_locked(rt: Runtime, session_id: str, sessions_dir: Path, result: Delivery, client,
                    max_chars: int | None) -> None:
    from .budget import BudgetError, caps_from_env
    from .delivery_plan import plan_update
    from .letta.errors import LettaError
    from .private import private_globs

    store = rt.store()
    private = private_globs()
    try:
        caps = caps_from_env()
    except BudgetError as exc:
        log.warning("worker %s: %s; no daily budget applies", session_id, exc)
        caps = None
    localsession.sweep_local_temps(sessions_dir.parent)
    project = None
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
                local = localsession.load(sessions_dir, session_id)
            cursor = session.last_processed_index
            lines = _read_lines(local.transcript_path)
            if lines is None:
                return  # no transcript (yet, or any more): nothing to deliver
            pos = _position(lines, cursor, local, sessions_dir)
            if local.attempt and local.attempt[0] == cursor + 1 and local.attempt_key:
                # sent once, outcome unknown (or the turn failed): what does the conversation say?
                first, last, key = local.attempt[0], local.attempt[1], local.attempt_key
                reference = _reference(session_id, key, first, last, local.last_error or "")
                if _settle(client, conv, _key_matcher(key), local.attempt_after, reference, rt, local.project_root):
                    log.info("worker %s: lines %d-%d had arrived already (delivery %s); not sent again",
                             session_id, first, last, key)
                    _advance(store, sessions_dir, session_id, lines, pos, last - local.offset, last,
                             local.attempt_inserts, local.attempt_skipped)
                    result.sent += 1
                    continue
                local.attempt, local.attempt_key = None, None  # never stored: send the lines afresh
                local.attempt_inserts, local.attempt_skipped = None, None
                localsession.save(sessions_dir, local)
            elif cursor < 0 and not local.attempt:
                # nothing recorded (a new session, or its session file was rebuilt after damage): what the
                # conversation already holds of this session is not sent again
                mark = _newest_mark(client, conv, session_id)
                if mark is not None:
                    first, last, key = mark
                    if key is None:  # an update from before delivery keys: counted as delivered
                        _advance(store, sessions_dir, session_id, lines, pos, last - local.offset, last)
                    else:
                        if first - 1 > cursor:
                            store.update_session(session_id, lambda cur, c=first - 1: cur.evolve(
                                last_processed_index=max(cur.last_processed_index, c)))
                        local.attempt, local.attempt_key, local.attempt_after = [first, last], key, None
                        localsession.save(sessions_dir, local)
                    log.info("worker %s: the conversation already holds lines up to %d; not sent again", session_id, last)
                    continue
            limit = max_chars or _max_chars(client, session.agent_id, local, sessions_dir)
            if project is None:
                project = _project(rt, local)
            inserts, skip = _notices(sessions_dir, session_id, lines, local, limit, private)
            planned = plan_update(lines, pos, session_id, max_chars=limit, offset=local.offset, project=project,
                                  private_paths=private, budget=_budget(rt, store, caps),
                                  inserts=inserts, skip_answers=skip)
            update = planned.update
            last = update.cursor + local.offset
            if update.payload is None:
                if last > cursor or update.skipped:
                    _advance(store, sessions_dir, session_id, lines, pos, update.cursor, last, (), update.skipped)
                return
            local.attempt, local.attempt_key = [cursor + 1, last], update.key
            local.attempt_inserts, local.attempt_skipped = list(update.inserted), list(update.skipped)
            local.attempt_after = _newest_id(client, conv)
            localsession.save(sessions_dir, local)
            if planned.summarised:
                log.warning("worker %s: daily budget reached (%s): lines %d-%d summarised instead of sent "
                            "(%d chars held back)", session_id, planned.summarised, cursor + 1, last,
                            len(update.payload or ""))
            _send(client, conv, planned.payload, rt, local.project_root, summarised=planned.summarised is not None)
            _advance(store, sessions_dir, session_id, lines, pos, update.cursor, last, update.inserted, update.skipped)
            result.sent += 1
            log.info("worker %s: delivered lines %d-%d to %s (%d chars%s)", session_id, cursor + 1, last, conv,
                     len(planned.payload), ", a budget summary" if planned.summarised else "")
        except (LettaError, Pending) as exc:
            local = localsession.load(sessions_dir, session_id)
            if isinstance(exc, LettaError):
                local.failures += 1
            local.last_error = str(exc)[:300]
            localsession.save(sessions_dir, local)
            result.error = str(exc)
            log.warning("worker %s: delivery failed, kept and retried later: %s", session_id, exc)
            return
    result.more = True


def _deliver_start(client, conv: str, local: localsession.LocalSession, sessions_dir: Path, rt: Runtime) -> bool:
    """Send the session-start message once. A send whose outcome was never learnt is judged from the
    conversation first (the message carries its own timestamp, so its text is unique)."""
    text = local.pending_start or ""
    key = _start_key(text)
    matches = (lambda t: t == text or f'delivery="{key}"' in t)
    reference = ("<claude_code_session_start_retry>\n"
                 f'<retry delivery="{key}"/>\nYour turn on the <claude_code_session_start> message above stopped '
                 "before it completed. It is not repeated here: read it above and take it in now."
                 "\n</claude_code_session_start_retry>")
    if local.start_attempted and _settle(client, conv, matches, local.start_after, reference, rt, local.project_root):
        log.info("worker %s: the start message had arrived already; not sent again", local.session_id)
    else:
        local.start_attempted = True
        local.start_after = _newest_id(client, conv)
        localsession.save(sessions_dir, local)
        _send(client, conv, text, rt, local.project_root)
    local = localsession.load(sessions_dir, local.session_id)
    if local.pending_start == text:  # a newer SessionStart may have queued another meanwhile
        local.pending_start, local.start_attempted, local.start_after = None, False, None
        localsession.save(sessions_dir, local)
    return True
