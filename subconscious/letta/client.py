"""Synchronous Letta REST client (httpx), just the calls subconscious needs.

Every call has an explicit timeout (the client default, or ``timeout=`` per call), every failure raises a
``LettaError`` subclass that says what failed and what to do, and the API key never appears in logs,
errors or reprs. Redirects are never followed (``follow_redirects=False`` on the client and on every call):
the Authorization header would go along to wherever a 3xx points; a 3xx is an error naming the target. ``transport=`` is the seam for tests (``httpx.MockTransport``, fault injection).
"""
from __future__ import annotations

import logging
import sys
import time
from typing import Callable, Iterable, Iterator, Mapping, Sequence

if "httpx" not in sys.modules:
    # httpx imports its command-line client (click, pygments, rich) whenever they are installed: ~50 ms for every
    # SessionStart and worker, and we never run it. A None entry makes that one import fail, which httpx handles
    # (its ``main`` then prints an install hint); the entry goes again so nothing else is kept from it.
    sys.modules["httpx._main"] = None  # type: ignore[assignment]
    try:
        import httpx
    finally:
        if sys.modules.get("httpx._main", 0) is None:
            del sys.modules["httpx._main"]
import httpx  # noqa: E402 - after the guard above

from . import shapes
from .config import DEFAULT_BASE_URL, LettaSettings, check_id, display_url, normalize_base_url
from .errors import (LettaConnectionError, LettaError, LettaHTTPError, LettaNotFoundError, LettaProtocolError,
                     LettaStreamError, LettaTimeoutError, detail_of, error_for_status, redact, redirect_error)
from .messages import ClientTool, ToolResult, TurnResult, approval_message, fold_items, turn_from_response, \
    user_message
from .sse import letta_stream

log = logging.getLogger("subconscious.letta")

DEFAULT_TIMEOUT = httpx.Timeout(connect=5.0, read=30.0, write=10.0, pool=5.0)
TimeoutArg = float | httpx.Timeout | None
MessagesArg = str | Mapping | Sequence[Mapping]


def _timeout(value: TimeoutArg, default: httpx.Timeout) -> httpx.Timeout:
    if value is None:
        return default
    if isinstance(value, httpx.Timeout):
        return value
    return httpx.Timeout(float(value))


def _within(limit: float | None, left: float) -> float:
    """A wait of at most ``limit`` seconds (None: no limit) that also ends when ``left`` seconds have passed."""
    left = max(left, 0.001)
    return left if limit is None else min(limit, left)


def _seconds(t: httpx.Timeout) -> str:
    vals = [v for v in (t.connect, t.read, t.write, t.pool) if v is not None]
    return f"{max(vals):g} s" if vals else "no limit"


def _as_messages(messages: MessagesArg) -> list[dict]:
    if isinstance(messages, str):
        return [user_message(messages)]
    if isinstance(messages, Mapping):
        return [dict(messages)]
    return [dict(m) for m in messages]


def _tools_json(client_tools: Iterable[ClientTool | Mapping] | None) -> list[dict] | None:
    if client_tools is None:
        return None
    return [t.to_json() if isinstance(t, ClientTool) else dict(t) for t in client_tools]


