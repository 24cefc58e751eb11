"""A copy of the view read by the lines it does not share with the view (state/viewlines.py) says
exactly what the whole parse says, or the reader falls back to the whole parse."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from subconscious.state.jsontext import Unparseable, loads_state
from subconscious.state.textforms import dumps_canonical
from subconscious.state.conflicts.viewlines import member_lines, read_against
from tests.harness.sizes import examples


def entry(i: int, host: str = "h1") -> dict:
    return {"agentId": "a", "conversationId": f"c{i}", "hlc": f"{1000 + i}:0", "host": host}


VIEW = {f"s{i}": entry(i) for i in range(8)}
VIEW_RAW = dumps_canonical(VIEW, expand=1).encode()
LINES = member_lines(VIEW_RAW, loads_state(VIEW_RAW))


def rebuilt(raw: bytes) -> dict | None:
    """What the reader makes of ``raw``: the view's entries on lines ``raw`` shares, then the rest."""
    rest = read_against(raw, LINES)
    if rest is None:
        return None
    shared = raw[2:-3].split(b",\n")
    out = {LINES.by_line[line]: VIEW[LINES.by_line[line]] for line in shared if line in LINES.by_line}
    return out | rest


def whole(raw: bytes):
    try:
        return loads_state(raw)
    except Unparseable:
        return "unparseable"


def test_the_view_is_one_entry_per_line():
    assert LINES is not None and len(LINES.by_line) == len(VIEW)
    assert member_lines(b'{\n  "a": {"x": 1},\n  "a": {"x": 2}\n}\n', {"a": {"x": 2}}) is None  # a key twice
    assert member_lines(json.dumps(VIEW, indent=2).encode(), VIEW) is None  # upstream's layout


changes = st.lists(st.tuples(st.sampled_from(["s1", "s3", "s7", "new", "s1"]), st.integers(0, 3)), max_size=4)


@settings(max_examples=examples(200), deadline=None)
@given(changes, st.lists(st.sampled_from(list(VIEW)), max_size=3))
def test_a_copy_in_our_layout_reads_as_the_whole_parse(changed, dropped):
    copy = dict(VIEW)
    for key in dropped:
        copy.pop(key, None)
    for key, n in changed:
        copy[key] = entry(100 + n, "h2")
    raw = dumps_canonical(copy, expand=1).encode() if copy else b"{}\n"
    got = rebuilt(raw)
    assert got is None or got == whole(raw)
    if copy:
        assert got == copy  # our own layout always takes the short way


@pytest.mark.parametrize("raw", [
    # a line of the view nested inside another entry, or inside an array: not the view's entry at all
    b'{\n  "x": {"in": 1,\n' + VIEW_RAW[2:-3].split(b",\n")[1] + b',\n  "z": 2}\n}\n',
    b'{\n  "x": [1,\n' + VIEW_RAW[2:-3].split(b",\n")[1] + b',\n  2]\n}\n',
    # a key given on a shared line and again on a line of its own (the later one wins)
    VIEW_RAW[:-3] + b',\n  "s1": {"agentId":"a","conversationId":"other","hlc":"1:0","host":"h9"}\n}\n',
    b'{\n  "s1": {"agentId":"a","conversationId":"other","hlc":"1:0","host":"h9"},\n' + VIEW_RAW[2:],
    # the same shared line twice, a missing comma, a trailing comma, a BOM, NaN, escapes in strings
    VIEW_RAW[:-3] + b",\n" + VIEW_RAW[2:-3].split(b",\n")[0] + b"\n}\n",
    VIEW_RAW.replace(b"},\n", b"}\n", 1),
    VIEW_RAW[:-3] + b",\n}\n",
    b"\xef\xbb\xbf" + VIEW_RAW,
    VIEW_RAW[:-3] + b',\n  "n": {"x": NaN}\n}\n',
    VIEW_RAW[:-3] + b',\n  "q\\"": {"x": "a\\\\\\"},\\n"}\n}\n',
    VIEW_RAW[:-3] + b',\n  "e": {"x": "\\ud800"}\n}\n',
    VIEW_RAW[:-3] + b',\n  "u": {"x": "\xff"}\n}\n',
    b"{\n}\n",
])
def test_anything_else_is_the_whole_parse_or_falls_back_to_it(raw):
    got = rebuilt(raw)
    assert got is None or got == whole(raw)


# ---------------------------------------------------------------- rendering with the view's lines

