import json

from hypothesis import assume, given, strategies as st

from subconscious.state.textforms import _lines, dumps_canonical, has_conflict_markers, split_conflict_sides

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=10,
)


@given(json_values, st.integers(0, 3))
def test_canonical_json_round_trips(value, expand):
    assert json.loads(dumps_canonical(value, expand)) == value


@given(st.dictionaries(st.text(min_size=1, max_size=6), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2), min_size=1, max_size=5))
def test_each_entry_stands_on_its_own_line(view):
    lines = dumps_canonical(view, expand=1).split("\n")[:-1]
    assert len(lines) == len(view) + 2
    assert [json.loads(ln.split(": ", 1)[0]) for ln in lines[1:-1]] == sorted(view)


def _conflicted(base: dict, ours: dict, theirs: dict, diff3: bool) -> str:
    a, b = _lines(dumps_canonical(ours)), _lines(dumps_canonical(theirs))
    o = _lines(dumps_canonical(base))
    # a conflict hunk spanning the differing middle, as git writes it
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    hunk = ["<<<<<<< HEAD\n", *a[head:len(a) - tail]]
    if diff3:
        hunk += ["||||||| base\n", *o[1:-1]]
    hunk += ["=======\n", *b[head:len(b) - tail], ">>>>>>> theirs\n"]
    return "".join(a[:head] + hunk + a[len(a) - tail:])


@given(
    st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 3), min_size=1),
    st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 3), min_size=1),
    st.booleans(),
)
def test_both_sides_of_a_git_conflict_are_recovered(ours, theirs, diff3):
    assume(ours != theirs)
    base = {k: v for k, v in ours.items() if theirs.get(k) == v}
    text = _conflicted(base, ours, theirs, diff3)
    assert has_conflict_markers(text)
    sides = [json.loads(s) for s in split_conflict_sides(text)[:2]]
    assert sides == [ours, theirs]


def test_text_without_markers_is_one_side():
    assert split_conflict_sides('{"a": 1}\n') == ['{"a": 1}\n']
    assert not has_conflict_markers('{"a": "<<<<<<< not a marker"}')


@given(st.dictionaries(st.sampled_from(["agentId", "conversationId", "hlc", "host", "deleted"]),
                       st.one_of(st.text(max_size=4), st.booleans(), st.none(), st.integers()), min_size=3, max_size=4))
def test_the_fast_entry_rendering_is_exactly_canonical_json(entry):
    from subconscious.state.records import canonical

    assert dumps_canonical({"k": entry}, expand=1) == '{\n  "k": ' + canonical(entry) + "\n}\n"
