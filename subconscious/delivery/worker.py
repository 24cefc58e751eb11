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

Sending and settling a turn is in :mod:`.turns`, the transcript and the cursor in
:mod:`.cursor`; this module is the delivery loop (and re-exports the names it always had).
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..local import sessions as localsession
from .cursor import _advance, _delivered_uuids, _max_chars, _position, _read_lines, _uuids_path
from .turns import (
    _MARK,
    CONFLICT_RETRIES,
    GaveUp,
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
from ..local.runtime import Runtime
from ..state.locks import LockTimeout, host_lock

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
    deferred_until: float | None = None  # over the daily budget (defer): tried again then (epoch s)
    gone: str | None = None  # why there is nothing this session could ever deliver (its marker is dropped)


def backoff(failures: int) -> float:
    return min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** max(0, failures - 1))


# --------------------------------------------------------------------------- the worker


def deliver(rt: Runtime, session_id: str, *, lock_timeout: float = 300.0, client=None,
            max_chars: int | None = None) -> Delivery:
    """Deliver what is pending for ``session_id``. ``client``: a Letta client to use (tests); ``max_chars``:
    the update bound instead of the one from the agent's context window."""
    result = Delivery(session_id)
    sessions_dir = rt.local.root / "sessions"
    began = time.time()  # a retry marker armed after this is a turn this worker may not have read
    try:
        with host_lock(rt.local.locks, f"{rt.host.id}.deliver.{session_id}", timeout=lock_timeout):
            if client is not None:
                _deliver_locked(rt, session_id, sessions_dir, result, client, max_chars)
            else:
                from ..letta.client import LettaClient

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
        if result.gone is not None:
            log.warning("worker %s: nothing to deliver, ever: %s; its retry marker is dropped", session_id,
                        result.gone)
            localsession.clear_pending(sessions_dir, session_id, armed_before=began)
        elif result.deferred_until is not None:
            _mark(sessions_dir, session_id, result.deferred_until, "daily budget reached: deferred to the next UTC day")
        elif result.error is not None:
            local = localsession.load(sessions_dir, session_id)
            _mark(sessions_dir, session_id, time.time() + backoff(max(1, local.failures)), result.error)
        elif result.more:
            _mark(sessions_dir, session_id, time.time(), "more lines to deliver")
        elif not localsession.clear_pending(sessions_dir, session_id, armed_before=began):
            log.info("worker %s: a newer turn armed its retry marker meanwhile: kept", session_id)
    except OSError as exc:
        log.warning("worker %s: could not record the retry (%s)", session_id, exc)
    return result


# the listing cache a hook's read goes through (state/sessions/listcache.py), refreshed once a run's writes are done
REFRESH_FROM = 1_000  # names: a directory this large costs a hook's read a listing worth waiting out RACY_NS for
LISTING_PATIENCE_S = 10.0  # what a worker waits at most for the home to be quiet that long


def settle_listings(store, *, patience: float = LISTING_PATIENCE_S, large: int = REFRESH_FROM,
                    sleep: Callable[[float], None] = time.sleep) -> bool:
    """After a worker's last write (every Stop publishes into the home): refresh this machine's listing
    cache of the home (:meth:`~.state.store.Store.refresh_listings`), waiting until the racy window has
    passed for its large directories (at most ``patience`` s), so that the next hook's read normally finds
    the cache fresh instead of listing 100,000 names on Claude Code's clock. Only off the hook path; a
    directory that keeps changing is left to the hook, which lists it. True: nothing is left stale that is
    worth waiting for."""
    deadline = time.monotonic() + patience
    while True:
        due = store.refresh_listings(large)
        if due is None:
            return True
        wait = max(0.0, (due - time.time_ns()) / 1e9) + 0.05
        if time.monotonic() + wait > deadline:
            log.info("listing cache of %s: the home kept changing; the next hook lists it", store.home)
            return False
        sleep(wait)


MIN_SIZE_CAP = 2_000  # an update refused for its size is cut by half each time, down to this
# a daily character cap bounds one update, never below this: a smaller update cannot hold its envelope and
# text (transcript.BoundTooSmall); over a cap that small the backlog goes as the budget's summary instead
BUDGET_BOUND_FLOOR = 2_000
SIZE_CAP_TTL = 24 * 3600  # seconds a cap set by a refusal holds; then the full bound is tried again (once a day)
_SIZE_WORDS = re.compile(r"too (?:long|large|big)|size|length|context|exceed|limit", re.I)


