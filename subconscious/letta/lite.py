"""Stdlib-only reads for the per-tool hot path (PreToolUse): no httpx import.

``import subconscious.letta.lite`` needs ``socket`` alone (:mod:`.wire` does the GET; urllib, ~20 ms of
imports, only behind an opener seam or a proxy) where ``subconscious.letta.client`` costs about 75 ms (httpx). Only the GETs a hook needs are here; everything else uses ``LettaClient``. Errors are
the same LettaError family with the same messages, and the API key is kept out of them the same way.
Proxies from the environment (HTTPS_PROXY, NO_PROXY) are honoured, as httpx does. Redirects are never
followed (urllib's default opener would follow one to any host and send ``Authorization`` along): a 3xx is
an error that names where the server points.
"""
from __future__ import annotations

import json
import os
import socket
import urllib.parse  # loaded with .config already
from typing import Callable

from . import shapes, wire
from .config import check_id, display_url, normalize_base_url
from .errors import LettaConnectionError, LettaError, LettaProtocolError, LettaTimeoutError, detail_of, \
    error_for_status, redact, redirect_error

Opener = Callable[..., object]  # urllib.request.urlopen-compatible (the test seam)
_opener = None  # urllib's, built on first use (only with an opener seam or a proxy: the rest goes by wire)
_process_opener: Opener | None = None  # every read of this process, when set (subconscious serve: kept-alive)


def use_opener(opener: Opener | None) -> None:
    """Send this process's reads through ``opener`` (None: back to urllib's, a connection per request)."""
    global _process_opener
    _process_opener = opener


def _open(req, timeout: float):
    global _opener
    if _opener is None:
        import urllib.request

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            """Turn every 3xx into an HTTPError instead of a new request (which would carry the API key)."""

            def redirect_request(self, req, fp, code, msg, headers, newurl):
                return None

        _opener = urllib.request.build_opener(NoRedirect)  # proxies from the environment, as urlopen
    return _opener.open(req, timeout=timeout)


def get_json(base_url: str | None, path: str, *, api_key: str | None = None, params: dict | None = None,
             timeout: float = 3.0, what: str = "reading from Letta", opener: Opener | None = None):
    """GET ``{base}/v1/{path}`` and decode JSON; ``timeout`` bounds the connect and each read."""
    return _call("GET", base_url, path, api_key=api_key, params=params, timeout=timeout, what=what, opener=opener)


def post_json(base_url: str | None, path: str, payload, *, api_key: str | None = None, params: dict | None = None,
              timeout: float = 10.0, what: str = "writing to Letta", opener: Opener | None = None):
    """POST ``payload`` (JSON) to ``{base}/v1/{path}`` and decode the JSON answer."""
    return _call("POST", base_url, path, api_key=api_key, params=params, timeout=timeout, what=what, opener=opener,
                 payload=json.dumps(payload).encode())


def _call(method: str, base_url: str | None, path: str, *, api_key: str | None, params: dict | None, timeout: float,
          what: str, opener: Opener | None, payload: bytes | None = None):
    base = normalize_base_url(base_url)
    url = f"{base}/{path.lstrip('/')}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    headers = {"Accept": "application/json", "User-Agent": "subconscious-letta-lite"}
    if payload is not None:
        headers["Content-Type"] = "application/json"
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    where = display_url(base)
    chosen = opener or _process_opener
    if chosen is None and not wire.proxied(os.environ):  # the common case: no urllib import at all
        failure, body = _get_direct(url, headers, timeout, what, where, api_key, method, payload)
    else:
        failure, body = _get_urllib(chosen or _open, url, headers, timeout, what, where, api_key, method, payload)
    if failure is not None:
        raise failure  # outside the except blocks: no chain to the urllib error or its request headers
    try:
        return json.loads(body) if body else None
    except ValueError:
        raise LettaProtocolError(f"{what}: the answer is not JSON", f"is LETTA_BASE_URL ({where}) a Letta server?",
                                 detail=redact(body[:200].decode("utf-8", "replace"), api_key)) from None
    except RecursionError:
        raise shapes.too_deep(what, f"is LETTA_BASE_URL ({where}) a Letta server?") from None


def _timed_out(what: str, timeout: float, where: str) -> LettaTimeoutError:
    return LettaTimeoutError(f"{what} timed out (limit {timeout:g} s)",
                             f"the Letta server at {where} is slow or unreachable; retry later")


