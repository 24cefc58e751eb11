"""Which requests the viewer answers (pure: tested with hypothesis in tests/unit/test_viewer_guard.py).

Every request must carry this run's token, in the ``token`` query parameter or the ``X-Subconscious-Token``
header; anything else is refused with 403, also for the page's own CSS and JS. On top of that:

- the Host header must name 127.0.0.1 or localhost on the server's port: a DNS-rebinding page (evil.example
  resolving to 127.0.0.1) reaches the socket but not the answers;
- a change (POST) must carry the token in the header, not in the URL, and a JSON body: a form on another
  site cannot set either, and a URL with the token in it (history, a pasted link) cannot edit anything.

One more way in, for ``subconscious ui`` itself: ``POST /open`` with the token in a form body
(:func:`judge_open`). The command opens a 0600 file that posts that form, never the URL: the token is in no
process's arguments (``/proc/*/cmdline`` is readable by every local user) and in no history entry.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Mapping
from urllib.parse import parse_qs, urlsplit

TOKEN_HEADER = "x-subconscious-token"
OPEN_PATH = "/open"
OPEN_FORM_MAX = 4096  # bytes of the form POST /open reads at most
READ_METHODS = frozenset({"GET", "HEAD"})
WRITE_METHODS = frozenset({"POST"})


@dataclass(frozen=True)
class Verdict:
    status: int  # 200 = let in; otherwise the status to answer with
    reason: str

    @property
    def allowed(self) -> bool:
        return self.status == 200


def _same(given: str | None, token: str) -> bool:
    if not given or not token:
        return False
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), token.encode("utf-8"))


def _host_ok(host: str | None, port: int) -> bool:
    if not host:
        return False
    name, sep, given_port = host.strip().lower().rpartition(":")
    if not sep or not given_port.isdigit() or int(given_port) != port:
        return False
    return name in ("127.0.0.1", "localhost")


def query_token(target: str) -> str | None:
    """The ``token`` query parameter of a request target (the first one), or None."""
    try:
        values = parse_qs(urlsplit(target).query, keep_blank_values=True).get("token")
    except ValueError:
        return None
    return values[0] if values else None


def judge(method: str, target: str, headers: Mapping[str, str], *, token: str, port: int) -> Verdict:
    """Let a request in (200) or say how to refuse it. ``headers`` keys are lower case."""
    if not _host_ok(headers.get("host"), port):
        return Verdict(403, "the Host header must be 127.0.0.1 or localhost on this port")
    header_token = headers.get(TOKEN_HEADER)
    if not (_same(header_token, token) or _same(query_token(target), token)):
        return Verdict(403, "this run's token is missing or wrong (open the URL `subconscious ui` printed)")
    if method in READ_METHODS:
        return Verdict(200, "ok")
    if method in WRITE_METHODS:
        if not _same(header_token, token):
            return Verdict(403, f"a change needs this run's token in the {TOKEN_HEADER} header, not in the URL")
        ctype = (headers.get("content-type") or "").split(";")[0].strip().lower()
        if ctype != "application/json":
            return Verdict(415, "a change is a JSON body (Content-Type: application/json)")
        return Verdict(200, "ok")
    return Verdict(405, f"method {method} is not served")


def judge_open(headers: Mapping[str, str], form_token: str | None, *, token: str, port: int) -> Verdict:
    """``POST /open`` (the launcher file's form): the Host as for every request, this run's token in the
    form. It shows the page and changes nothing, so a form from anywhere may send it (a file's Origin is
    ``null``); only the token holder gets in."""
    if not _host_ok(headers.get("host"), port):
        return Verdict(403, "the Host header must be 127.0.0.1 or localhost on this port")
    if not _same(form_token, token):
        return Verdict(403, "this run's token is missing or wrong (open the file `subconscious ui` printed)")
    return Verdict(200, "ok")