values = st.one_of(
    st.builds(entry, st.integers(0, 12), st.sampled_from(["h1", "h2", "hé", 'h"q'])),
    st.just({"deleted": True, "hlc": "5:0", "host": "h1"}),
    st.just({"conversationId": "c1", "hlc": "1001:0", "host": "h1"}),  # no agentId
    st.just({"agentId": "a", "conversationId": "c1", "hlc": "1001:0", "host": "h1", "x": 1.0}),
    st.just({"agentId": "a", "conversationId": "c1", "hlc": "1001:0", "host": 1}),  # not a string
    st.just({"agentId": "a", "conversationId": "c1\n", "hlc": "1001:0", "host": "h1"}),
)
maps = st.dictionaries(st.sampled_from([*VIEW, "new", "é", "a b"]), values, max_size=10)


@settings(max_examples=examples(300), deadline=None)
@given(maps, maps)
def test_rendering_with_the_views_lines_is_the_canonical_rendering(old, new):
    """Whatever the view held (canonical or not) and whatever is written, the bytes are dumps_canonical's."""
    from subconscious.state.conflicts.viewlines import render_shard, render_view

    raw = dumps_canonical(old, expand=1).encode()
    lines = member_lines(raw, loads_state(raw)) if old else None
    assert render_view(new, lines) == dumps_canonical(new, expand=1).encode()
    shard = {"clock": "9:0", "conversations": new, "format": 1, "host": "h1", "name": "n",
             "settings": {"conversations": {"value": {}, "hlc": "1:0", "host": "h1"}}, "written": 1}
    assert render_shard(shard, lines) == dumps_canonical(shard, expand=2).encode()
    if lines is not None and lines.canonical:  # every entry was of our shape: nothing else is canonical
        assert all(v == entry(int(v["conversationId"][1:]), v["host"]) for v in old.values())


def test_only_our_own_layout_and_shape_is_canonical():
    assert LINES.canonical
    odd = dict(VIEW, s1={"agentId": "a", "conversationId": "c1", "hlc": "01:0", "host": "h\\1"})
    raw = dumps_canonical(odd, expand=1).encode()
    assert not member_lines(raw, loads_state(raw)).canonical  # an escaped string
    assert member_lines(raw, loads_state(raw), canonical_only=True) is None
    spaced = VIEW_RAW.replace(b'"agentId":', b'"agentId": ', 1)
    assert not member_lines(spaced, loads_state(spaced)).canonical


# ---------------------------------------------------------------- a shard read by the view's lines

SHARD = {"clock": "9:0", "conversations": {k: VIEW[k] for k in ("s1", "s3", "s4")}, "format": 1, "host": "h1",
         "name": "n", "settings": {"conversations": {"value": {}, "hlc": "1:0", "host": "h1"}}, "written": 1}
SHARD_RAW = dumps_canonical(SHARD, expand=2).encode()


@pytest.mark.parametrize("raw", [
    SHARD_RAW,
    dumps_canonical({**SHARD, "conversations": dict(VIEW)}, expand=2).encode(),
    dumps_canonical({**SHARD, "conversations": {"s1": VIEW["s1"], "zz": entry(99)}}, expand=2).encode(),  # not a view line
    dumps_canonical({**SHARD, "conversations": {}}, expand=2).encode(),
    SHARD_RAW.replace(b',\n    "s3"', b',\n     "s3"'),  # off by a space
    SHARD_RAW.replace(b',\n    "s3"', b',    "s3"'),  # two members on one line
    SHARD_RAW.replace(b'"s3": {', b'"s1": {', 1).replace(LINES.by_key["s3"][2:], LINES.by_key["s1"][2:]),  # key twice
    SHARD_RAW.replace(b'\n  "format": 1', b'\n  "conversations": {},\n  "format": 1'),  # the key twice
    SHARD_RAW.replace(b'"written": 1', b'"written":  1'),  # the rest not canonical
    SHARD_RAW.replace(b'"written": 1', b'"written": 1,'),  # the rest not JSON
    SHARD_RAW.replace(b'\n  }', b'\n  ]', 1),
    b"\xef\xbb\xbf" + SHARD_RAW,
    b'{\n  "x": {\n  "conversations": {\n    ' + LINES.by_key["s1"][2:] + b"\n  }\n  }\n}\n",  # nested
])
def test_a_shard_read_by_the_views_lines_is_the_whole_parse_or_falls_back_to_it(raw):
    from subconscious.state.conflicts.viewlines import shard_against

    got = shard_against(raw, LINES)
    assert got is None or (got == whole(raw) and list(got) == list(whole(raw))
                           and list(got["conversations"]) == list(whole(raw)["conversations"]))
    if raw == SHARD_RAW:
        assert got == SHARD and all(got["conversations"][k] is VIEW_LINES_VALUE[k] for k in got["conversations"])


VIEW_LINES_VALUE = LINES.value