def _get_direct(url: str, headers: dict, timeout: float, what: str, where: str, api_key: str | None,
                method: str = "GET", payload: bytes | None = None) -> tuple[LettaError | None, bytes]:
    """One request by :mod:`.wire`; the errors are those urllib's path gives for the same answers."""
    try:
        status, found, body = wire.request(method, url, headers, timeout, payload)
    except (TimeoutError, socket.timeout):
        return _timed_out(what, timeout, where), b""
    except (OSError, ValueError) as e:
        return LettaConnectionError(f"{what}: cannot connect to Letta at {where}", "start the server or fix LETTA_BASE_URL",
                                    detail=redact(str(e), api_key)), b""
    if 300 <= status < 400:
        location = found.get("location")
        return redirect_error(what, status, redact(location, api_key) if location else None, where=where), b""
    if not 200 <= status < 300:
        return error_for_status(what, status, redact(detail_of(body.decode("utf-8", "replace")), api_key), where=where,
                                key_set=bool(api_key)), b""
    return None, body


def _get_urllib(open_, url: str, headers: dict, timeout: float, what: str, where: str, api_key: str | None,
                method: str = "GET", payload: bytes | None = None) -> tuple[LettaError | None, bytes]:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(url, data=payload, headers=headers, method=method)
    failure: LettaError | None = None
    body = b""
    try:
        with open_(req, timeout=timeout) as resp:
            body = resp.read()
    except urllib.error.HTTPError as e:
        if 300 <= e.code < 400:
            location = e.headers.get("Location") if e.headers is not None else None
            failure = redirect_error(what, e.code, redact(location, api_key) if location else None, where=where)
        else:
            try:
                text = e.read().decode("utf-8", "replace")
            except OSError:
                text = ""
            failure = error_for_status(what, e.code, redact(detail_of(text), api_key), where=where,
                                       key_set=bool(api_key))
    except (TimeoutError, socket.timeout):
        failure = _timed_out(what, timeout, where)
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        if isinstance(reason, (TimeoutError, socket.timeout)):
            failure = _timed_out(what, timeout, where)
        else:
            failure = LettaConnectionError(f"{what}: cannot connect to Letta at {where}",
                                           "start the server or fix LETTA_BASE_URL",
                                           detail=redact(str(reason), api_key))
    return failure, body


def list_messages(base_url: str | None, conversation_id: str, *, api_key: str | None = None, limit: int = 20,
                  order: str = "desc", timeout: float = 3.0, opener: Opener | None = None) -> list[dict]:
    """Messages of a conversation, newest first by default (same as LettaClient.list_messages)."""
    what = f"listing messages of {conversation_id}"
    body = get_json(base_url, f"conversations/{check_id(conversation_id, 'conversation id')}/messages",
                    api_key=api_key, params={"limit": int(limit), "order": order}, timeout=timeout, what=what,
                    opener=opener)
    return shapes.messages(body, what, _hint(base_url))


def get_agent(base_url: str | None, agent_id: str, *, api_key: str | None = None, timeout: float = 3.0,
              opener: Opener | None = None) -> dict:
    """The agent with its memory blocks (same as LettaClient.get_agent(include_blocks=True))."""
    what = f"reading agent {agent_id}"
    body = get_json(base_url, f"agents/{check_id(agent_id, 'agent id')}", api_key=api_key,
                    params={"include": "agent.blocks"}, timeout=timeout, what=what, opener=opener)
    return shapes.agent(body, what, _hint(base_url))


def create_conversation(base_url: str | None, agent_id: str, *, api_key: str | None = None, timeout: float = 10.0,
                        opener: Opener | None = None) -> dict:
    """A new conversation on the agent (same as LettaClient.create_conversation)."""
    what = f"creating a conversation for {agent_id}"
    body = post_json(base_url, "conversations/", {}, api_key=api_key, params={"agent_id": check_id(agent_id, "agent id")},
                     timeout=timeout, what=what, opener=opener)
    return shapes.conversation(body, what, "is this Letta server 0.16.2 or newer (conversations API)?")


def _hint(base_url: str | None) -> str:
    return f"is LETTA_BASE_URL ({display_url(normalize_base_url(base_url))}) a Letta server?"
