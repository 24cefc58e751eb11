"""Server-sent events: a pure, incremental parser (WHATWG rules) and the Letta meaning of the events.

``SSEDecoder.feed(text)`` takes arbitrary chunks (a line, or a ``\\r\\n``, may be split anywhere) and returns
the events completed so far; ``parse_sse(chunks)`` does a whole stream. ``letta_items(events)`` turns
events into Letta message dicts, stopping at ``[DONE]`` and raising on an error event or bad JSON.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterable, Iterator

from . import shapes
from .errors import LettaProtocolError, LettaStreamError

DONE = "[DONE]"


@dataclass(frozen=True)
class SSEEvent:
    data: str
    event: str = "message"
    id: str | None = None
    retry: int | None = None


class SSEDecoder:
    """Incremental SSE decoder. Comments and unknown fields are ignored; an event with no data is dropped."""

    __slots__ = ("_buf", "_data", "_event", "_id", "_retry")

    def __init__(self) -> None:
        self._buf = ""
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self._retry: int | None = None

    def feed(self, chunk: str) -> list[SSEEvent]:
        self._buf += chunk
        out: list[SSEEvent] = []
        buf = self._buf
        start = 0
        n = len(buf)
        i_r = buf.find("\r")  # cached: most streams have no \r at all, so don't rescan for it per line
        while True:
            # find the next line terminator: \r\n, \n or \r (a trailing \r waits for a possible \n)
            i_n = buf.find("\n", start)
            if 0 <= i_r < start:
                i_r = buf.find("\r", start)
            if i_n < 0 and i_r < 0:
                break
            if i_r >= 0 and (i_n < 0 or i_r < i_n):
                if i_r == n - 1:
                    break  # may be the first half of \r\n
                end, nxt = i_r, (i_r + 2 if buf[i_r + 1] == "\n" else i_r + 1)
            else:
                end, nxt = i_n, i_n + 1
            ev = self._line(buf[start:end])
            if ev is not None:
                out.append(ev)
            start = nxt
        self._buf = buf[start:]
        return out

    def end(self) -> list[SSEEvent]:
        """End of stream: a final lone ``\\r`` ends its line; an event without its blank line is discarded."""
        out: list[SSEEvent] = []
        if self._buf.endswith("\r"):
            ev = self._line(self._buf[:-1])
            if ev is not None:
                out.append(ev)
        self._buf = ""
        self._data = []
        self._event = ""
        return out

    def _line(self, line: str) -> SSEEvent | None:
        if line == "":
            if not self._data:
                self._event = ""
                return None
            ev = SSEEvent(data="\n".join(self._data), event=self._event or "message", id=self._id,
                          retry=self._retry)
            self._data = []
            self._event = ""
            return ev
        if line[0] == ":":
            return None
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry":
            if value.isdigit():
                self._retry = int(value)
        return None


def parse_sse(chunks: Iterable[str]) -> list[SSEEvent]:
    """All events of a complete stream given as text chunks."""
    dec = SSEDecoder()
    out: list[SSEEvent] = []
    for c in chunks:
        out.extend(dec.feed(c))
    out.extend(dec.end())
    return out


def encode_sse(ev: SSEEvent) -> str:
    """The wire form of one event (inverse of the decoder; used by tests and fault injection)."""
    lines = []
    if ev.event != "message":
        lines.append(f"event: {ev.event}")
    if ev.id is not None:
        lines.append(f"id: {ev.id}")
    if ev.retry is not None:
        lines.append(f"retry: {ev.retry}")
    for part in ev.data.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        lines.append(f"data: {part}")
    return "\n".join(lines) + "\n\n"


def interpret(ev: SSEEvent) -> dict | str | None:
    """One event's meaning: a Letta item (dict), ``DONE``, or None (empty data).

    Raises LettaStreamError on an ``error`` event / ``error_message`` item and LettaProtocolError on data that
    is not a JSON object. Unknown message types are passed through untouched.
    """
    data = ev.data.strip()
    if data == DONE:
        return DONE
    if not data:
        return None
    garbled = "the server or a proxy in between garbled the stream; retry later"
    try:
        obj = json.loads(data)
    except ValueError:
        raise LettaProtocolError("Letta sent a stream event that is not JSON", garbled, detail=data[:200]) from None
    except RecursionError:
        raise shapes.too_deep("Letta sent a stream event", garbled) from None
    if not isinstance(obj, dict):
        raise LettaProtocolError("Letta sent a stream event that is not a JSON object", garbled,
                                 detail=f"it is {shapes.kind(obj)}")
    if ev.event == "error" or obj.get("message_type") == "error_message" or (
            "error" in obj and "message_type" not in obj):
        raise stream_error(obj)
    return obj


def letta_items(events: Iterable[SSEEvent]) -> Iterator[dict]:
    """Letta stream items until ``[DONE]`` (or the end of ``events``); see ``interpret``."""
    for ev in events:
        item = interpret(ev)
        if item is DONE:
            return
        if item is not None:
            yield item  # type: ignore[misc]


def letta_stream(chunks: Iterable[str]) -> Iterator[dict]:
    """Letta items from the text chunks of a response body, stopping at ``[DONE]``.

    A body that ends before ``[DONE]`` and before any ``stop_reason`` item is a LettaProtocolError (the
    connection was cut mid-run); one that ends after its stop_reason is accepted.
    """
    dec = SSEDecoder()
    saw_stop = False

    def events() -> Iterator[SSEEvent]:
        for chunk in chunks:
            yield from dec.feed(chunk)
        yield from dec.end()

    for ev in events():
        item = interpret(ev)
        if item is DONE:
            return
        if item is None:
            continue
        if item.get("message_type") == "stop_reason":  # type: ignore[union-attr]
            saw_stop = True
        yield item  # type: ignore[misc]
    if not saw_stop:
        raise LettaProtocolError("the Letta stream ended before the agent run finished",
                                 "the connection was cut or the server stopped; the message may or may not have "
                                 "been processed, check the conversation before resending")


def _short(value, limit: int = 200) -> str:
    """A field of an error event as text, at most ``limit`` characters (the event may be any JSON)."""
    if isinstance(value, str):
        return value[:limit]
    try:
        return json.dumps(value)[:limit]
    except (RecursionError, ValueError, TypeError):
        return type(value).__name__


def stream_error(obj: dict) -> LettaStreamError:
    err = obj.get("error") if isinstance(obj.get("error"), dict) else obj
    kind = _short(err.get("error_type") or err.get("type") or "error", 80)
    msg = _short(err["message"], 300) if err.get("message") else _short(obj)
    if err.get("detail") and err.get("detail") != err.get("message"):
        msg = f"{msg.rstrip('. ')}: {_short(err['detail'], 300)}"
    status = err.get("status_code") if isinstance(err.get("status_code"), int) else None
    return LettaStreamError(f"the Letta agent run failed ({kind})",
                            "see the Letta server log; if it is the model provider, check its key and quota",
                            status=status, detail=str(msg)[:300], event=obj)
