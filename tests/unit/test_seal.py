"""Sealed values (subconscious.state.seal): round trip, wrong key, tampering, moved values."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from subconscious.state.seal import (
    ALG,
    FORMAT,
    Key,
    SealError,
    envelope_key_id,
    is_envelope,
    is_key_id,
    key_id_of,
    open_envelope,
    seal,
)
from tests.harness.sizes import examples

KEY = Key(bytes(range(32)))
OTHER = Key(bytes(range(1, 33)))
RING = {KEY.id: KEY}

any_text = st.text()  # includes lone surrogates, NUL, astral characters
labels = st.text(max_size=40)
sessions = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{0,40}", fullmatch=True)


@settings(max_examples=examples(300))
@given(any_text, labels, sessions)
def test_round_trip_over_any_text_label_and_session(text, label, sid):
    env = seal(KEY, text, session_id=sid, label=label)
    # the envelope survives JSON (it is stored in session-<id>.json)
    env = json.loads(json.dumps(env))
    assert open_envelope(RING, env, session_id=sid, label=label) == text


@settings(max_examples=examples(100))
@given(any_text, labels, labels, sessions)
def test_a_value_relabelled_does_not_open(text, label, other_label, sid):
    env = seal(KEY, text, session_id=sid, label=label)
    if other_label != label:
        with pytest.raises(SealError) as exc:
            open_envelope(RING, env, session_id=sid, label=other_label)
        assert exc.value.reason == "does-not-open"


@settings(max_examples=examples(100))
@given(any_text, labels, sessions, sessions)
def test_a_value_moved_to_another_session_does_not_open(text, label, sid, other_sid):
    env = seal(KEY, text, session_id=sid, label=label)
    if other_sid != sid:
        with pytest.raises(SealError) as exc:
            open_envelope(RING, env, session_id=other_sid, label=label)
        assert exc.value.reason == "does-not-open"


def test_wrong_key_does_not_open_and_says_which_key_is_missing():
    env = seal(KEY, "guidance: prefers tabs", session_id="s1", label="guidance")
    with pytest.raises(SealError) as exc:
        open_envelope({OTHER.id: OTHER}, env, session_id="s1", label="guidance")
    assert exc.value.reason == "unknown-key" and exc.value.key_id == KEY.id
    assert KEY.id in str(exc.value)
    # a ring that maps the id to the wrong key (a forged id) fails authentication
    with pytest.raises(SealError) as exc:
        open_envelope({KEY.id: OTHER}, env, session_id="s1", label="guidance")
    assert exc.value.reason == "does-not-open"


def _flip(b64: str, index: int) -> str:
    raw = bytearray(base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)))
    raw[index % len(raw)] ^= 0x01
    return base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()


@settings(max_examples=examples(200))
@given(st.text(min_size=0, max_size=50), st.sampled_from(["ct", "nonce"]), st.integers(0, 200))
def test_any_flipped_bit_in_ciphertext_tag_or_nonce_is_detected(text, field, index):
    env = seal(KEY, text, session_id="s1", label="guidance")
    bad = dict(env, **{field: _flip(env[field], index)})
    with pytest.raises(SealError) as exc:
        open_envelope(RING, bad, session_id="s1", label="guidance")
    assert exc.value.reason == "does-not-open"


def test_the_key_id_is_bound_to_the_envelope():
    """Relabelling the key id (to another key the reader holds) does not open."""
    env = seal(KEY, "x", session_id="s1", label="guidance")
    ring = {KEY.id: KEY, OTHER.id: OTHER}
    with pytest.raises(SealError):
        open_envelope(ring, dict(env, kid=OTHER.id), session_id="s1", label="guidance")


def test_truncated_and_extended_ciphertexts_fail():
    env = seal(KEY, "some memory", session_id="s1", label="guidance")
    for ct in (env["ct"][:-4], env["ct"] + "AAAA", env["ct"][:10]):
        with pytest.raises(SealError):
            open_envelope(RING, dict(env, ct=ct), session_id="s1", label="guidance")


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"sealed": 3}, "unsupported"),
        ({"v": 2}, "does-not-open"),
        ({"v": -1}, "malformed"),
        ({"sealed": True}, "unsupported"),
        ({"alg": "C20P1305"}, "unsupported"),
        ({"kid": "not-a-key-id"}, "malformed"),
        ({"nonce": "!!!"}, "malformed"),
        ({"nonce": "AAAA"}, "malformed"),
        ({"ct": 5}, "malformed"),
        ({"extra": 1}, "malformed"),
    ],
)
def test_envelopes_we_do_not_read_raise_the_one_error_type(change, reason):
    env = dict(seal(KEY, "x", session_id="s1", label="l"), **change)
    with pytest.raises(SealError) as exc:
        open_envelope(RING, env, session_id="s1", label="l")
    assert exc.value.reason == reason


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=10,
)


@settings(max_examples=examples(300))
@given(json_values, st.fixed_dictionaries({}, optional={
    "sealed": st.sampled_from([1, 2, "1", None]), "alg": st.sampled_from([ALG, "x", 1]),
    "kid": st.sampled_from([KEY.id, "k" + "0" * 16, "", 3]),
    "nonce": st.text(max_size=20), "ct": st.text(max_size=40)}))
def test_arbitrary_json_never_raises_anything_but_sealerror(value, fields):
    for candidate in (value, {"sealed": 1, **fields}):
        try:
            open_envelope(RING, candidate, session_id="s1", label="l")
        except SealError:
            pass


def test_envelope_shape_is_versioned_and_names_the_key():
    env = seal(KEY, "x", session_id="s1", label="l")
    assert set(env) == {"sealed", "alg", "kid", "v", "nonce", "ct"}
    assert env["sealed"] == FORMAT and env["alg"] == ALG and env["kid"] == KEY.id
    assert is_envelope(env) and envelope_key_id(env) == KEY.id
    assert not is_envelope("plain") and envelope_key_id({"sealed": 1, "kid": "../x"}) is None


def test_each_seal_has_a_fresh_nonce_and_hides_the_plaintext():
    text = "the user's private project notes: ACME merger"
    a = seal(KEY, text, session_id="s1", label="l")
    b = seal(KEY, text, session_id="s1", label="l")
    assert a["nonce"] != b["nonce"] and a["ct"] != b["ct"]
    dumped = json.dumps([a, b])
    assert "ACME" not in dumped and "private" not in dumped


def test_key_ids_are_deterministic_distinct_and_reveal_nothing_of_the_key():
    assert Key(bytes(range(32))).id == KEY.id == key_id_of(bytes(range(32)))
    assert KEY.id != OTHER.id and is_key_id(KEY.id)
    assert len({Key.generate().id for _ in range(200)}) == 200
    secret_hex = KEY.secret.hex()
    assert KEY.id[1:] not in secret_hex
    assert secret_hex not in repr(KEY) and secret_hex not in str(KEY) and KEY.id in repr(KEY)


def test_keys_must_be_256_bits_and_seal_takes_only_text():
    with pytest.raises(ValueError):
        Key(b"short")
    with pytest.raises(TypeError):
        seal(KEY, b"bytes", session_id="s", label="l")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        seal(b"k" * 32, "x", session_id="s", label="l")  # type: ignore[arg-type]


def test_error_messages_hold_no_plaintext_or_key():
    text = "TOPSECRET-value-1234"
    env = seal(KEY, text, session_id="s1", label="l")
    messages = []
    for ring, sid, label in (({}, "s1", "l"), (RING, "s2", "l"), ({KEY.id: OTHER}, "s1", "l")):
        with pytest.raises(SealError) as exc:
            open_envelope(ring, env, session_id=sid, label=label)
        messages.append(str(exc.value))
    blob = "\n".join(messages)
    assert "TOPSECRET" not in blob and KEY.secret.hex() not in blob
    assert base64.urlsafe_b64encode(KEY.secret).decode().rstrip("=") not in blob
