"""Sending a message to the agent as one whole turn, and settling a send whose outcome was never learnt.

A message is delivered when the agent's turn on it *completed* with an OK stop reason (:func:`_send`; a
conversation busy with another run is waited for). A send whose outcome is unknown is judged from the
conversation, read from the message that was newest when it was sent (:func:`_settle`: completed, still
running, waiting for client-tool results, stored but failed, never stored); a failed one is re-delivered by
reference (:func:`_reference`), not repeated. Used by the delivery loop in :mod:`.worker`.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time

from ..local.runtime import Runtime

log = logging.getLogger("subconscious")
CONFLICT_RETRIES = 3
RUN_AGE_LIMIT = 30 * 60  # seconds a run may stay 'running' before it is judged stuck
_MARK = re.compile(r'<session_id>(?P<sid>[^<]*)</session_id>\n<(?:lines|retry(?: delivery="(?P<rkey>\w+)")?) '
                   r'first="(?P<first>\d+)" last="(?P<last>\d+)"(?: delivery="(?P<key>\w+)")?/>')


class Pending(Exception):
    """Not deliverable now, nothing failed (the agent's run on it is still going): retried later."""


class GaveUp(Exception):
    """A run still stuck past the age limit after it was re-delivered once for being stuck: nothing more is
    waited for (its message is stored in the conversation; the agent never finished its turn on it)."""


# --------------------------------------------------------------------------- looking in the conversation


def _run_of(client):
    from ..letta.errors import LettaHTTPError

    def run_of(run_id: str):
        try:
            return client.get_run(run_id)
        except LettaHTTPError as exc:  # a server without the runs API, or a run it forgot: no information
            if getattr(exc, "status", None) in (404, 405, 501):
                return None
            raise
    return run_of


def _judge(client, conv: str, matches, after: str | None) -> tuple[str, str]:
    from ..letta.messages import delivery_outcome

    return delivery_outcome(client.iter_messages(conv, after=after), matches, _run_of(client))


def _key_matcher(key: str):
    needle = f'delivery="{key}"'
    return lambda text: needle in text


def _newest_id(client, conv: str) -> str | None:
    """The id of the conversation's newest message. Read by rows (letta/paging.py): the newest row may convert
    into no message, so ``limit=1`` can answer nothing while the conversation is long."""
    for m in client.iter_messages_newest_first(conv, page=20):
        mid = m.get("id")
        if isinstance(mid, str) and mid:
            return mid
    return None


def _newest_mark(client, conv: str, session_id: str):
    """(first, last, key, before) of the newest update or re-delivery of this session in the conversation,
    read newest first and no further than the message before it (a long session's conversation holds
    thousands); ``before``: the id of that older message (None when it is the first): where a judge of its
    outcome reads from (never the conversation's start: past 5,000 messages that listing is refused)."""
    from ..letta.messages import content_text
    from .transcript import xml_escape

    sid = xml_escape(session_id)
    found = None
    for m in client.iter_messages_newest_first(conv):
        if found is not None:
            mid = m.get("id")
            if isinstance(mid, str) and mid and mid != found[4]:
                return found[:3] + (mid,)
            continue
        if m.get("message_type") != "user_message":
            continue
        marks = [g for g in _MARK.finditer(content_text(m.get("content"))) if g.group("sid") == sid]
        if marks:
            g = marks[-1]
            found = (int(g.group("first")), int(g.group("last")), g.group("key") or g.group("rkey"), None, m.get("id"))
    return found[:3] + (None,) if found is not None else None


# --------------------------------------------------------------------------- sending


def _send(client, conversation_id: str, text: str, rt: Runtime, cwd: str | None, summarised: bool = False,
          reservation=None, session_id: str | None = None, lines: tuple[int, int] | None = None):
    """Send one message and consume the agent's whole turn; raises unless the turn completed OK. A completed
    turn counts against today's budget (budget.py): its ``reservation`` is settled, a failed send releases
    it; a message without one is counted after the turn."""
    from .budget import record, release, settle
    from ..letta.errors import LettaConflictError, LettaError

    try:
        for attempt in range(CONFLICT_RETRIES + 1):
            try:
                turn = _turn(client, conversation_id, text, rt, cwd)
                if not turn.ok:
                    raise LettaError(f"the agent's turn ended with {turn.stop_reason!r}", "see the server's log")
                break
            except LettaConflictError:  # another run on this conversation is still going: wait and retry
                if attempt == CONFLICT_RETRIES:
                    raise
                time.sleep(2.0 * (attempt + 1))
    except BaseException as exc:
        if reservation is not None:
            if _never_stored(exc):
                release(rt, rt.store().home, reservation)
            else:  # it may have arrived (a lost reply, a broken stream, a failed run): counted, to be safe
                settle(rt, rt.store().home, reservation, session_id=session_id,
                       summarised=lines if summarised else None)
        raise
    if reservation is not None:
        settle(rt, rt.store().home, reservation, session_id=session_id, summarised=lines if summarised else None)
    else:
        record(rt, rt.store(), len(text), summarised)
    return turn


def _never_stored(exc: BaseException) -> bool:
    """The send failed before the server could have stored the message (refused, or another run busy): its
    budget reservation goes back. Anything else (a lost reply, a broken stream, a failed run) may have
    arrived: the reservation is counted (the budget errs towards sending less, never more)."""
    from ..letta.errors import LettaConflictError, LettaConnectionError, LettaHTTPError, LettaTimeoutError

    if isinstance(exc, LettaConflictError):
        return True
    if isinstance(exc, LettaConnectionError) and not isinstance(exc, LettaTimeoutError):
        return "cannot connect" in str(exc)
    return isinstance(exc, LettaHTTPError) and exc.status is not None and 400 <= exc.status < 500


def _turn(client, conversation_id: str, text: str, rt: Runtime, cwd: str | None):
    """The agent's whole turn, with the client-side tools of LETTA_SDK_TOOLS confined to ``cwd``, the project
    directory recorded at SessionStart (never Claude Code's directory at a later Stop) (agent_tools/loop.py)."""
    from ..agent_tools.loop import run_turn

    return run_turn(client, conversation_id, text, mode=rt.settings.sdk_tools, cwd=cwd)


def _settle(client, conv: str, matches, after: str | None, reference: str, rt: Runtime, cwd: str | None,
            running_for: float | None = None, redelivered: bool = False, on_stuck=None) -> bool:
    """An earlier send whose outcome this worker does not know: True once a turn on it completed (now or
    before), False when the server never stored it (send it again). Raises Pending, GaveUp or LettaError.
    ``running_for``: seconds since its run was first found running; past ``RUN_AGE_LIMIT`` the run is judged
    stuck (the server restarted under it: such a run never ends) and the update re-delivered by reference,
    once: ``on_stuck()`` records that before the re-delivery is sent; with ``redelivered`` (it was) a run
    still stuck past the limit is given up (GaveUp)."""
    from ..letta.errors import LettaError
    from ..agent_tools.loop import resume_turn

    verdict, why = _judge(client, conv, matches, after)
    if verdict == "done":
        return True
    if verdict == "running" and running_for is not None and running_for > RUN_AGE_LIMIT:
        if redelivered:
            raise GaveUp(f"{why} for {int(running_for // 60)} min after it was re-delivered once for a stuck run")
        log.warning("worker: %s for %d min, past the limit of %d min: judged stuck, re-delivered by reference",
                    why, running_for // 60, RUN_AGE_LIMIT // 60)
        verdict, why = "failed", f"{why} for {int(running_for // 60)} min (judged stuck)"
        if on_stuck is not None:
            on_stuck()
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
