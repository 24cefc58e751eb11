"""What subconscious reads in Letta's answers, checked where the answers arrive (stdlib only: the hooks'
:mod:`.lite` uses it too).

Each check returns the value it was given when it has the shape the Letta API promises for the fields we
read, and raises :class:`~.errors.LettaProtocolError` otherwise — ``<what>: the server's answer was not
understood: blocks[2].value is an object, expected text or null. <hint>`` — so a server (or a proxy in
between) answering with a list where an object belongs, a number for a message's text, null for an agent
or JSON nested too deep to read ends every verb in the LettaError its caller already reports in one line,
not in an AttributeError or TypeError deep in whoever reads the field.

Only what subconscious reads is checked: fields it does not use, and unknown message types, pass untouched
(the API adds fields and types between versions). The errors describe the answer by its shape alone (never
its content: a hostile server may echo the API key, and its text has no bound).
"""

from __future__ import annotations

from typing import Any

from .errors import LettaProtocolError

NOT_UNDERSTOOD = "the server's answer was not understood"
# message types whose ``content`` is read as text (letta.messages.content_text)
_CONTENT_TYPES = frozenset({"assistant_message", "user_message", "system_message"})


def kind(value: Any) -> str:
    """What a decoded JSON value is, in words: null, true/false, a number, text, a list, an object."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def not_understood(what: str, at: str, value: Any, expected: str, hint: str = "") -> LettaProtocolError:
    """The error for ``value`` (found at ``at`` in the answer: "" for the whole answer) not being ``expected``."""
    return LettaProtocolError(f"{what}: {NOT_UNDERSTOOD}", hint,
                              detail=f"{at or 'the answer'} is {kind(value)}, expected {expected}")


def too_deep(what: str, hint: str = "") -> LettaProtocolError:
    """JSON nested deeper than Python's reader goes (json.loads raised RecursionError)."""
    return LettaProtocolError(f"{what}: {NOT_UNDERSTOOD}", hint,
                              detail="the answer is JSON nested too deeply to read")


class _Wrong(Exception):
    def __init__(self, at: str, value: Any, expected: str):
        super().__init__(at)
        self.at, self.value, self.expected = at, value, expected


def _field(obj: dict, key: str, at: str, types: tuple, expected: str, required: bool = False) -> None:
    if key not in obj:
        if required:
            raise _Wrong(f"{at}{key}", None, expected)
        return
    value = obj[key]
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):  # True is an int
        raise _Wrong(f"{at}{key}", value, expected)


_STR_OR_NULL = (str, type(None))


def _stop(obj: dict, at: str) -> None:
    """``stop_reason``: text or null, or an object holding it (``{"stop_reason": "end_turn"}``)."""
    _field(obj, "stop_reason", at, (str, dict, type(None)), "text, an object or null")
    if isinstance(obj.get("stop_reason"), dict):
        _field(obj["stop_reason"], "stop_reason", f"{at}stop_reason.", _STR_OR_NULL, "text or null")


def _block(b: Any, at: str) -> dict:
    if not isinstance(b, dict):
        raise _Wrong(at, b, "an object (a memory block)")
    p = f"{at}." if at else ""
    _field(b, "label", p, (str,), "text", required=True)
    _field(b, "value", p, _STR_OR_NULL, "text or null")
    _field(b, "description", p, _STR_OR_NULL, "text or null")
    _field(b, "id", p, _STR_OR_NULL, "text or null")
    _field(b, "limit", p, (int, type(None)), "a whole number or null")
    return b


def _agent(body: Any) -> dict:
    if not isinstance(body, dict):
        raise _Wrong("", body, "an object (an agent)")
    if not isinstance(body.get("id"), str) or not body["id"]:
        raise _Wrong("id", body.get("id"), "the agent's id (text)")
    _field(body, "name", "", _STR_OR_NULL, "text or null")
    blocks = body.get("blocks")
    if blocks is not None:
        if not isinstance(blocks, list):
            raise _Wrong("blocks", blocks, "a list of memory blocks")
        for i, b in enumerate(blocks):
            _block(b, f"blocks[{i}]")
    return body


