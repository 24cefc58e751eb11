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
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path

from . import localsession
from .delivery_plan import DEFAULT_CONTEXT_WINDOW, update_limit
from .runtime import Runtime
from .state.locks import LockTimeout, host_lock

log = logging.getLogger("subconscious")
MAX_ROUNDS = 50
CONFLICT_RETRIES = 3
BACKOFF_FIRST, BACKOFF_MAX = 15.0, 1800.0  # seconds before the retry of a failed delivery (doubling)
_MARK = re.compile(r'<session_id>(?P<sid>[^<]*)</session_id>\n<(?:lines|retry(?: delivery="(?P<rkey>\w+)")?) '
                   r'first="(?P<first>\d+)" last="(?P<last>\d+)"(?: delivery="(?P<key>\w+)")?/>')


@dataclass
class Delivery:
    session_id: str
    sent: int = 0  # updates delivered
    started: bool = False  # start message delivered
    error: str | None = None
    more: bool = False  # stopped after MAX_ROUNDS with lines left


class Pending(Exception):
    """Not deliverable now, nothing failed (the agent's run on it is still going): retried later."""


def backoff(failures: int) -> float:
    return min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** max(0, failures - 1))


# --------------------------------------------------------------------------- looking in the conversation


def _run_of(client):
    from .letta.errors import LettaHTTPError

    def run_of(run_id: str):
        try:
            return client.get_run(run_id)
        except LettaHTTPError as exc:  # a server without the runs API, or a run it forgot: no information
            if getattr(exc, "status", None) in (404, 405, 501):
                return None
            raise
    return run_of


def _judge(client, conv: str, matches, after: str | None) -> tuple[str, str]:
    from .letta.messages import delivery_outcome

    return delivery_outcome(client.iter_messages(conv, after=after), matches, _run_of(client))


def _key_matcher(key: str):
    needle = f'delivery="{key}"'
    return lambda text: needle in text


def _newest_id(client, conv: str) -> str | None:
    newest = client.list_messages(conv, limit=1)
    mid = newest[0].get("id") if newest else None
    return mid if isinstance(mid, str) else None


def _newest_mark(client, conv: str, session_id: str):
    """(first, last, key) of the newest update or re-delivery of this session in the conversation, read
    newest first and no further than that message (a long session's conversation holds thousands)."""
    from .letta.messages import content_text
    from .transcript import xml_escape

    sid = xml_escape(session_id)
    for m in client.iter_messages_newest_first(conv):
        if m.get("message_type") != "user_message":
            continue
        found = [g for g in _MARK.finditer(content_text(m.get("content"))) if g.group("sid") == sid]
        if found:
            g = found[-1]
            return int(g.group("first")), int(g.group("last")), g.group("key") or g.group("rkey")
    return None


# --------------------------------------------------------------------------- sending


def _send(client, conversation_id: str, text: str, rt: Runtime, cwd: str | None, summarised: bool = False):
    """Send one message and consume the agent's whole turn; raises unless the turn completed OK. A completed
    turn counts against today's budget (budget.py)."""
    from .budget import record
    from .letta.errors import LettaConflictError, LettaError

    for attempt in range(CONFLICT_RETRIES + 1):
        try:
            turn = _turn(client, conversation_id, text, rt, cwd)
            if not turn.ok:
                raise LettaError(f"the agent's turn ended with {turn.stop_reason!r}", "see the server's log")
            record(rt, rt.store(), len(text), summarised)
            return turn
        except LettaConflictError:  # another run on this conversation is still going: wait and retry
            if attempt == CONFLICT_RETRIES:
                raise
            time.sleep(2.0 * (attempt + 1))


def _turn(client, conversation_id: str, text: str, rt: Runtime, cwd: str | None):
    """The agent's whole turn, with the client-side tools of LETTA_SDK_TOOLS confined to ``cwd``, the project
    directory recorded at SessionStart (never Claude Code's directory at a later Stop) (tools/loop.py)."""
    from .tools.loop import run_turn

    return run_turn(client, conversation_id, text, mode=rt.settings.sdk_tools, cwd=cwd)


def _settle(client, conv: str, matches, after: str | None, reference: str, rt: Runtime, cwd: str | None) -> bool:
    """An earlier send whose outcome this worker does not know: True once a turn on it completed (now or
    before), False when the server never stored it (send it again). Raises Pending or LettaError."""
    from .letta.errors import LettaError
    from .tools.loop import resume_turn

    verdict, why = _judge(client, conv, matches, after)
    if verdict == "done":
        return True
    if verdict == "running":
        raise Pending(why)
    if verdict == "waiting":
        log.info("worker: %s; answering the waiting tool calls", why)
        turn = resume_turn(client, conv, mode=rt.settings.sdk_tools, cwd=cwd)
        if not turn.ok:
            raise LettaError(f"the resumed turn ended with {turn.stop_reason!r}", "see the server's log")
        return True
    if verdict == "failed":
        log.info("worker: stored but not processed (%s); re-delivered by reference", why)
        _send(client, conv, reference, rt, cwd)
        return True
    return False


def _reference(session_id: str, key: str, first: int, last: int, why: str = "") -> str:
    from .transcript import xml_escape

    return ("<claude_code_session_update_retry>\n<session_id>%s</session_id>\n"
            '<retry delivery="%s" first="%d" last="%d"/>\n'
            'Your turn on the <claude_code_session_update> above marked delivery="%s" (transcript lines %d-%d) '
            "stopped before it completed%s. Its text is not repeated here, so nothing in it reaches you twice: "
            "read it above and process it now, as its instructions say. Memory changes you already made from "
            "it stand; do not make them again.\n</claude_code_session_update_retry>"
            % (xml_escape(session_id), key, first, last, key, first, last, f" ({xml_escape(why)})" if why else ""))


def _start_key(text: str) -> str:
    return "start-" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


# --------------------------------------------------------------------------- the transcript and the cursor


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
