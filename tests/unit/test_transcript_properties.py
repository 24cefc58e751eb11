"""Property tests for subconscious.delivery.transcript: cursor laws, XML safety, redaction."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from subconscious.privacy.redact import _code_or_prose_value
from subconscious.delivery.transcript import (REDACTED, build_update, complete_lines, find_secrets, parse_line, redact,
                                     xml_escape)
from tests.harness.sizes import examples

text = st.text(st.characters(codec="utf-8"), max_size=60)
ids = st.sampled_from(["t1", "t2", "t3", "toolu_a"])


def _line(kind, content, **extra):
    role = "assistant" if kind == "assistant" else "user"
    return json.dumps({"type": kind, "message": {"role": role, "content": content}, **extra})


transcript_line = st.one_of(
    text.map(lambda t: _line("user", t)),
    st.lists(st.one_of(
        st.builds(lambda t: {"type": "text", "text": t}, text),
        st.builds(lambda i, t, e: {"type": "tool_result", "tool_use_id": i, "content": t, "is_error": e},
                  ids, text, st.booleans())), max_size=3).map(lambda c: _line("user", c)),
    st.lists(st.one_of(
        st.builds(lambda t: {"type": "text", "text": t}, text),
        st.builds(lambda t: {"type": "thinking", "thinking": t, "signature": "s"}, text),
        st.builds(lambda i, n, t: {"type": "tool_use", "id": i, "name": n, "input": {"command": t, "file_path": t}},
                  ids, st.sampled_from(["Bash", "Read", "Other"]), text)), max_size=3).map(
        lambda c: _line("assistant", c)),
    text.map(lambda t: json.dumps({"type": "summary", "summary": t})),
    st.sampled_from([json.dumps({"type": "system", "subtype": "stop_hook_summary"}),
                     json.dumps({"type": "attachment", "attachment": {"type": "hook_success"}}),
                     json.dumps({"type": "file-history-snapshot"}), ""]),
    text.filter(lambda t: "\n" not in t),  # garbage, usually invalid JSON
)
transcripts = st.lists(transcript_line, max_size=25)


@given(st.text())
def test_parse_line_never_raises(line):
    assert parse_line(line).status in ("entries", "skipped", "blank", "invalid")


@given(transcripts, st.data())
def test_processing_in_steps_equals_processing_at_once(lines, data):
    once = build_update(lines, -1, "s")
    assert once.cursor == len(lines) - 1
    cuts = sorted(data.draw(st.lists(st.integers(0, len(lines)), max_size=4)))
    cursor, msgs, invalid = -1, [], []
    for n in cuts + [len(lines)]:
        u = build_update(lines[:n], cursor, "s")
        assert u.cursor == max(cursor, n - 1)
        msgs += u.messages
        invalid += u.invalid_lines
        cursor = u.cursor
    assert msgs == list(once.messages)
    assert invalid == list(once.invalid_lines)
    assert invalid == [i for i, line in enumerate(lines) if parse_line(line).status == "invalid"]


@given(transcripts, st.integers(1, 400))
def test_max_chars_chunks_lose_and_repeat_nothing(lines, room):
    # the smallest bound an update can hold (its envelope at the longest line numbers, and MIN_ROOM of text;
    # a smaller one is refused: test_delivery_size_bound), plus 1-400 characters of room to chunk by
    from subconscious.delivery.transcript import MIN_ROOM, render_update

    limit = len(render_update("s", (), (len(lines), len(lines) + 1), "k" * 20, None)) + MIN_ROOM + room
    cursor, msgs = -1, []
    for _ in range(len(lines) + 1):
        u = build_update(lines, cursor, "s", max_chars=limit)
        assert u.cursor >= cursor
        msgs += u.messages
        if not u.more:
            break
        assert u.cursor > cursor  # progress
        cursor = u.cursor
    assert msgs == list(build_update(lines, -1, "s").messages)


@given(transcripts, text)
def test_payload_is_well_formed_xml_whose_text_round_trips(lines, session_id):
    u = build_update(lines, -1, session_id, redact_secrets=False)
    assume(u.payload is not None)
    root = ET.fromstring(u.payload)
    norm = lambda s: xml_escape(s).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    assert (root.findtext("session_id") or "") == norm(session_id)
    got = [(m.get("role"), (m.text or "")[1:-1]) for m in root.find("transcript")]
    assert got == [(m.role, norm(m.text)) for m in u.messages]


@given(st.text())
def test_complete_lines_rejoin(data):
    lines = complete_lines(data)
    joined = "".join(line + "\n" for line in lines)
    assert data.startswith(joined) and "\n" not in data[len(joined):]


# --------------------------------------------------------------------------- redaction

secret_text = st.text(st.sampled_from("abcXYZ019 =:_-./@\n\"'skAKIAghp-BEGIN PRIVATE KEY-----bearer"), max_size=120)
alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
upper = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

secrets = st.one_of(
    st.text(st.sampled_from(alnum + "-_"), min_size=16, max_size=60).map(lambda s: "sk-ant-api03-" + s),
    st.text(st.sampled_from(alnum), min_size=20, max_size=40).map(lambda s: "sk-proj-" + s),
    st.text(st.sampled_from(upper), min_size=16, max_size=16).map(lambda s: "AKIA" + s),
    st.text(st.sampled_from(alnum), min_size=36, max_size=40).map(lambda s: "ghp_" + s),
    st.text(st.sampled_from(alnum + "-"), min_size=10, max_size=30).map(lambda s: "xoxb-" + s),
    st.text(st.sampled_from(alnum + "+/"), min_size=40, max_size=200).map(
        lambda s: "-----BEGIN RSA PRIVATE KEY-----\n%s\n-----END RSA PRIVATE KEY-----" % s),
)
# a password: not a plain value, and not shaped like code or prose, which stays readable on purpose
# (``password = args.password``, ``secret: bytes``, ``key = derive(x)``, ``PIECE = 6``; see redact._code_or_prose)
value = st.text(st.sampled_from(alnum + "!#$%()*+-./?@[]^_{|}~"), min_size=1, max_size=30).filter(
    lambda v: v.lower() not in ("true", "false", "null", "none", "yes", "no", "0", "1")
    and not _code_or_prose_value(v))
prose = st.text(st.characters(codec="utf-8"), max_size=40)
sep = st.sampled_from([" ", "\n", "\t", "; ", " (", "\""])


@given(st.one_of(st.text(), secret_text))
@example("password=[REDACTED]]")
@example("sk-" + "a" * 20 + "\nBearer " + "b" * 20)
@example("-----BEGIN PRIVATE KEY-----\nabc")
def test_redact_is_idempotent_and_leaves_no_secret(s):
    once = redact(s)
    assert redact(once) == once
    assert find_secrets(once) == []


@given(prose, sep, secrets, sep, prose)
def test_embedded_secrets_vanish(before, s1, secret, s2, after):
    out = redact(before + s1 + secret + s2 + after)
    assert secret not in out
    assert REDACTED in out


@given(prose, st.sampled_from(["password", "DB_PASSWORD", "passwd", "client_secret", "Secret"]),
       st.sampled_from(["=", ": ", " = ", "\": \""]), value, sep, prose)
def test_password_values_vanish(before, name, eq, val, s2, after):
    out = redact(before + " " + name + eq + val + s2 + after)
    assert name + eq + REDACTED in out
    assume(val not in before + s2 + after and val not in " " + name + eq + REDACTED)
    assert val not in out


# Words, not key material: a run of 40+ letters and digits mixing cases with high entropy is a key body by
# design (a private key read from an offset has no BEGIN line), so plain text here has words under 40.
words = st.lists(st.text(st.sampled_from(alnum), min_size=1, max_size=39), max_size=4000)


@settings(max_examples=examples(50), deadline=None)
@given(words, st.lists(st.sampled_from([" ", "\n"]), min_size=1, max_size=50))
def test_plain_text_is_untouched(ws, seps):
    s = "".join(w + seps[i % len(seps)] for i, w in enumerate(ws))
    assume(not any(k in s.lower() for k in ("earer", "akia", "asia", "aiza", "abia", "acca", "aroa", "aida",
                                             "anpa", "agpa", "apka", "gr1348941")))
    assert redact(s) == s


@settings(max_examples=examples(100), deadline=None)
@given(st.binary(min_size=30, max_size=400), prose, sep)
def test_key_material_vanishes_without_any_header(raw, before, s1):
    import base64

    body = base64.b64encode(raw).decode()
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    from subconscious.privacy.redact import looks_random
    assume(all(looks_random(line) for line in lines if len(line) >= 40) and len(lines[0]) >= 40)
    out = redact(before + s1 + "\n".join(lines))
    for line in lines:
        if len(line.rstrip("=")) >= 4:
            assert line not in out


def test_common_non_secrets_survive():
    for s in ("max_tokens=4096", '"input_tokens": 12598', "the token budget is tight", "password reset flow",
              "commit a94a8fe5ccb19ba61c4c0873d391e987982fbbd3", "session 6dcb70d6-e3b9-4d78-b4fd-5f4329d14ed4",
              "tokenizer: bert-base-uncased", "secret: true", "Run <make test> & ninja", "ssh://git@host/repo"):
        assert redact(s) == s, s
