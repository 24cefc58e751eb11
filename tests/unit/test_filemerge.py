"""The pure whole-file merge behind `subconscious merge-driver` and `doctor --fix`: it decides as the
store does, never drops an entry silently, and keeps what it cannot read."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from hypothesis import given, settings, strategies as st

from subconscious.state.conflicts.filemerge import (
    SESSION,
    SHARD,
    VIEW,
    conversation_order,
    kind_of_path,
    merge_bytes,
    merge_map3,
    merge_shards,
    merge_views,
    render,
    view_order,
    repair,
)
from subconscious.state.clock import Stamp
from subconscious.state.recordmerge import _MISSING, _as_adopted
from subconscious.state.merge import merge_raw, merge_sessions
from subconscious.state.records import SessionState, normalize_record, parse_session

from .strategies import conversations, session_states, stamps, tombstones
from tests.harness.sizes import examples

sids = st.sampled_from(["s1", "s2", "s3", "s4", "abc-def", "x_y"])
live_values = st.one_of(conversations.map(lambda c: c.to_json()), st.sampled_from(["legacy-1", "legacy-2", "conv-1"]),
                        st.sampled_from([{"conversationId": "conv-1", "hlc": "0:0", "host": ""}, {"conversationId": "conv-2"}]))
views = st.dictionaries(sids, live_values, max_size=6)
shard_values = st.one_of(conversations.map(lambda c: c.to_json()), tombstones.map(lambda t: t.to_json()))
shard_maps = st.dictionaries(sids, shard_values, max_size=6)


def norm(view: dict) -> dict:
    return {k: normalize_record(v) for k, v in view.items()}


def _put(m: dict, k: str, v) -> dict:
    return m if v is _MISSING else {**m, k: v}


def same_content(x, y) -> bool:
    strip = lambda v: {f: w for f, w in normalize_record(v).items() if f not in ("hlc", "host")}  # noqa: E731
    return strip(x) == strip(y)


def expected_keys(o: dict | None, a: dict, b: dict) -> set[str]:
    """Keys the three-way rule keeps: present on some side, and not deleted by one side while the
    other left the ancestor's version alone."""
    o = o or {}
    keep = set()
    for k in set(a) | set(b):
        # upstream's unstamped version with a stamped version's content beside it is that version
        x, y, z = _as_adopted(a.get(k, _MISSING), b.get(k, _MISSING), o.get(k, _MISSING))
        a, b, o = _put(a, k, x), _put(b, k, y), _put(o, k, z)
        if k not in a and k in o and view_order(b[k])[:-1] == view_order(o[k])[:-1]:
            continue
        if k not in b and k in o and view_order(a[k])[:-1] == view_order(o[k])[:-1]:
            continue
        keep.add(k)
    return keep


# --------------------------------------------------------------------------- laws of the view merge


@given(st.one_of(st.none(), views), views, views)
def test_view_merge_is_symmetric(o, a, b):
    assert merge_views(o, a, b) == merge_views(o, b, a)


@given(st.one_of(st.none(), views), views)
def test_merging_a_side_with_itself_gives_it_back(o, a):
    assert merge_views(o, a, a) == a


@given(st.one_of(st.none(), views), views, views)
def test_every_entry_survives_or_loses_only_to_a_later_version_or_a_deliberate_delete(o, a, b):
    merged = merge_views(o, a, b)
    assert set(merged) == expected_keys(o, a, b)
    for k, v in merged.items():
        for side in (a, b):
            if k in side:
                if same_content(side[k], v):
                    continue  # the same version, stamped or not yet
                if o is not None and k in o and same_content(side[k], o[k]) and view_order(side[k])[1]:
                    continue  # upstream's unstamped version as the ancestor had it yields to the other side's change
                assert view_order(v) >= view_order(side[k])  # the later version won (upstream's unstamped: newer)


