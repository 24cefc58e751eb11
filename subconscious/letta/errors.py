"""One exception family for everything that can go wrong talking to Letta.

Every message says what failed and what to do about it. No message, repr or traceback carries the API key:
callers build errors from already-redacted text (see ``redact``), and wrapped transport errors are chained
with ``from None`` so the request (and its Authorization header) is not attached.
"""
from __future__ import annotations

import json
from urllib.parse import urlsplit, urlunsplit


def display_url(url: str) -> str:
    """A URL safe to show: any user:password@ part is masked."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    if "@" in parts.netloc:
        host = parts.netloc.rsplit("@", 1)[1]
        return urlunsplit((parts.scheme, "***@" + host, parts.path, parts.query, parts.fragment))
    return url


_MIN_SECRET_PIECE = 6


class LettaError(Exception):
    """Base of all Letta client errors. ``what`` failed, ``hint`` says what to do; ``status`` if HTTP."""

    def __init__(self, what: str, hint: str = "", *, status: int | None = None, detail: str = ""):
        self.what = what
        self.hint = hint
        self.status = status
        self.detail = detail
        super().__init__(self._compose())

    def _compose(self) -> str:
        msg = self.what
        if self.detail:
            msg += f": {self.detail}"
        if self.hint:
            msg = msg.rstrip(". ") + f". {self.hint}"
        return msg

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._compose()!r})"


class LettaConfigError(LettaError):
    """Bad configuration (base URL, agent id, missing key, bundled agent file)."""


class LettaConnectionError(LettaError):
    """The server could not be reached (refused, DNS, TLS, connection dropped)."""


class LettaTimeoutError(LettaConnectionError):
    """The server did not answer within the timeout given for this call."""


class LettaHTTPError(LettaError):
    """The server answered with an HTTP error status."""


class LettaAuthError(LettaHTTPError):
    """401/403: the API key is missing, wrong or lacks access."""


class LettaNotFoundError(LettaHTTPError):
    """404: the agent, conversation or route does not exist on this server."""


class LettaConflictError(LettaHTTPError):
    """409: e.g. another request is already running on the same conversation."""


class LettaServerError(LettaHTTPError):
    """5xx: the Letta server (or its model provider) failed."""


class LettaProtocolError(LettaError):
    """The answer was not what the Letta API promises (bad JSON, wrong shape, malformed stream)."""


class LettaStreamError(LettaError):
    """The agent run reported an error inside the stream (an ``error`` event / ``error_message``)."""

    def redacted(self, secret: str | None) -> "LettaStreamError":
        """This error with any piece of ``secret`` masked in what it says (the server's text may echo the key)."""
        self.what, self.detail, self.hint = (redact(self.what, secret), redact(self.detail, secret),
                                             redact(self.hint, secret))
        self.args = (self._compose(),)
        return self

    def __init__(self, what: str, hint: str = "", *, status: int | None = None, detail: str = "",
                 event: dict | None = None, partial: object = None):
        self.event = event or {}
        self.partial = partial  # the TurnResult gathered before the error, if any
        super().__init__(what, hint, status=status, detail=detail)


def redact(text: str, secret: str | None, limit: int = 600) -> str:
    """``text`` cut to ``limit`` chars with any piece of ``secret`` (>= 6 chars, e.g. a prefix) masked."""
    if not isinstance(text, str):
        text = str(text)
    from ..base.termtext import clean  # first: a key split by invisible characters is joined again when shown

    text = clean(text)
    if len(text) > limit:
        text = text[:limit] + "..."
    if not secret or len(secret) < _MIN_SECRET_PIECE:
        return text
    windows = {secret[i:i + _MIN_SECRET_PIECE] for i in range(len(secret) - _MIN_SECRET_PIECE + 1)}
    masked = [False] * len(text)
    for i in range(len(text) - _MIN_SECRET_PIECE + 1):
        if text[i:i + _MIN_SECRET_PIECE] in windows:
            for j in range(i, i + _MIN_SECRET_PIECE):
                masked[j] = True
    if not any(masked):
        return text
    out, i = [], 0
    while i < len(text):
        if masked[i]:
            while i < len(text) and masked[i]:
                i += 1
            out.append("[redacted]")
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def detail_of(body_text: str) -> str:
    """The human part of an error body: FastAPI's {"detail": ...}, or the text itself."""
    try:
        body = json.loads(body_text)
    except (ValueError, RecursionError):  # (an error page nested too deep to read: its text, as it is)
        return body_text.strip()
    detail = body.get("detail", body) if isinstance(body, dict) else body
    return (detail if isinstance(detail, str) else json.dumps(detail)).strip()


def redirect_error(what: str, status: int, location: str | None, *, where: str) -> LettaHTTPError:
    """A 3xx answer. Neither client follows redirects: a redirect to another host (or port) would carry the
    ``Authorization: Bearer <LETTA_API_KEY>`` header there."""

    to = display_url(location)[:200] if location else "no Location"
    return LettaHTTPError(f"{what}: HTTP {status} redirect to {to}",
                          f"subconscious never follows redirects (the API key would go along); set LETTA_BASE_URL "
                          f"to the address the server at {where} redirects to", status=status)


def error_for_status(what: str, status: int, detail: str, *, where: str, key_set: bool) -> LettaHTTPError:
    """The LettaHTTPError for an HTTP error status (``detail`` must already be redacted)."""
    what = f"{what}: HTTP {status}"
    if status in (401, 403):
        return LettaAuthError(what, f"check LETTA_API_KEY: it is {'set but refused' if key_set else 'not set'} "
                                    f"by {where}", status=status, detail=detail)
    if status == 404:
        return LettaNotFoundError(what, f"check the id and that LETTA_BASE_URL ({where}) is the server that "
                                        "holds it", status=status, detail=detail)
    if status == 409:
        return LettaConflictError(what, "another request is still running on this conversation; retry when it "
                                        "has finished", status=status, detail=detail)
    if status >= 500:
        return LettaServerError(what, "the Letta server or its model provider failed; see the server log, "
                                      "retry later", status=status, detail=detail)
    return LettaHTTPError(what, "the server rejected the request; this is likely a subconscious bug or an "
                                "incompatible server version", status=status, detail=detail)