class LettaClient:
    """``LettaClient(base_url, api_key)``; base_url is normalised (``/v1`` added); None means Letta Cloud."""

    def __init__(self, base_url: str | None = None, api_key: str | None = None, *,
                 timeout: TimeoutArg = None, transport: httpx.BaseTransport | None = None,
                 user_agent: str = "subconscious-letta-client"):
        self.base_url = normalize_base_url(base_url or DEFAULT_BASE_URL)
        self._api_key = api_key or None
        self._default_timeout = _timeout(timeout, DEFAULT_TIMEOUT)
        headers = {"Accept": "application/json", "User-Agent": user_agent}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        self._http = httpx.Client(base_url=self.base_url + "/", headers=headers, timeout=self._default_timeout,
                                  transport=transport, follow_redirects=False, trust_env=True)

    @classmethod
    def from_settings(cls, settings: LettaSettings, **kw) -> "LettaClient":
        return cls(settings.base_url, settings.api_key, **kw)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **kw) -> "LettaClient":
        return cls.from_settings(LettaSettings.from_env(env), **kw)

    def __repr__(self) -> str:
        return f"LettaClient(base_url={display_url(self.base_url)!r}, api_key={'<set>' if self._api_key else None})"

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "LettaClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------ plumbing

    def _redact(self, text: str) -> str:
        return redact(text, self._api_key)

    def _where(self) -> str:
        return display_url(self.base_url)

    def _hint(self) -> str:
        """What to check when an answer has a shape the Letta API never gives."""
        return f"is LETTA_BASE_URL ({self._where()}) a Letta server?"

    def _transport_error(self, what: str, exc: Exception, timeout: httpx.Timeout) -> LettaError:
        kind = type(exc).__name__
        detail = self._redact(str(exc) or kind)
        if isinstance(exc, httpx.TimeoutException):
            return LettaTimeoutError(f"{what} timed out ({kind}, limit {_seconds(timeout)})",
                                     f"the Letta server at {self._where()} is slow or unreachable; retry later",
                                     detail=detail)
        if isinstance(exc, httpx.ConnectError):
            return LettaConnectionError(f"{what}: cannot connect to Letta at {self._where()}",
                                        "start the server or fix LETTA_BASE_URL", detail=detail)
        return LettaConnectionError(f"{what}: connection to Letta at {self._where()} failed ({kind})",
                                    "check the network and LETTA_BASE_URL; retry later", detail=detail)

    def _http_error(self, what: str, resp: httpx.Response) -> LettaHTTPError:
        try:
            text = resp.text
        except (UnicodeDecodeError, httpx.HTTPError):
            text = ""
        return error_for_status(what, resp.status_code, self._redact(detail_of(text)), where=self._where(),
                                key_set=bool(self._api_key))

    def _redirect_error(self, what: str, resp: httpx.Response) -> LettaHTTPError:
        location = resp.headers.get("location")
        return redirect_error(what, resp.status_code, self._redact(location) if location else None,
                              where=self._where())

    def _request(self, what: str, method: str, path: str, *, timeout: TimeoutArg = None, **kw):
        t = _timeout(timeout, self._default_timeout)
        started = time.monotonic()
        failure: LettaError | None = None
        try:
            resp = self._http.request(method, path, timeout=t, follow_redirects=False, **kw)
        except httpx.HTTPError as e:
            log.debug("%s %s failed after %.0f ms: %s", method, path, (time.monotonic() - started) * 1000,
                      type(e).__name__)
            failure = self._transport_error(what, e, t)
        if failure is not None:
            # raised outside the except block: no __context__ chain to the httpx error and its request headers
            raise failure
        log.debug("%s %s -> %d in %.0f ms", method, path, resp.status_code, (time.monotonic() - started) * 1000)
        if 300 <= resp.status_code < 400:
            raise self._redirect_error(what, resp)
        if resp.status_code >= 400:
            raise self._http_error(what, resp)
        if not resp.content:
            return None
        try:
            return resp.json()
        except ValueError:
            raise LettaProtocolError(f"{what}: the answer is not JSON", self._hint(),
                                     detail=self._redact(resp.text[:200])) from None
        except RecursionError:
            raise shapes.too_deep(what, self._hint()) from None

    # ------------------------------------------------------------ calls

    def health(self, *, timeout: TimeoutArg = None) -> dict:
        return self._request("checking Letta health", "GET", "health/", timeout=timeout)

    def get_agent(self, agent_id: str, *, include_blocks: bool = True, timeout: TimeoutArg = None) -> dict:
        """The agent (AgentState dict); with include_blocks, ``blocks`` holds the memory blocks."""
        params = {"include": "agent.blocks"} if include_blocks else None
        what = f"reading agent {agent_id}"
        return shapes.agent(self._request(what, "GET", f"agents/{check_id(agent_id, 'agent id')}", params=params,
                                          timeout=timeout), what, self._hint())

    def update_agent(self, agent_id: str, fields: Mapping, *, timeout: TimeoutArg = None) -> dict:
        return self._request(f"updating agent {agent_id}", "PATCH", f"agents/{check_id(agent_id, 'agent id')}",
                             json=dict(fields), timeout=timeout)

    def set_agent_model(self, agent_id: str, model: str, context_window_limit: int | None = None, *,
                        timeout: TimeoutArg = None) -> dict:
        """PATCH {model, context_window_limit} (the deprecated llm_config body is rejected by Letta)."""
        body: dict = {"model": model}
        if context_window_limit is not None:
            body["context_window_limit"] = int(context_window_limit)
        try:
            return self.update_agent(agent_id, body, timeout=timeout)
        except LettaNotFoundError as e:
            if "handle" not in e.detail.lower():
                raise
            raise LettaNotFoundError(f"setting the model of agent {agent_id}: HTTP 404",
                                     f"model {model!r} is not offered by {self._where()}; pick a handle from "
                                     "its model list (LETTA_MODEL)", status=404, detail=e.detail) from None

    def import_agent_file(self, content: bytes, *, filename: str = "Subconscious.af", model: str | None = None,
                          name: str | None = None, append_copy_suffix: bool = False,
                          timeout: TimeoutArg = None) -> list[str]:
        """Import an .af agent file; returns the new agent ids. ``model`` sets the agent's model handle."""
        data = {"append_copy_suffix": "true" if append_copy_suffix else "false"}
        if model:
            data["model"] = model
        if name:
            data["name"] = name
        body = self._request("importing the agent file", "POST", "agents/import",
                             files={"file": (filename, content, "application/json")}, data=data,
                             timeout=timeout or httpx.Timeout(60.0, connect=5.0))
        ids = body.get("agent_ids") if isinstance(body, dict) else None
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
            raise LettaProtocolError("importing the agent file: no agent id in the answer",
                                     "is this a Letta server with agent-file import?",
                                     detail=f"agent_ids is {shapes.kind(ids)}" if isinstance(body, dict)
                                     else f"the answer is {shapes.kind(body)}")
        return ids

    def modify_block(self, agent_id: str, label: str, value: str, *, timeout: TimeoutArg = None) -> dict:
        """Set the value of the agent's memory block ``label``; returns the block."""
        from urllib.parse import quote

        what = f"updating block {label!r} of agent {agent_id}"
        return shapes.block(self._request(
            what, "PATCH", f"agents/{check_id(agent_id, 'agent id')}/core-memory/blocks/{quote(label, safe='')}",
            json={"value": value}, timeout=timeout), what, self._hint())

    def search_archival(self, agent_id: str, query: str, *, top_k: int | None = None,
                        timeout: TimeoutArg = None) -> list[dict]:
        """Archival memory passages nearest ``query`` (Letta's semantic search): [{content, timestamp, tags}]."""
        params: dict = {"query": query}
        if top_k is not None:
            params["top_k"] = int(top_k)
        body = self._request(f"searching the archival memory of {agent_id}", "GET",
                             f"agents/{check_id(agent_id, 'agent id')}/archival-memory/search", params=params,
                             timeout=timeout)
        results = body.get("results") if isinstance(body, dict) else body
        return [r for r in results if isinstance(r, dict)] if isinstance(results, list) else []

    def list_models(self, *, timeout: TimeoutArg = None) -> list[dict]:
        body = self._request("listing models", "GET", "models/", timeout=timeout)
        if not isinstance(body, list):
            raise LettaProtocolError("listing models: the answer is not a list", self._hint(),
                                     detail=f"it is {shapes.kind(body)}")
        return [m for m in body if isinstance(m, dict)]

    def create_conversation(self, agent_id: str, *, timeout: TimeoutArg = None) -> dict:
        """A new conversation ({id: conv-…, agent_id, …}) on the agent."""
        what = f"creating a conversation for {agent_id}"
        body = self._request(what, "POST", "conversations/", params={"agent_id": check_id(agent_id, "agent id")},
                             json={}, timeout=timeout)
        return shapes.conversation(body, what, "is this Letta server 0.16.2 or newer (conversations API)?")

    def list_messages(self, conversation_id: str, *, limit: int = 20, order: str = "desc",
                      before: str | None = None, after: str | None = None,
                      timeout: TimeoutArg = None) -> list[dict]:
        """Messages of a conversation; ``order="desc"`` (default) is newest first."""
        params: dict = {"limit": int(limit), "order": order}
        if before:
            params["before"] = check_id(before, "message id")
        if after:
            params["after"] = check_id(after, "message id")
        what = f"listing messages of {conversation_id}"
        body = self._request(what, "GET", f"conversations/{check_id(conversation_id, 'conversation id')}/messages",
                             params=params, timeout=timeout)
        return shapes.messages(body, what, self._hint())

    def iter_messages(self, conversation_id: str, *, after: str | None = None, page: int = 100,
                      max_pages: int = 50, timeout: TimeoutArg = None) -> Iterator[dict]:
        """Every message of a conversation oldest first (after message ``after`` if given), page by page with
        the API's ``after`` cursor, at most ``max_pages`` pages (a LettaError past that: the caller must not
        take "not found" for an answer).

        Only an empty page ends the listing: Letta 0.16.8 applies ``limit`` to its stored rows and then
        converts each row into zero or more messages (an assistant row holds reasoning and tool calls), so a
        short page is no proof that nothing follows. An ``after`` id the conversation does not hold is
        ignored by that server (the listing starts at the oldest message): more to read, never less."""
        return self._pages(conversation_id, "asc", after, page, max_pages, timeout)

    def iter_messages_newest_first(self, conversation_id: str, *, page: int = 100, max_pages: int = 200,
                                   timeout: TimeoutArg = None) -> Iterator[dict]:
        """Every message of a conversation newest first, page by page with the ``before`` cursor (stop
        iterating once you found what you look for); a LettaError past ``max_pages`` pages."""
        return self._pages(conversation_id, "desc", None, page, max_pages, timeout)

    def _pages(self, conversation_id: str, order: str, cursor: str | None, page: int, max_pages: int,
               timeout: TimeoutArg) -> Iterator[dict]:
        from .paging import MAX_PAGES, Pages

        def fetch(cur):
            return self.list_messages(conversation_id, limit=page, order=order, timeout=timeout,
                                      **{"after" if order == "asc" else "before": cur})

        pages = Pages(fetch, cursor=cursor, max_pages=max_pages)
        for batch in pages:
            yield from batch
        if pages.stopped == MAX_PAGES:
            raise LettaProtocolError(f"listing messages of {conversation_id}: more than {max_pages * page} messages "
                                     "to read", "the look-up was cut short; it is retried later")

    def get_run(self, run_id: str, *, timeout: TimeoutArg = None) -> dict:
        """A run ({id, status: created|running|completed|failed|cancelled, stop_reason, …})."""
        what = f"reading run {run_id}"
        return shapes.run(self._request(what, "GET", f"runs/{check_id(run_id, 'run id')}", timeout=timeout), what,
                          self._hint())

    def _message_body(self, messages: MessagesArg, client_tools, max_steps: int | None, streaming: bool,
                      stream_tokens: bool = False) -> dict:
        body: dict = {"messages": _as_messages(messages), "streaming": streaming}
        tools = _tools_json(client_tools)
        if tools is not None:
            body["client_tools"] = tools
        if max_steps is not None:
            body["max_steps"] = int(max_steps)
        if streaming:
            body.update(stream_tokens=stream_tokens, include_pings=True)
        return body

    def send_message(self, conversation_id: str, messages: MessagesArg, *,
                     client_tools: Iterable[ClientTool | Mapping] | None = None, max_steps: int | None = None,
                     timeout: TimeoutArg = None) -> TurnResult:
        """Send and wait for the whole turn (``streaming=false``). ``messages``: text, a message or a list."""
        t = timeout if timeout is not None else httpx.Timeout(120.0, connect=5.0)
        body = self._request(f"sending a message to {conversation_id}", "POST",
                             f"conversations/{check_id(conversation_id, 'conversation id')}/messages",
                             json=self._message_body(messages, client_tools, max_steps, False), timeout=t)
        return turn_from_response(body)

    def stream_message(self, conversation_id: str, messages: MessagesArg, *,
                       client_tools: Iterable[ClientTool | Mapping] | None = None, max_steps: int | None = None,
                       timeout: TimeoutArg = None, total_timeout: float | None = None,
                       stream_tokens: bool = False) -> Iterator[dict]:
        """Send and yield each stream item (dicts with message_type, pings included) until ``[DONE]``.
        ``stream_tokens``: assistant and reasoning text come in pieces as the model writes them (same id).

        ``timeout`` bounds each wait for data (Letta pings keep a slow run alive); ``total_timeout`` bounds the
        whole run. Closing the iterator early closes the connection.
        """
        what = f"streaming a message to {conversation_id}"
        path = f"conversations/{check_id(conversation_id, 'conversation id')}/messages"
        body = self._message_body(messages, client_tools, max_steps, True, stream_tokens)
        t = _timeout(timeout, httpx.Timeout(60.0, connect=5.0))
        started = time.monotonic()
        deadline = started + total_timeout if total_timeout else None
        if deadline is not None:  # no wait for data, the response's head included, may end past the deadline
            t = httpx.Timeout(connect=t.connect, read=_within(t.read, total_timeout), write=t.write, pool=t.pool)

        def over() -> LettaTimeoutError:
            return LettaTimeoutError(f"{what} took longer than {total_timeout:g} s",
                                     "the agent run continues on the server; read the conversation later")

        def text(resp: httpx.Response) -> Iterator[str]:
            """The body's text, the deadline checked on every chunk whatever it holds (keep-alive comments and
            a trickle of bytes too), and each next read allowed only what remains of the total."""
            timeouts = resp.request.extensions.get("timeout")
            for chunk in resp.iter_text():
                if deadline is None:
                    yield chunk
                    continue
                left = deadline - time.monotonic()
                if left <= 0:
                    raise over()
                if isinstance(timeouts, dict):  # httpcore reads it before each read of the socket
                    timeouts["read"] = _within(t.read, left)
                yield chunk

        def whole(resp: httpx.Response) -> None:
            """Read an answer that is not the stream (an error, another content type) inside the deadline too: a
            server that trickles it kept ``ask`` past its limit while ``read()`` waited for the end."""
            if deadline is None:
                resp.read()
                return
            timeouts, chunks, size = resp.request.extensions.get("timeout"), [], 0
            for chunk in resp.iter_bytes():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise over()
                if isinstance(timeouts, dict):
                    timeouts["read"] = _within(t.read, left)
                chunks.append(chunk)
                size += len(chunk)
                if size > 1 << 20:  # enough to say what it was
                    break
            resp._content = b"".join(chunks)  # what read() keeps: .text and .json() read it

        failure: LettaError | None = None
        guard = _DeadlineGuard(self._http, deadline - time.monotonic() + 0.2) if deadline is not None else None
        try:
            with self._http.stream("POST", path, json=body, timeout=t, follow_redirects=False,
                                   headers={"Accept": "text/event-stream"},
                                   extensions={"trace": guard.trace} if guard else None) as resp:
                log.debug("POST %s (stream) -> %d in %.0f ms", path, resp.status_code,
                          (time.monotonic() - started) * 1000)
                if 300 <= resp.status_code < 400:
                    raise self._redirect_error(what, resp)
                if resp.status_code >= 400:
                    whole(resp)
                    raise self._http_error(what, resp)
                ctype = resp.headers.get("content-type", "")
                if "text/event-stream" not in ctype:
                    whole(resp)
                    raise LettaProtocolError(f"{what}: expected an event stream, got {ctype or 'no content type'}",
                                             f"is LETTA_BASE_URL ({self._where()}) a Letta server?",
                                             detail=self._redact(resp.text[:200]))
                try:
                    for item in letta_stream(text(resp)):
                        yield shapes.message(item, what, self._hint())  # what the callers read of it, checked
                        if deadline is not None and time.monotonic() > deadline:
                            raise over()
                except LettaStreamError as e:  # the server's words: never the key
                    raise e.redacted(self._api_key) from None
            if guard is not None and guard.fired:  # the stream ended because the guard cut it
                raise over()
        except LettaTimeoutError:
            raise
        except LettaError:
            if guard is None or not guard.fired:
                raise
            failure = over()  # what the cut made of the stream ("ended early", a cut event) is the deadline
        except httpx.HTTPError as e:
            failure = over() if deadline is not None and (guard.fired or isinstance(e, httpx.TimeoutException)) and \
                time.monotonic() >= deadline - 0.05 else self._transport_error(what, e, t)
        finally:
            if guard is not None:
                guard.cancel()
            log.debug("POST %s (stream) closed after %.0f ms", path, (time.monotonic() - started) * 1000)
        if failure is not None:
            raise failure  # outside the except block: no chain to the httpx error (see _request)

    def send_message_streaming(self, conversation_id: str, messages: MessagesArg, *,
                               client_tools: Iterable[ClientTool | Mapping] | None = None,
                               max_steps: int | None = None, timeout: TimeoutArg = None,
                               total_timeout: float | None = None,
                               on_item: Callable[[dict], None] | None = None,
                               stream_tokens: bool = False) -> TurnResult:
        """Stream a turn and fold it into a TurnResult; ``on_item`` sees every item as it arrives.

        On an error event, LettaStreamError is raised with ``.partial`` = the TurnResult gathered so far.
        """
        result = TurnResult()
        items = []
        try:
            for item in self.stream_message(conversation_id, messages, client_tools=client_tools,
                                            max_steps=max_steps, timeout=timeout, total_timeout=total_timeout,
                                            stream_tokens=stream_tokens):
                items.append(item)
                if on_item is not None:
                    on_item(item)
        except LettaStreamError as e:
            e.partial = fold_items(items, result)
            raise
        return fold_items(items, result)

    def send_tool_results(self, conversation_id: str, results: Iterable[ToolResult], *,
                          client_tools: Iterable[ClientTool | Mapping] | None = None, streaming: bool = True,
                          max_steps: int | None = None, timeout: TimeoutArg = None,
                          total_timeout: float | None = None) -> TurnResult:
        """Answer approval requests with client-side tool results; the agent then continues its turn.

        Pass the same ``client_tools`` as in the request that was paused, so the agent may call them again.
        """
        msg = approval_message(results)
        if streaming:
            return self.send_message_streaming(conversation_id, [msg], client_tools=client_tools,
                                               max_steps=max_steps, timeout=timeout, total_timeout=total_timeout)
        return self.send_message(conversation_id, [msg], client_tools=client_tools, max_steps=max_steps,
                                 timeout=timeout)