@given(views, views)
def test_without_an_ancestor_it_is_the_union_by_the_view_order(a, b):
    """Every key of either side; where both sides hold stamped versions, the store's union (upstream's
    unstamped versions: the driver/store property test in test_upstream_adoption checks the store)."""
    merged = merge_views(None, a, b)
    assert set(merged) == set(a) | set(b)
    stamped = lambda v: not view_order(v)[1]  # noqa: E731
    both = [k for k in set(a) & set(b) if stamped(a[k]) and stamped(b[k])]
    union = merge_raw([norm({k: a[k] for k in both}), norm({k: b[k] for k in both})])
    assert {k: normalize_record(merged[k]) for k in both} == union


@given(views, st.lists(sids, max_size=3), views)
def test_one_side_unchanged_gives_the_other_sides_edits(o, deleted, additions):
    """Ours did nothing since the ancestor; theirs deleted some keys and wrote newer versions."""
    newer = {k: {**normalize_record(v), "hlc": "99:0"} for k, v in additions.items()}
    theirs = {k: v for k, v in o.items() if k not in deleted} | newer
    assert merge_views(o, o, theirs) == theirs


@given(st.one_of(st.none(), views), views, views)
def test_the_text_merge_is_canonical_and_equals_the_map_merge(o, a, b):
    result = merge_bytes(render(VIEW, o).encode() if o is not None else b"", render(VIEW, a).encode(),
                         render(VIEW, b).encode(), ".letta/claude/conversations.json")
    assert result.ok and result.kind == VIEW and not result.notes
    assert json.loads(result.text) == merge_views(o, a, b)
    assert render(VIEW, json.loads(result.text)) == result.text  # what the store itself would write


# --------------------------------------------------------------------------- shards and sessions


@given(st.one_of(st.none(), shard_maps), shard_maps, shard_maps, stamps, stamps)
def test_shard_merge_keeps_tombstones_and_the_newest_clock(o, a, b, ca, cb):
    def shard(convs, clock):
        return {"format": 1, "host": "alpha", "name": "alpha", "clock": clock.encode(), "written": clock.wall,
                "conversations": convs, "settings": {}}

    base = shard(o, Stamp(0, 1)) if o is not None else None
    merged = merge_shards(base, shard(a, ca), shard(b, cb), "alpha")
    assert merged == merge_shards(base, shard(b, cb), shard(a, ca), "alpha")
    assert merged["conversations"] == merge_map3(o, a, b, conversation_order)
    assert merged["clock"] == max(ca, cb).encode() and merged["host"] == "alpha"
    if o is None:
        assert merged["conversations"] == merge_raw([a, b])  # tombstones included, as in the store


@given(session_states, session_states)
def test_session_text_merge_is_the_stores_session_merge(a, b):
    ra, rb = render(SESSION, a.to_json()).encode(), render(SESSION, b.to_json()).encode()
    result = merge_bytes(None, ra, rb, "session-s1.json")
    assert result.ok
    got = parse_session(json.loads(result.text), "s1")
    assert got == merge_sessions(a, b)
    assert got.last_processed_index == max(a.last_processed_index, b.last_processed_index)


# --------------------------------------------------------------------------- damaged sides


@given(views, views)
@settings(max_examples=examples(50))
def test_conflict_markers_stand_for_both_sides(a, b):
    text = "<<<<<<< HEAD\n" + render(VIEW, a) + "=======\n" + render(VIEW, b) + ">>>>>>> other\n"
    result = repair(text.encode(), "conversations.json")
    assert result.ok and json.loads(result.text) == merge_views(None, a, b)


@given(views, views, st.sampled_from([b"{not json", b"\xff\xfe", b'["a list"]', b'"a string"']))
def test_an_unreadable_side_counts_as_unchanged_and_its_bytes_are_kept(o, b, garbage):
    result = merge_bytes(render(VIEW, o).encode(), garbage, render(VIEW, b).encode(), "conversations.json")
    assert result.ok
    assert json.loads(result.text) == merge_views(o, o, b)
    assert [v.raw for v in result.set_aside] == [garbage]
    assert any("ours could not be read" in n for n in result.notes)


def test_no_side_readable_gives_no_result_and_keeps_both():
    result = merge_bytes(b"{}", b"{broken", b"also broken", "conversations.json")
    assert not result.ok and [v.label for v in result.set_aside] == ["ours", "theirs"]


