"""Pure helpers over Letta messages (plain dicts, tolerant of unknown types and extra fields).

Payload builders for the conversation ``messages`` endpoint, client-side tools and approvals, and
``TurnResult``: what one agent turn produced, folded from a stream or a non-streaming response.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from . import shapes
from .errors import LettaProtocolError

# stop reasons after which the turn is over without a problem (requires_approval: the caller must answer)
OK_STOP_REASONS = frozenset({"end_turn", "requires_approval", "max_steps", "no_tool_call", "tool_rule"})
# a turn that stopped with one of these is complete: the agent processed its message
COMPLETE_STOP_REASONS = OK_STOP_REASONS - {"requires_approval"}


@dataclass(frozen=True)
class ClientTool:
    """A tool the *caller* executes (e.g. Read/Grep/Glob); Letta pauses the run to ask for its result."""

    name: str
    description: str
    parameters: Mapping  # JSON schema of the arguments

    def to_json(self) -> dict:
        return {"name": self.name, "description": self.description, "parameters": dict(self.parameters)}


@dataclass(frozen=True)
class ToolCallRequest:
    """An ``approval_request_message``: the agent wants a client tool run."""

    tool_call_id: str
    name: str
    arguments: dict | None  # None when the arguments are not a JSON object
    arguments_raw: str
    message_id: str | None = None


@dataclass(frozen=True)
class ToolResult:
    """The caller's answer to one ToolCallRequest. status "error" reports a refused or failed tool."""

    tool_call_id: str
    output: str
    status: str = "success"

    def to_json(self) -> dict:
        if self.status not in ("success", "error"):
            raise ValueError(f"status must be 'success' or 'error', not {self.status!r}")
        return {"type": "tool", "tool_call_id": self.tool_call_id, "tool_return": self.output,
                "status": self.status}


def user_message(text: str) -> dict:
    return {"role": "user", "content": text}


def approval_message(results: Iterable[ToolResult]) -> dict:
    """The message that answers pending approval requests with client-side tool results."""
    approvals = [r.to_json() for r in results]
    if not approvals:
        raise ValueError("approval_message needs at least one ToolResult")
    return {"type": "approval", "approvals": approvals}


