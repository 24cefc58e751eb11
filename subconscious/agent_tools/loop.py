"""One agent turn with client-side tools: send, run the tools the agent asks for, send their results,
until the turn ends.

- The message goes out with the ``client_tools`` of the mode (none in ``off``). When the run stops with
  ``requires_approval``, each requested call is run locally (:func:`registry.execute`: the mode's policy,
  confinement, per-call timeout, redaction, size caps) and answered with ``status`` success or error; a
  tool the mode does not allow, or an unknown one, gets an error result and is never run.
- At most ``Limits.max_calls_per_turn`` calls are run per turn, and their results together stay under
  ``Limits.max_turn_result_chars`` (the agent's context window is small). Past either, calls are
  answered with an error and the tools are withdrawn (the next requests carry no ``client_tools``), so the agent has to
  end its turn.
- A conversation left waiting for approvals (a worker stopped between the agent's request and its
  answer) refuses new messages. :func:`run_turn` then answers the waiting calls under the current
  mode first, and sends the message again.
- Once the message was accepted, a failure is never a LettaConflictError, so the caller does not send
  the message a second time; the worker's cursor moves only after this function returned.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace

from ..letta.errors import LettaConflictError, LettaError, LettaProtocolError, LettaTimeoutError
from ..letta.messages import ToolCallRequest, ToolResult, TurnResult, tool_call_request
from ..privacy.redact import redact
from .limits import DEFAULT_LIMITS, Limits
from .registry import Outcome, ToolContext, client_tools, execute, refuse

__all__ = ["run_turn", "resume_turn", "requests_of", "pending_requests", "TurnStats"]

log = logging.getLogger("subconscious")
RESULT_RETRIES = 3
MIN_RESULT_BUDGET = 500  # below this many characters left for the turn's results, calls are refused


@dataclass
class TurnStats:
    calls: int = 0        # requests answered (run or refused) this turn
    ran: int = 0          # of which were run
    refused: int = 0      # answered with an error without running (policy, cap, bad arguments)
    rounds: int = 0       # tool-result round trips
    recovered: int = 0    # calls answered that an earlier run had left waiting
    result_chars: int = 0  # characters of tool results sent back


def requests_of(messages) -> list[ToolCallRequest]:
    """Every tool call asked for in approval_request messages (parallel calls included), in order."""
    out: list[ToolCallRequest] = []
    seen: set[str] = set()
    for m in messages:
        if not isinstance(m, dict) or m.get("message_type") != "approval_request_message":
            continue
        calls = m.get("tool_calls")
        if not isinstance(calls, list) or not calls:
            calls = [m.get("tool_call")]
        for tc in calls:
            if not isinstance(tc, dict):
                continue
            r = tool_call_request({"tool_call": tc, "id": m.get("id")})
            if r is not None and r.tool_call_id not in seen:
                seen.add(r.tool_call_id)
                out.append(r)
    return out


def pending_requests(client, conversation_id: str) -> list[ToolCallRequest]:
    """Calls the conversation is still waiting on: approval requests newer than any other message."""
    newest_first = client.list_messages(conversation_id, limit=10)
    waiting = []
    for m in newest_first:
        mt = m.get("message_type")
        if mt == "approval_request_message":
            waiting.append(m)
        elif mt in ("ping", "stop_reason", "usage_statistics"):
            continue
        else:
            break
    return requests_of(list(reversed(waiting)))


def _summary(req: ToolCallRequest) -> str:
    a = req.arguments or {}
    for key in ("file_path", "pattern", "command", "path"):
        if isinstance(a.get(key), str):
            v = redact(a[key])
            return v if len(v) <= 80 else v[:80] + "..."
    return ""


class _Turn:
    def __init__(self, client, conversation_id: str, ctx: ToolContext, limits: Limits, stats: TurnStats):
        self.client, self.conv, self.ctx, self.lim, self.stats = client, conversation_id, ctx, limits, stats
        self.offer = client_tools(ctx.mode) if ctx.root is not None else []
        self.deadline = time.monotonic() + limits.turn_timeout

    def _timeout(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 1.0:
            raise LettaTimeoutError(f"the agent's turn took longer than {self.lim.turn_timeout:g} s",
                                    "the run may continue on the server; the update stays queued")
        return min(self.lim.send_timeout, left)

    def send(self, text: str) -> TurnResult:
        return self.client.send_message_streaming(self.conv, text, client_tools=self.offer or None,
                                                  total_timeout=self._timeout())

    def _send_results(self, results: list[ToolResult]) -> TurnResult:
        for attempt in range(RESULT_RETRIES + 1):
            try:
                return self.client.send_tool_results(self.conv, results, client_tools=self.offer or None,
                                                     total_timeout=self._timeout())
            except LettaConflictError as e:
                if attempt == RESULT_RETRIES:  # not a conflict for the caller: the message itself was taken
                    raise LettaError("sending tool results: the conversation stayed busy", str(e)) from None
                time.sleep(1.0 * (attempt + 1))
        raise AssertionError("unreachable")

    def _answer(self, req: ToolCallRequest) -> Outcome:
        s, lim = self.stats, self.lim
        budget = lim.max_turn_result_chars - s.result_chars
        if s.calls >= lim.max_calls_per_turn:
            out = refuse(req, f"the limit of {lim.max_calls_per_turn} tool calls per turn is reached, so {req.name} "
                              "was not run and the tools are withdrawn for the rest of this turn; finish your turn "
                              "with what you have.", lim)
            self.offer = []
        elif budget < MIN_RESULT_BUDGET:
            out = refuse(req, f"the tool results of this turn have reached {lim.max_turn_result_chars:,} characters, so "
                              f"{req.name} was not run and the tools are withdrawn for the rest of this turn; finish "
                              "your turn with what you have.", lim)
            self.offer = []
        else:
            ctx = self.ctx
            if budget < lim.max_result_chars:
                ctx = replace(ctx, limits=replace(ctx.limits, max_result_chars=budget))
            out = execute(req, ctx)
        s.calls += 1
        s.result_chars += len(out.result.output)
        if out.ran:
            s.ran += 1
        else:
            s.refused += 1
        log.info("tools: %s %s -> %s in %d ms (%d chars)%s", req.name, _summary(req), out.result.status, out.ms,
                 len(out.result.output), "" if out.ran else " [not run]")
        return out

    def finish(self, turn: TurnResult) -> TurnResult:
        """Answer tool calls until the turn stops for another reason; the turns' messages, combined."""
        combined = TurnResult(list(turn.messages), turn.stop_reason, turn.usage)
        max_rounds = self.lim.max_calls_per_turn + 5
        while turn.requires_approval:
            reqs = requests_of(turn.messages)
            if not reqs:
                raise LettaProtocolError("the agent's run paused for a tool call but named none",
                                         "this is likely an incompatible server version")
            self.stats.rounds += 1
            if self.stats.rounds > max_rounds:
                raise LettaError(f"the agent kept asking for tools after {max_rounds} rounds",
                                 "its calls were answered with errors; the update stays queued")
            results = [self._answer(r).result for r in reqs]
            turn = self._send_results(results)
            combined.messages.extend(turn.messages)
            combined.stop_reason, combined.usage = turn.stop_reason, turn.usage or combined.usage
        return combined


