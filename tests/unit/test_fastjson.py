"""subconscious.base.fastjson is json.loads/json.dumps for the hot path without importing json: the same value or
the same error as json for every input, and no json or re in the process while it works."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from subconscious.base import fastjson
from tests.harness.sizes import examples

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
                      max_leaves=40)


def outcome(fn, data):
    """What a call gives, comparable across json and fastjson: the value encoded, or the error's type and text."""
    try:
        return "ok", json.dumps(fn(data))
    except (ValueError, RecursionError, TypeError) as exc:
        return type(exc).__name__, str(exc)


@settings(max_examples=examples(1000))
@given(values)
def test_dumps_is_json_dumps(value):
    assert fastjson.dumps(value) == json.dumps(value)
    assert fastjson.dumps(value, separators=(",", ":")) == json.dumps(value, separators=(",", ":"))


@settings(max_examples=examples(1000))
@given(values, st.sampled_from(["", " ", "\n\t", "\r\n ", "\f", "\v", "\u00a0", "\x1c", " \u2028"]))
def test_loads_gives_json_loads_value(value, pad):
    text = pad + json.dumps(value) + pad
    assert outcome(fastjson.loads, text) == outcome(json.loads, text)
    assert outcome(fastjson.loads, text.encode()) == outcome(json.loads, text.encode())


def mangled():
    """Near-JSON: a document with a piece cut, doubled or replaced, BOMs, NULs, other encodings, odd bytes."""
    doc = values.map(json.dumps)
    cut = st.tuples(doc, st.integers(0, 60), st.integers(0, 60)).map(lambda t: t[0][:t[1]] + t[0][t[1] + t[2]:])
    junk = st.tuples(doc, st.sampled_from(["x", "}", "]", ",", "\"", "\\", "NaN", "1e999", "\x00", "\ufeff", "//"]),
                     st.integers(0, 60)).map(lambda t: t[0][:t[2]] + t[1] + t[0][t[2]:])
    texts = cut | junk | st.text(max_size=40) | doc.map(lambda d: d + " " + d)
    encoded = st.tuples(texts, st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-32", "latin-1"])).map(
        lambda t: t[0].encode(t[1], "surrogatepass") if t[1] != "latin-1" else t[0].encode("latin-1", "replace"))
    return texts | encoded | st.binary(max_size=40)


@settings(max_examples=examples(2000))
@given(mangled())
def test_anything_else_fails_as_json_fails(data):
    assert outcome(fastjson.loads, data) == outcome(json.loads, data)


def test_deep_nesting_and_huge_documents_behave_as_json():
    for text in ("[" * 100_000 + "]" * 100_000, "{\"a\": " * 50_000 + "1" + "}" * 50_000,
                 json.dumps(["x" * 1000] * 5000)):
        assert outcome(fastjson.loads, text) == outcome(json.loads, text)
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    assert outcome(fastjson.dumps, deep)[0] == outcome(json.dumps, deep)[0] == "RecursionError"
    loop: list = []
    loop.append(loop)
    assert outcome(fastjson.dumps, loop) == outcome(json.dumps, loop)
    assert outcome(fastjson.dumps, {"a": object()})[0] == "TypeError"


def test_it_imports_neither_json_nor_re():
    # the interpreter may load re at its start (a site .pth here does): only what fastjson adds counts
    code = ("import sys; before = set(sys.modules); from subconscious.base import fastjson as f; v = f.loads(b'{\"a\": [1, 2.5, null, \"\\\\u00e9\"]}');"
            "s = f.dumps(v); assert v == {'a': [1, 2.5, None, 'é']} and s.startswith('{\"a\"'), s;"
            "print(sorted(m for m in ('json', 're', 'json.decoder', 'enum') if m in set(sys.modules) - before))")
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(root)}, cwd="/")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