def test_real_git_markers_from_git_merge_file_are_repaired(tmp_path):
    git = shutil.which("git")
    assert git, "git is required (apt-get install -y git)"
    e = lambda n, h: {"agentId": "agent-1", "conversationId": f"conv-{n}", "hlc": f"{h}:0", "host": "alpha"}  # noqa: E731
    o = {"s1": e(1, 1)}
    a = {"s1": e(1, 1), "s2": e(2, 2)}
    b = {"s1": e(11, 3), "s3": e(3, 3)}
    for name, view in (("o", o), ("a", a), ("b", b)):
        (tmp_path / name).write_text(render(VIEW, view))
    r = subprocess.run([git, "merge-file", "-p", "--diff3", "a", "o", "b"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode > 0 and "<<<<<<<" in r.stdout  # git alone cannot merge it
    result = repair(r.stdout.encode(), "conversations.json")
    # diff3 markers hold ours, theirs and the ancestor: the join of all three keeps every entry
    assert json.loads(result.text) == {"s1": e(11, 3), "s2": e(2, 2), "s3": e(3, 3)}


def test_a_delete_on_one_side_wins_over_no_change_but_not_over_an_edit():
    e = lambda n, h: {"agentId": "a", "conversationId": f"c{n}", "hlc": f"{h}:0", "host": "beta"}  # noqa: E731
    o = {"gone": e(1, 1), "edited": e(2, 1), "kept": e(3, 1)}
    ours = {"kept": e(3, 1)}  # deleted "gone" and "edited"
    theirs = {"gone": e(1, 1), "edited": e(22, 5), "kept": e(3, 1), "new": e(4, 5)}
    assert merge_views(o, ours, theirs) == {"edited": e(22, 5), "kept": e(3, 1), "new": e(4, 5)}


def test_unknown_fields_and_legacy_forms_are_kept_as_written():
    o = {"s1": "legacy-conv"}
    a = {"s1": "legacy-conv", "s2": {"conversationId": "c2", "note": "upstream field"}}
    b = {"s1": "legacy-conv", "s3": {"agentId": "x", "conversationId": "c3", "hlc": "5:0", "host": "h"}}
    assert merge_views(o, a, b) == {**a, **b}


@pytest.mark.parametrize("path,kind", [
    (".letta/claude/conversations.json", VIEW), ("conversations.json", VIEW),
    (".letta/claude/hosts/alpha.json", SHARD), ("hosts/h1.json", SHARD),
    (".letta/claude/session-abc.json", SESSION), ("x/package.json", None), ("README.md", None),
])
def test_kind_by_path(path, kind):
    assert kind_of_path(path) == kind


def test_kind_by_content_when_git_passes_no_path():
    shard = {"format": 1, "host": "alpha", "clock": "5:0", "written": 5, "conversations": {}, "settings": {}}
    other = dict(shard, clock="7:0", conversations={"s1": {"deleted": True, "hlc": "7:0", "host": "alpha"}})
    result = merge_bytes(None, render(SHARD, shard).encode(), render(SHARD, other).encode())
    assert result.kind == SHARD and json.loads(result.text)["conversations"] == other["conversations"]
    s = SessionState("abc", conversation_id="c", last_processed_index=4).to_json()
    t = dict(s, lastProcessedIndex=9, hlc="1:0")
    result = merge_bytes(None, render(SESSION, s).encode(), render(SESSION, t).encode())
    assert result.kind == SESSION and json.loads(result.text)["lastProcessedIndex"] == 9


def test_a_session_side_from_another_session_is_kept_not_merged():
    s = SessionState("abc", conversation_id="c", last_processed_index=4).to_json()
    t = SessionState("xyz", conversation_id="d", last_processed_index=9).to_json()
    result = merge_bytes(None, render(SESSION, s).encode(), render(SESSION, t).encode(), "session-abc.json")
    assert result.ok and json.loads(result.text)["sessionId"] == "abc"
    assert [v.label for v in result.set_aside] == ["theirs"]