class _DeadlineGuard:
    """Ends a request at its deadline whatever the server sends. httpcore takes one read timeout for the whole
    response head (up to 16 KiB of it), so a server trickling the head a byte at a time beat every per-read
    bound; at the deadline this shuts down the sockets the request can be reading (shutdown, not close: a read
    blocked in another thread returns at once), and the read fails there. The sockets: the connection the
    request opened (httpcore's documented ``trace`` extension hands it over) and, for a kept-alive one it
    reused, the pool's busy connections (best effort: httpcore's internals, looked up defensively)."""

    def __init__(self, http: httpx.Client, left: float):
        import threading  # only the calls with a total limit (ask) pay for it

        self._http, self._socks, self.fired = http, [], False
        self._timer = threading.Timer(max(0.0, left), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def trace(self, event: str, info: dict) -> None:
        if event in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            stream = info.get("return_value")
            sock = stream.get_extra_info("socket") if hasattr(stream, "get_extra_info") else None
            if sock is not None:
                self._socks.append(sock)

    def _busy_sockets(self) -> list:
        pool = getattr(getattr(self._http, "_transport", None), "_pool", None)
        found = []
        for conn in list(getattr(pool, "connections", None) or ()):
            try:
                if conn.is_idle():
                    continue
                stream = getattr(getattr(conn, "_connection", None), "_network_stream", None)
                sock = stream.get_extra_info("socket") if hasattr(stream, "get_extra_info") else None
            except Exception:  # noqa: BLE001 - internals of another version: nothing to shut
                continue
            if sock is not None:
                found.append(sock)
        return found

    def _fire(self) -> None:
        import socket

        self.fired = True
        for sock in self._socks + self._busy_sockets():
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except (OSError, ValueError):
                pass

    def cancel(self) -> None:
        self._timer.cancel()
