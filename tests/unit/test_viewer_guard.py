"""Which requests the viewer lets in (subconscious/viewer/guard.py): nothing without this run's token,
nothing for a foreign Host (DNS rebinding), no change with the token only in the URL."""

from __future__ import annotations

from urllib.parse import quote

from hypothesis import given, strategies as st

from subconscious.viewer.guard import TOKEN_HEADER, judge
from subconscious.viewer.server import new_token

TOKEN = new_token()
PORT = 48123
HOST = {"host": f"127.0.0.1:{PORT}"}
paths = st.sampled_from(["/", "/static/app.js", "/api/memory", "/api/health", "/api/blocks/human", "/x"])
methods = st.sampled_from(["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"])
tokens = st.one_of(st.none(), st.text(max_size=60), st.just(TOKEN[:-1]), st.just(TOKEN + "x"), st.just(TOKEN.upper()))


@given(methods, paths, tokens, tokens)
def test_no_token_no_answer(method, path, in_header, in_query):
    """Whatever the method and path, a request that does not carry the exact token is refused with 403."""
    headers = dict(HOST, **({TOKEN_HEADER: in_header} if in_header is not None else {}),
                   **{"content-type": "application/json"})
    target = path + (f"?token={quote(in_query)}" if in_query is not None else "")
    if TOKEN in (in_header, in_query):
        return
    verdict = judge(method, target, headers, token=TOKEN, port=PORT)
    assert verdict.status == 403 and not verdict.allowed


@given(paths, st.booleans(), st.sampled_from([f"127.0.0.1:{PORT}", f"localhost:{PORT}", f"LOCALHOST:{PORT}"]))
def test_reads_with_the_token_are_let_in(path, in_header, host):
    headers = {"host": host, **({TOKEN_HEADER: TOKEN} if in_header else {})}
    target = path if in_header else f"{path}?a=1&token={TOKEN}"
    assert judge("GET", target, headers, token=TOKEN, port=PORT).allowed


@given(st.sampled_from(["evil.example:%d" % PORT, "127.0.0.1", f"127.0.0.1:{PORT + 1}", "", f"127.0.0.2:{PORT}",
                        f"127.0.0.1.evil.example:{PORT}", f"[::1]:{PORT}x"]))
def test_foreign_host_refused_even_with_the_token(host):
    headers = {"host": host, TOKEN_HEADER: TOKEN}
    assert judge("GET", f"/?token={TOKEN}", headers, token=TOKEN, port=PORT).status == 403


def test_a_change_needs_the_header_and_json():
    url_only = judge("POST", f"/api/blocks/human?token={TOKEN}", dict(HOST, **{"content-type": "application/json"}),
                     token=TOKEN, port=PORT)
    assert url_only.status == 403  # a link holding the token cannot edit
    form = judge("POST", "/api/blocks/human", dict(HOST, **{TOKEN_HEADER: TOKEN,
                                                            "content-type": "application/x-www-form-urlencoded"}),
                 token=TOKEN, port=PORT)
    assert form.status == 415
    ok = judge("POST", "/api/blocks/human", dict(HOST, **{TOKEN_HEADER: TOKEN,
                                                          "content-type": "application/json; charset=utf-8"}),
               token=TOKEN, port=PORT)
    assert ok.allowed
    assert judge("DELETE", "/api/blocks/human", dict(HOST, **{TOKEN_HEADER: TOKEN}), token=TOKEN, port=PORT).status == 405
