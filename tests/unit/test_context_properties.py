"""Property tests for subconscious.injection.context: block diffs, message cut-off, well-formed output."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from hypothesis import given
from hypothesis import strategies as st

from subconscious.injection.context import (AgentMessage, Block, block_diff, changed_blocks, escape, new_messages,
                                  pre_tool_injection, prompt_injection)

line = st.text(st.sampled_from("abc \t-+<&"), max_size=6)
block_text = st.lists(line, max_size=8).map("\n".join)
any_text = st.text(max_size=80)


def lines(v: str) -> list[str]:
    return [s.strip() for s in v.split("\n") if s.strip()]


@given(block_text)
def test_diff_of_equal_values_is_empty(a):
    assert block_diff(a, a) == ([], [])


@given(block_text, block_text)
def test_diff_is_sound_and_complete(a, b):
    removed, added = block_diff(a, b)
    assert set(removed) <= set(lines(a)) - set(lines(b))
    assert set(added) <= set(lines(b)) - set(lines(a))
    # applying the diff to a's lines gives b's lines (as sets)
    assert (set(lines(a)) - set(removed)) | set(added) == set(lines(b))
    assert all(s == s.strip() and s for s in removed + added)


@given(block_text, block_text)
def test_diff_swaps_with_its_arguments(a, b):
    removed, added = block_diff(a, b)
    assert block_diff(b, a) == (added, removed)


@given(st.dictionaries(st.sampled_from(["g", "p", "u", "x"]), block_text),
       st.dictionaries(st.sampled_from(["g", "p", "u", "x"]), block_text))
def test_changed_blocks_reports_exactly_the_differences(old, new):
    changes = changed_blocks([Block(k, v) for k, v in new.items()], old)
    by_label = {c.label: c for c in changes}
    for label in set(old) | set(new):
        if label not in new:
            assert by_label[label].status == "removed"
        elif label not in old:
            assert by_label[label].status == "new" and by_label[label].value == new[label]
        elif old[label] != new[label]:
            assert by_label[label].status == "modified"
        else:
            assert label not in by_label


ids = st.lists(st.integers(0, 50), unique=True, max_size=12)


@given(ids, st.data())
def test_new_messages_are_exactly_those_after_last_seen(id_list, data):
    api = [AgentMessage("m%d" % i, None, "text %d" % i) for i in id_list]  # newest first
    last = data.draw(st.one_of(st.none(), st.sampled_from(["m%d" % i for i in id_list] or ["zz"]), st.just("zz")))
    fresh, seen = new_messages(api, last)
    known = [m.id for m in api]
    cut = known.index(last) if last in known else len(known)
    assert [m.id for m in fresh] == list(reversed(known[:cut]))
    assert seen == (known[0] if known else last)
    # asking again with the returned id gives nothing new
    assert new_messages(api, seen)[0] == []


@given(any_text, st.lists(st.tuples(any_text, any_text), max_size=4),
       st.lists(st.tuples(any_text, any_text, any_text), max_size=4), st.booleans())
def test_injected_text_is_well_formed_and_keeps_content(name, msgs, blocks, first):
    api = [{"id": "m%d" % i, "date": d, "content": c} for i, (d, c) in enumerate(msgs)]
    bl = [Block(label, value, desc) for label, value, desc in blocks]
    inj = prompt_injection("full", name, api, None, bl, None if first else {})
    if inj.text is None:
        return
    root = ET.fromstring("<root>%s</root>" % inj.text)
    got = [m.text[1:-1] for m in root.findall("letta_message")]
    unesc = lambda s: escape(s).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    assert got == [unesc(c) for _, c in reversed(msgs) if c.strip()]
    pre = pre_tool_injection("full", name, api, None, bl, {})
    if pre.text is not None:
        ctx = json.loads(pre.text)["hookSpecificOutput"]["additionalContext"]
        assert ET.fromstring(ctx).tag == "letta_update"