def resume_turn(client, conversation_id: str, *, mode: str, cwd: str | None, limits: Limits = DEFAULT_LIMITS,
                ctx: ToolContext | None = None) -> TurnResult:
    """Finish a turn an earlier worker left waiting for client-tool results (it died between the agent's
    request and its answer): answer the waiting calls under the current mode and run the turn to its end.
    Raises LettaError when nothing is waiting or the turn could not be completed."""
    ctx = ctx if ctx is not None else ToolContext.for_session(mode, cwd, limits)
    waiting = pending_requests(client, conversation_id)
    if not waiting:
        raise LettaError(f"{conversation_id} has no tool call waiting to be answered", "the turn is checked again later")
    t = _Turn(client, conversation_id, ctx, limits, TurnStats())
    return t.finish(TurnResult(messages=[{"message_type": "approval_request_message", "tool_calls": [
        {"tool_call_id": r.tool_call_id, "name": r.name, "arguments": r.arguments_raw} for r in waiting]}],
        stop_reason="requires_approval"))


def run_turn(client, conversation_id: str, text: str, *, mode: str, cwd: str | None,
             limits: Limits = DEFAULT_LIMITS, ctx: ToolContext | None = None,
             stats: TurnStats | None = None) -> TurnResult:
    """Send ``text`` and run the whole turn, client-side tool calls included; the combined TurnResult.

    Raises LettaError when the turn could not be completed (the caller keeps its cursor).
    """
    ctx = ctx if ctx is not None else ToolContext.for_session(mode, cwd, limits)
    stats = stats if stats is not None else TurnStats()
    t = _Turn(client, conversation_id, ctx, limits, stats)
    try:
        first = t.send(text)
    except LettaError as e:
        if "approval" not in str(e).lower():
            raise
        waiting = pending_requests(client, conversation_id)
        if not waiting:
            raise
        log.info("tools: %s was waiting for %d tool call(s) from an earlier run; answering them first",
                 conversation_id, len(waiting))
        before = stats.calls
        earlier = _Turn(client, conversation_id, ctx, limits, TurnStats())
        earlier.finish(TurnResult(messages=[{"message_type": "approval_request_message", "tool_calls": [
            {"tool_call_id": r.tool_call_id, "name": r.name, "arguments": r.arguments_raw} for r in waiting]}],
            stop_reason="requires_approval"))
        stats.recovered += earlier.stats.calls
        stats.calls = before
        first = t.send(text)
    return t.finish(first)
