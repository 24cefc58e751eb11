"""``loads_state``: every way bytes can fail to be JSON is one exception, decided before the parser can
recurse; the depth scan is exact where it matters (property tests against a real nesting count)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from subconscious.state.jsontext import MAX_DEPTH, UNCOUNTED, Unparseable, depth_bound, loads_state
from tests.harness.sizes import examples


@pytest.mark.parametrize("raw,reason", [
    (b"[" * 200_000 + b"]" * 200_000, "nested deeper than 512"),
    (b'{"a":' * 200_000 + b"1" + b"}" * 200_000, "nested deeper than 512"),
    (b"[" * 200_000, "nested deeper than 512"),  # never closed: the parser would recurse all the same
    (b"9" * 5000, "4300 digits"),
    (b'{"n": -' + b"1" * 5000 + b"}", "4300 digits"),
    (b"NaN", "NaN is not JSON"),
    (b'{"a": -Infinity}', "-Infinity is not JSON"),
    (b'"\\ud800"', "lone UTF-16 surrogate"),
    (b"\xff\xfe{}", "not UTF-8"),
    (b"", "Expecting value"),
    (b"[1, 2", "Expecting"),
])
def test_every_failure_is_unparseable(raw, reason):
    with pytest.raises(Unparseable, match=reason):
        loads_state(raw)


def test_a_bom_is_accepted_and_pairs_of_surrogates_are_fine():
    assert loads_state(b'\xef\xbb\xbf{"sessionId": "s"}') == {"sessionId": "s"}
    assert loads_state(b'"\\ud83d\\ude00"') == "\U0001F600"
    assert loads_state('{"a": "é"}') == {"a": "é"}


def test_the_limit_is_exact():
    assert loads_state(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH) is not None
    with pytest.raises(Unparseable, match="nested"):
        loads_state(b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1))


def test_brackets_inside_strings_do_not_count():
    raw = json.dumps({"a": "[" * 10_000, "b\\": ['\\"{{{', "]]]"]}).encode()
    assert depth_bound(raw) <= MAX_DEPTH and loads_state(raw)["a"] == "[" * 10_000


def test_large_files_stay_cheap_and_many_deep_brackets_are_refused():
    view = json.dumps({f"s{i}": {"conversationId": f"c{i}", "hlc": "1:0"} for i in range(50_000)}).encode()
    assert depth_bound(view) <= 4
    assert depth_bound((b"[" * 500 + b"]" * 500) * 3000) == UNCOUNTED  # 3 M brackets, 500 deep


def _depth(value) -> int:
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    return 0


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.sampled_from('ab[]{}"\\\n é\u2028')),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(alphabet='k[]{}"\\', max_size=3), inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=examples(400))
@given(json_values, st.integers(1, 12), st.booleans())
def test_depth_bound_is_over_the_limit_exactly_when_the_depth_is(value, limit, ascii_only):
    raw = json.dumps(value, ensure_ascii=ascii_only).encode()
    depth = _depth(value)
    assert (depth_bound(raw, limit) > limit) == (depth > limit)
    if depth <= MAX_DEPTH:
        assert loads_state(raw) == value


@settings(max_examples=examples(400))
@given(st.binary(max_size=300) | st.text(alphabet='[]{}"\\:,0123456789 aeNIn-.\ufeff', max_size=300).map(str.encode))
def test_anything_is_a_value_or_unparseable(raw):
    try:
        loads_state(raw)
    except Unparseable:
        pass
