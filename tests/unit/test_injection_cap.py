"""Claude Code cuts what a hook adds to the context at 10,000 characters — wherever the cut falls, inside a
tag or a note. Every injection stays under it: blocks that do not fit are named with their size, notes
are shortened, never a tag cut."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from hypothesis import given, settings, strategies as st

from subconscious.injection.context import INJECTION_CAP, Block, escape, pre_tool_injection, prompt_injection
from tests.harness.sizes import examples

text = st.one_of(st.text(max_size=60), st.builds(lambda c, n: c * n, st.sampled_from("ab<&\n é"),
                                                   st.integers(0, 25_000)))
labels = st.lists(st.from_regex(r"[a-z_]{1,12}", fullmatch=True), unique=True, max_size=25)


@st.composite
def inputs(draw):
    names = draw(labels)
    blocks = [Block(n, draw(text), draw(st.text(max_size=30))) for n in names]
    last = draw(st.one_of(st.none(), st.dictionaries(st.sampled_from(names or ["x"]), text, max_size=8)))
    notes = [{"id": f"m{i}", "date": "2026-12-01T10:00:00Z", "content": draw(text), "message_type": "assistant_message"}
             for i in range(draw(st.integers(0, 30)))]
    return blocks, last, list(reversed(notes))  # the API's order: newest first


def parse(fragment: str) -> ET.Element:
    return ET.fromstring("<root>%s</root>" % fragment)


@settings(max_examples=examples(150), deadline=None)
@given(inputs(), st.sampled_from(["whisper", "full"]))
def test_a_prompt_injection_never_exceeds_the_cap_and_stays_well_formed(data, mode):
    blocks, last, notes = data
    inj = prompt_injection(mode, "Sub", notes, None, blocks, last)
    if inj.text is None:
        return
    assert len(inj.text) <= INJECTION_CAP
    root = parse(inj.text)
    shown_ids = {n["id"] for n in notes if n["content"].strip()} - set(inj.deferred)
    assert len(root.findall("letta_message")) in (len(shown_ids), 0)  # 0: the one-line summary
    if mode == "full" and last is None and not root.findtext("letta_context", "").startswith("The subconscious has"):
        shown = root.find("letta_memory_blocks").findall("letta_memory_block")
        assert [b.get("label") for b in shown] == [b.label for b in blocks]  # every block named, in order
        for el, b in zip(shown, blocks):
            if el.get("shown") == "no":
                assert int(el.get("size")) == len(b.value)
            else:
                assert (el.text or "")[1:-1] == (ET.fromstring("<x>%s</x>" % escape(b.value)).text or "")


@settings(max_examples=examples(150), deadline=None)
@given(inputs())
def test_a_pre_tool_update_never_exceeds_the_cap(data):
    blocks, last, notes = data
    inj = pre_tool_injection("full", "Sub", notes, None, blocks, last or {})
    if inj.text is None:
        return
    context = json.loads(inj.text)["hookSpecificOutput"]["additionalContext"]
    assert len(context) <= INJECTION_CAP
    parse(context)


def test_what_fits_is_shown_whole():
    blocks = [Block("guidance", "Run the tests first."), Block("project_context", "A CLI in Python.")]
    notes = [{"id": "m1", "content": "Mind the flaky test in tests/x.", "message_type": "assistant_message"}]
    inj = prompt_injection("full", "Sub", notes, None, blocks, None)
    assert 'shown="no"' not in inj.text and "more characters" not in inj.text
    assert "Run the tests first." in inj.text and "Mind the flaky test" in inj.text


def test_a_huge_block_is_named_with_its_size_and_the_note_still_shown():
    blocks = [Block("guidance", "Keep answers short."), Block("session_patterns", "x" * 30_000)]
    notes = [{"id": "m1", "content": "The build needs Node 20.", "message_type": "assistant_message"}]
    inj = prompt_injection("full", "Sub", notes, None, blocks, None)
    assert len(inj.text) <= INJECTION_CAP
    root = parse(inj.text)
    big = [b for b in root.iter("letta_memory_block") if b.get("label") == "session_patterns"][0]
    assert (big.get("shown"), big.get("size")) == ("no", "30000")
    assert "Keep answers short." in inj.text and "The build needs Node 20." in inj.text
    assert inj.block_values == {"guidance": "Keep answers short.", "session_patterns": "x" * 30_000}


def test_many_long_notes_the_newest_wait_for_the_next_hook_none_lost():
    notes = [{"id": f"m{i}", "content": f"note {i:02d} " + "y" * 3000, "message_type": "assistant_message"}
             for i in range(40)]
    inj = prompt_injection("whisper", "Sub", list(reversed(notes)), None)
    assert len(inj.text) <= INJECTION_CAP
    assert "note 00 " in inj.text and "more characters]" not in inj.text  # the oldest first, whole
    assert "newer notes of the subconscious follow" in inj.text
    shown = [n["id"] for n in notes if f"note {n['id'][1:].zfill(2)} " in inj.text]
    assert shown and list(inj.deferred) == [n["id"] for n in notes][len(shown):]  # the rest, for later
    assert inj.last_seen_id == shown[-1]


def test_one_note_longer_than_the_limit_is_shortened():
    notes = [{"id": "m1", "content": "z" * 50_000, "message_type": "assistant_message"}]
    inj = prompt_injection("whisper", "Sub", notes, None)
    assert len(inj.text) <= INJECTION_CAP and "more characters]" in inj.text and inj.deferred == ()