def _message(m: Any, at: str) -> dict:
    if not isinstance(m, dict):
        raise _Wrong(at, m, "an object (a message)")
    p = f"{at}." if at else ""
    for key in ("id", "message_type", "date", "run_id"):
        _field(m, key, p, _STR_OR_NULL, "text or null")
    mt = m.get("message_type")
    if mt in _CONTENT_TYPES:
        _field(m, "content", p, (str, list, type(None)), "text, a list of parts or null")
    elif mt == "reasoning_message":
        _field(m, "reasoning", p, _STR_OR_NULL, "text or null")
    elif mt == "stop_reason":
        _stop(m, p)
    _field(m, "tool_call", p, (dict, type(None)), "an object or null")
    _field(m, "tool_calls", p, (list, type(None)), "a list or null")
    return m


def _checked(check, what: str, hint: str, *args):
    try:
        return check(*args)
    except _Wrong as w:
        raise not_understood(what, w.at, w.value, w.expected, hint) from None


def agent(body: Any, what: str, hint: str = "") -> dict:
    """An agent (``GET agents/<id>``): an object with its id; ``name`` text; ``blocks``, when there, a list
    of blocks with a ``label`` (text), ``value``/``description``/``id`` (text or null), ``limit`` (a whole
    number or null)."""
    return _checked(_agent, what, hint, body)


def block(body: Any, what: str, hint: str = "") -> dict:
    """One memory block (the answer to an edit of a block)."""
    return _checked(_block, what, hint, body, "")


def message(item: Any, what: str, hint: str = "", at: str = "") -> dict:
    """One message or stream item: an object whose ``id``, ``message_type``, ``date``, ``run_id`` are text or
    null; the ``content`` of an assistant, user or system message text, a list of parts or null; the
    ``reasoning`` of a reasoning message text or null; a ``stop_reason`` item's reason text, an object holding
    it, or null; ``tool_call`` an object and ``tool_calls`` a list (or null)."""
    return _checked(_message, what, hint, item, at)


def messages(body: Any, what: str, hint: str = "") -> list[dict]:
    """A listing of messages: a list of messages (see :func:`message`)."""
    def check(body):
        if not isinstance(body, list):
            raise _Wrong("", body, "a list of messages")
        return [_message(m, f"messages[{i}]") for i, m in enumerate(body)]

    return _checked(check, what, hint, body)


def obj(body: Any, what: str, expected: str = "an object", hint: str = "") -> dict:
    """``body`` if it is an object (a dict), else the error saying what it is."""
    if not isinstance(body, dict):
        raise not_understood(what, "", body, expected, hint)
    return body


def run(body: Any, what: str, hint: str = "") -> dict:
    """A run: an object whose ``status`` is text (or null) and ``stop_reason`` text, an object or null."""
    def check(body):
        if not isinstance(body, dict):
            raise _Wrong("", body, "an object (a run)")
        _field(body, "status", "", _STR_OR_NULL, "text or null")
        _stop(body, "")
        return body

    return _checked(check, what, hint, body)


def conversation(body: Any, what: str, hint: str = "") -> dict:
    """A new conversation: an object whose ``id`` is a Letta id (it goes into URL paths, and is recorded)."""
    from .config import check_id
    from .errors import LettaConfigError

    body = obj(body, what, "an object (a conversation)", hint)
    if not isinstance(body.get("id"), str):
        raise not_understood(what, "id", body.get("id"), "a conversation id (text)", hint)
    try:
        check_id(body["id"], "conversation id")
    except LettaConfigError:
        raise LettaProtocolError(f"{what}: {NOT_UNDERSTOOD}", hint,
                                 detail="its id is not a Letta conversation id") from None
    return body