def content_text(content) -> str:
    """Text of a Letta message ``content`` (a string or a list of {type: text, text} parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for p in content:
            if isinstance(p, dict) and isinstance(p.get("text"), str):
                parts.append(p["text"])
            elif isinstance(p, str):
                parts.append(p)
        return "".join(parts)
    return str(content)


def tool_call_request(msg: Mapping) -> ToolCallRequest | None:
    """The ToolCallRequest of an approval_request_message (None if it has no usable tool call)."""
    tc = msg.get("tool_call")
    if not isinstance(tc, dict):
        calls = msg.get("tool_calls")
        tc = calls[0] if isinstance(calls, list) and calls and isinstance(calls[0], dict) else None
    if not tc or not tc.get("tool_call_id") or not tc.get("name"):
        return None
    raw = tc.get("arguments")
    if isinstance(raw, dict):
        args, raw_s = raw, json.dumps(raw)
    else:
        raw_s = raw if isinstance(raw, str) else ""
        try:
            parsed = json.loads(raw_s) if raw_s else {}
        except ValueError:
            parsed = None
        args = parsed if isinstance(parsed, dict) else None
    return ToolCallRequest(tool_call_id=str(tc["tool_call_id"]), name=str(tc["name"]), arguments=args,
                           arguments_raw=raw_s, message_id=msg.get("id"))


def merge_chunks(items: Iterable[dict]) -> list[dict]:
    """Join token-streamed pieces (same id and type in a row) of assistant/reasoning messages."""
    out: list[dict] = []
    for it in items:
        prev = out[-1] if out else None
        mt = it.get("message_type")
        if (prev is not None and mt in ("assistant_message", "reasoning_message") and it.get("id")
                and prev.get("id") == it.get("id") and prev.get("message_type") == mt):
            key = "content" if mt == "assistant_message" else "reasoning"
            merged = dict(prev)
            merged[key] = content_text(prev.get(key)) + content_text(it.get(key))
            out[-1] = merged
        else:
            out.append(it)
    return out


@dataclass
class TurnResult:
    """Everything one send produced: messages in order, the stop reason and usage statistics."""

    messages: list[dict] = field(default_factory=list)
    stop_reason: str | None = None
    usage: dict | None = None

    @property
    def assistant_texts(self) -> list[str]:
        return [content_text(m.get("content")) for m in self.messages if m.get("message_type") == "assistant_message"]

    @property
    def text(self) -> str:
        return "\n".join(t for t in self.assistant_texts if t)

    @property
    def approval_requests(self) -> list[ToolCallRequest]:
        reqs = (tool_call_request(m) for m in self.messages if m.get("message_type") == "approval_request_message")
        return [r for r in reqs if r is not None]

    @property
    def requires_approval(self) -> bool:
        return self.stop_reason == "requires_approval"

    @property
    def ok(self) -> bool:
        return self.stop_reason in OK_STOP_REASONS

    def of_type(self, message_type: str) -> list[dict]:
        return [m for m in self.messages if m.get("message_type") == message_type]


def fold_items(items: Iterable[dict], result: TurnResult | None = None) -> TurnResult:
    """Fold stream items into a TurnResult (pings dropped, stop_reason/usage lifted out)."""
    res = result if result is not None else TurnResult()
    raw = []
    for it in items:
        mt = it.get("message_type")
        if mt == "ping":
            continue
        if mt == "stop_reason":
            res.stop_reason = it.get("stop_reason")
        elif mt == "usage_statistics":
            res.usage = it
        else:
            raw.append(it)
    res.messages.extend(raw)
    res.messages[:] = merge_chunks(res.messages)
    return res


def turn_from_response(body) -> TurnResult:
    """TurnResult of a non-streaming ``LettaResponse`` ({messages, stop_reason, usage})."""
    hint = "is LETTA_BASE_URL pointing at a Letta server?"
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        raise LettaProtocolError("Letta's reply to a message has no 'messages' list", hint,
                                 detail=f"messages is {shapes.kind(body.get('messages'))}" if isinstance(body, dict)
                                 else f"the answer is {shapes.kind(body)}")
    sr = body.get("stop_reason")
    stop = sr.get("stop_reason") if isinstance(sr, dict) else sr
    msgs = shapes.messages(body["messages"], "reading Letta's reply to a message", hint)
    return TurnResult(messages=merge_chunks(msgs), stop_reason=stop if isinstance(stop, str) else None,
                      usage=body.get("usage") if isinstance(body.get("usage"), dict) else None)


def assistant_messages_newest_first(messages: Iterable[Mapping], after_id: str | None = None) -> list[Mapping]:
    """From a newest-first listing: assistant messages newer than ``after_id`` (all if None or not found)."""
    out = []
    for m in messages:
        if after_id is not None and m.get("id") == after_id:
            break
        if m.get("message_type") == "assistant_message":
            out.append(m)
    return out


def delivery_outcome(messages_oldest_first: Iterable[Mapping], matches, run_of) -> tuple[str, str]:
    """What became of a message we sent, read from the conversation: ``(verdict, why)``.

    ``matches(text)`` says whether a user message is ours (the original or a re-delivery by reference);
    ``run_of(run_id)`` returns the run ({status, stop_reason}) or None when the server cannot say. A turn is
    the user message and everything after it up to the next user message; the run of its last message
    (each answer to a client-tool call is a run of its own) says how the turn ended. Verdicts:

    - ``done``: some turn on it completed with an OK stop reason (the agent processed it);
    - ``running``: the newest such turn's run is still going;
    - ``waiting``: the newest stopped for client-tool calls nobody answered (a worker died mid-turn);
    - ``failed``: it is in the conversation, but no turn on it completed (an LLM error after the server stored it);
    - ``absent``: the server never stored it.
    Without run information a turn counts as done when it holds an assistant message.
    """
    msgs = [m for m in messages_oldest_first if isinstance(m, Mapping)]
    verdict, why = "absent", "not in the conversation"
    for i, m in enumerate(msgs):
        if m.get("message_type") != "user_message" or not matches(content_text(m.get("content"))):
            continue
        span = []
        for n in msgs[i + 1:]:
            if n.get("message_type") == "user_message":
                break
            span.append(n)
        last = span[-1] if span else m
        if last.get("message_type") == "approval_request_message":
            verdict, why = "waiting", "the turn waits for client-tool results"
            continue
        run_id = last.get("run_id") or m.get("run_id")
        run = run_of(run_id) if isinstance(run_id, str) and run_id else None
        if run is None:
            if any(n.get("message_type") == "assistant_message" for n in span):
                return "done", "the turn has an answer (no run information)"
            verdict, why = "failed", "the turn has no answer (no run information)"
            continue
        status, stop = run.get("status"), run.get("stop_reason")
        stop = stop.get("stop_reason") if isinstance(stop, Mapping) else stop
        if status in ("created", "running"):
            verdict, why = "running", f"run {run_id} is {status}"
        elif status == "completed" and (stop is None or stop in COMPLETE_STOP_REASONS):
            return "done", f"run {run_id} completed ({stop or 'no stop reason'})"
        elif stop == "requires_approval":
            verdict, why = "waiting", f"run {run_id} waits for client-tool results"
        else:
            verdict, why = "failed", f"run {run_id} ended {status} ({stop})"
    return verdict, why