def size_refusal(exc: Exception, sent: int) -> int | None:
    """The shorter bound to plan with when the server refused a message of ``sent`` characters for its size
    (HTTP 413, or a 400/422 whose text says so); None for any other failure, or when it is short already."""
    status = getattr(exc, "status", None)
    if status != 413 and not (status in (400, 422) and _SIZE_WORDS.search(str(exc))):
        return None
    if sent <= MIN_SIZE_CAP:
        return None
    return max(MIN_SIZE_CAP, sent // 2)


def _give_up(sessions_dir: Path, session_id: str, first: int, last: int, key: str, why: str) -> None:
    """Lines whose run is still stuck after their re-delivery: said in the log and in ``status``; delivery
    goes on after them (their message is stored in the conversation, the agent never finished its turn)."""
    log.warning("worker %s: gave up on lines %d-%d (delivery %s): %s; they stay in the conversation as "
                "stored, and delivery goes on after them", session_id, first, last, key, why)
    try:
        localsession.record_gave_up(sessions_dir, session_id, [first, last], key, why)
    except OSError as exc:
        log.warning("worker %s: could not record the give-up (%s)", session_id, exc)


def _mark(sessions_dir: Path, session_id: str, due: float, reason: str) -> None:
    try:
        localsession.mark_pending(sessions_dir, session_id, due, reason)
    except OSError as exc:
        log.warning("worker %s: could not record the retry (%s)", session_id, exc)


def _project(rt: Runtime, local) -> dict[str, str]:
    """The session's project as every machine names it (git remote, branch, this machine): in each update."""
    from ..local.project import identify

    try:
        return identify(local.project_root or local.cwd or ".", machine=rt.host.name).attrs()
    except (OSError, ValueError) as exc:  # never worth failing a delivery for
        log.debug("worker: no project identity (%s)", exc)
        return {}


def _files(local, private_lines=None) -> dict:
    """How the update checks Claude Code's Read and Grep results against their files for private blocks: a
    reader of the session's project directory (privacy/results.py) and the directory Claude Code ran in; and
    ``private_lines``, the project's private text (projectindex.py), when it was read."""
    from ..privacy.results import project_reader

    root = local.project_root or local.cwd
    out = {"files": project_reader(root), "cwd": local.cwd or root}
    if private_lines is not None:
        out["private_lines"] = private_lines
    return out


def private_lines(rt: Runtime, local, globs, *, write: bool = True):
    """The private text of the session's project (projectindex.py; cached under the machine-local state dir,
    the cache left as it is unless ``write``). A partial index is logged."""
    from ..privacy.projectindex import project_index

    root = local.project_root or local.cwd
    index = project_index(root, globs, rt.local.root / "private-index", write=write)
    if index.partial and write:  # (preview writes no log line either)
        log.warning("worker: the private-text index of %s is partial (%s): private lines past that are found by "
                    "their tags and paths only", root, index.partial)
    return index


def _notices(sessions_dir: Path, session_id: str, lines: list[str], local, limit: int, private_paths=(),
             index=None):
    """The session's notices as transcript inserts (notices.py); moot ones (a subagent that left no
    transcript, an answer the file has caught up with) are dropped."""
    from . import notices

    pending = notices.load_all(sessions_dir, session_id)
    if not pending:
        return (), None
    inserts, moot, skip = notices.inserts(pending, lines, local.offset, limit, private_paths, **_files(local, index))
    if moot:
        notices.remove(sessions_dir, session_id, moot)
    return inserts, skip


def _budget(rt: Runtime, store, caps):
    """Today's use against the caps (None without caps: nothing to read)."""
    from .budget import read_usage
    from .plan import Budget

    if caps is None or not caps.any:
        return None
    today = read_usage(store, rt.host.id, caps)
    return Budget(caps, today.mine, today.everyone)


def _deliver_locked(rt: Runtime, session_id: str, sessions_dir: Path, result: Delivery, client,
                    max_chars: int | None) -> None:
    from .budget import BudgetError, caps_from_env, overflow_from_env
    from .plan import plan_update
    from ..letta.errors import LettaError
    from ..privacy.private import private_globs

    store = rt.store()
    private = private_globs()
    try:
        caps = caps_from_env()
    except BudgetError as exc:
        log.warning("worker %s: %s; no daily budget applies", session_id, exc)
        caps = None
    overflow = overflow_from_env()
    localsession.sweep_local_temps(sessions_dir.parent)
    project = index = None
    for _ in range(MAX_ROUNDS):
        local = localsession.load(sessions_dir, session_id)
        session = store.session(session_id)
        if session is None:
            session = _revive(store, session_id, local)
        if session is None:  # no record in the shared home, none retired to revive: no retry can help
            result.gone = "its session record is gone from the shared home (ended and collected, or removed)"
            return
        if not session.conversation_id:
            result.error = "no conversation recorded for this session"
            return
        conv = session.conversation_id
        try:
            if local.pending_start:
                if index is None:  # the session begins: its project's private text is read now (projectindex
                    index = private_lines(rt, local, private)  # then keeps what a file held before it changed)
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
                since = local.running_since
                running_for = time.time() - since if type(since) in (int, float) and since > 0 else None

                def stuck(local=local, key=key):  # saved before the re-delivery goes: a second time gives up
                    local.stuck_key, local.running_since = key, None
                    localsession.save(sessions_dir, local)

                try:
                    settled = _settle(client, conv, _key_matcher(key), local.attempt_after, reference, rt,
                                      local.project_root, running_for, redelivered=local.stuck_key == key,
                                      on_stuck=stuck)
                except GaveUp as exc:
                    _give_up(sessions_dir, session_id, first, last, key, str(exc))
                    settled = True
                if settled:
                    log.info("worker %s: lines %d-%d had arrived already (delivery %s); not sent again",
                             session_id, first, last, key)
                    _advance(store, sessions_dir, session_id, lines, pos, last - local.offset, last,
                             local.attempt_inserts, local.attempt_skipped)
                    result.sent += 1
                    continue
                local.attempt, local.attempt_key = None, None  # never stored: send the lines afresh
                local.attempt_inserts, local.attempt_skipped, local.running_since = None, None, None
                localsession.save(sessions_dir, local)
            elif cursor < 0 and not local.attempt:
                # nothing recorded (a new session, or its session file was rebuilt after damage): what the
                # conversation already holds of this session is not sent again
                mark = _newest_mark(client, conv, session_id)
                if mark is not None:
                    first, last, key, before = mark
                    if key is None:  # an update from before delivery keys: counted as delivered
                        _advance(store, sessions_dir, session_id, lines, pos, last - local.offset, last)
                    else:
                        if first - 1 > cursor:
                            store.update_session(session_id, lambda cur, c=first - 1: cur.evolve(
                                last_processed_index=max(cur.last_processed_index, c)))
                        local.attempt, local.attempt_key, local.attempt_after = [first, last], key, before
                        localsession.save(sessions_dir, local)
                    log.info("worker %s: the conversation already holds lines up to %d; not sent again", session_id, last)
                    continue
            limit = max_chars or _max_chars(client, session.agent_id, local, sessions_dir)
            if local.size_cap:  # the server refused a longer one for its size: shorter, for a while
                at = local.size_cap_at
                if type(at) in (int, float) and 0 <= time.time() - at < SIZE_CAP_TTL:
                    limit = min(limit, local.size_cap)
                else:  # lapsed (the proxy's limit may have gone): the full bound again; a refusal halves it anew
                    log.info("worker %s: the size cap of %s chars set after a refusal lapsed; updates may be %d "
                             "chars again", session_id, local.size_cap, limit)
                    local.size_cap, local.size_cap_at = None, None
                    localsession.save(sessions_dir, local)
            if caps is not None:  # one update always fits in a day's budget (else deferred lines wait for ever)
                limit = min([limit] + [max(c, BUDGET_BOUND_FLOOR) for c in (caps.chars, caps.total_chars) if c])
            if project is None:
                project = _project(rt, local)
            if index is None:
                index = private_lines(rt, local, private)
            inserts, skip = _notices(sessions_dir, session_id, lines, local, limit, private, index)
            planned = plan_update(lines, pos, session_id, max_chars=limit, offset=local.offset, project=project,
                                  private_paths=private, budget=_budget(rt, store, caps),
                                  inserts=inserts, skip_answers=skip, **_files(local, index))
            reservation = None
            if caps is not None and caps.any and planned.payload is not None:
                planned, reservation = _reserve(rt, store, caps, planned, lambda why: plan_update(
                    lines, pos, session_id, max_chars=limit, offset=local.offset, project=project,
                    private_paths=private, over_budget=why, inserts=inserts, skip_answers=skip,
                    **_files(local, index)))
                if planned.summarised is not None and overflow == "defer":
                    from .budget import next_day_s, note_deferred

                    note_deferred(rt, store.home, session_id, (cursor + 1, planned.last), planned.summarised)
                    result.deferred_until = next_day_s()
                    log.warning("worker %s: daily budget reached (%s): lines %d-%d wait for the next UTC day "
                                "(SUBCONSCIOUS_BUDGET_OVERFLOW=defer); the cursor stays", session_id,
                                planned.summarised, cursor + 1, planned.last)
                    return
                if reservation is None:  # a summary: counted, never refused
                    from .budget import reserve

                    reservation = reserve(rt, store.home, caps, len(planned.payload), force=True)
            update = planned.update
            last = update.cursor + local.offset
            if update.payload is None:
                if last > cursor or update.skipped:
                    _advance(store, sessions_dir, session_id, lines, pos, update.cursor, last, (), update.skipped)
                return
            try:
                local.attempt, local.attempt_key = [cursor + 1, last], update.key
                local.attempt_inserts, local.attempt_skipped = list(update.inserted), list(update.skipped)
                local.attempt_after = _newest_id(client, conv)
                localsession.save(sessions_dir, local)
            except BaseException:
                if reservation is not None:  # nothing was sent: the reservation goes back at once
                    from .budget import release

                    release(rt, store.home, reservation)
                raise
            if planned.summarised:
                log.warning("worker %s: daily budget reached (%s): lines %d-%d summarised instead of sent "
                            "(%d chars held back)", session_id, planned.summarised, cursor + 1, last,
                            len(update.payload or ""))
            try:
                _send(client, conv, planned.payload, rt, local.project_root, summarised=planned.summarised is not None,
                      reservation=reservation, session_id=session_id, lines=(cursor + 1, last))
            except LettaError as exc:
                cap = size_refusal(exc, len(planned.payload))
                if cap is None:
                    raise
                local = localsession.load(sessions_dir, session_id)
                local.size_cap, local.size_cap_at, local.last_error = cap, time.time(), str(exc)[:300]
                localsession.save(sessions_dir, local)
                log.warning("worker %s: the server refused lines %d-%d for their size (%d chars: %s); "
                            "updates are cut to %d chars for the next %d h", session_id, cursor + 1, last,
                            len(planned.payload), str(exc)[:200], cap, SIZE_CAP_TTL // 3600)
                continue  # judged (never stored) and planned again, shorter
            _advance(store, sessions_dir, session_id, lines, pos, update.cursor, last, update.inserted, update.skipped)
            result.sent += 1
            log.info("worker %s: delivered lines %d-%d to %s (%d chars%s)", session_id, cursor + 1, last, conv,
                     len(planned.payload), ", a budget summary" if planned.summarised else "")
        except (LettaError, Pending) as exc:
            local = localsession.load(sessions_dir, session_id)
            if isinstance(exc, LettaError):
                local.failures += 1
            elif local.running_since is None:  # the age of a run still going is counted from here
                local.running_since = time.time()
            local.last_error = str(exc)[:300]
            localsession.save(sessions_dir, local)
            result.error = str(exc)
            log.warning("worker %s: delivery failed, kept and retried later: %s", session_id, exc)
            return
    result.more = True


def _revive(store, session_id: str, local):
    """A session gc retired (on any machine) while this one still had lines to deliver: when the retirement
    record names the conversation this machine started it in (``start_for``), it is recorded again with its
    cursor and delivery goes on there — not left waiting for a hook that may never come."""
    from ..state.records import SessionState

    look = getattr(store, "retired_conversation", None)  # (a store of tests may not keep records)
    retired = look(session_id) if look is not None else None
    conv = retired.get("conversationId") if retired else None
    if not conv or conv != local.start_for or not retired.get("agentId"):
        return None
    cursor = retired.get("cursor", -1)
    store.put_conversation(session_id, conv, retired["agentId"])
    log.info("worker %s: retired by gc, still delivering here: back in conversation %s from cursor %d",
             session_id, conv, cursor)
    return store.update_session(session_id, lambda cur: cur or SessionState(
        session_id, conversation_id=conv, agent_id=retired["agentId"], last_processed_index=cursor))


def _reserve(rt: Runtime, store, caps, planned, summary):
    """Reserve the update's size in today's budget before it is sent (budget.reserve). Refused (another
    machine's reservation came first): the plan becomes the summary ``summary(why)`` makes. Returns the
    plan and its reservation (None for a summary: the caller counts it)."""
    from .budget import legacy_usage, reserve, today

    if planned.summarised is not None:
        return planned, None
    legacy = legacy_usage(store.read().settings, today())
    got = reserve(rt, store.home, caps, len(planned.payload), legacy=legacy)
    if got.ok:
        return planned, got
    log.info("worker: the budget reservation was refused (%s)", got.why)
    return summary(got.why), None


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
