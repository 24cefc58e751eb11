"""One order of versions (issue 9, item 7): the store, the git merge driver and conflict-copy folds
pick the same winner, by (clock, host, canonical JSON), so values equal in Python but different in
JSON (``1``, ``1.0``, ``true``) cannot make the result depend on the order the sources were read."""

import itertools

from hypothesis import example, given, strategies as st

from subconscious.state.clock import Stamp
from subconscious.state.merge import merge_maps, merge_raw, merge_session_versions
from subconscious.state.recordmerge import conversation_order, merge_map2, merge_map3, merge_views, setting_order
from subconscious.state.records import Setting, canonical, normalize_record, parse_setting

from .strategies import (
    edge_stamps,
    heavy,
    hosts,
    json_equalish,
    record_copies,
    setting_copies,
    stored_copies,
    stored_maps,
    stored_values,
    wide_record_maps,
    wide_session_states,
    wide_settings,
)


def text_of(view) -> str:
    return canonical({k: v.to_json() if hasattr(v, "to_json") else v for k, v in view.items()})


def every_order(items):
    return itertools.permutations(items)


def versions_of_each_key(copies):
    """Every pair of versions of one key found in ``copies``."""
    for key in {k for c in copies for k in c}:
        yield from itertools.combinations([c[key] for c in copies if key in c], 2)


def norm(view: dict) -> dict:
    return {k: normalize_record(v) for k, v in view.items()}


# --------------------------------------------------------------------------- the store's merges


@heavy
@given(stored_copies)
def test_the_stores_raw_merge_gives_the_same_bytes_in_every_read_order(copies):
    copies = [norm(c) for c in copies]
    results = {text_of(merge_raw(list(p))) for p in every_order(copies)}
    assert len(results) == 1


@heavy
@given(st.one_of(record_copies, st.lists(wide_record_maps, min_size=2, max_size=3)))
def test_the_record_merge_gives_the_same_bytes_in_every_read_order(copies):
    results = {text_of(merge_maps(list(p))) for p in every_order(copies)}
    assert len(results) == 1


@heavy
@given(setting_copies)
def test_settings_merge_to_the_same_bytes_in_every_read_order(copies):
    results = {text_of(merge_maps(list(p))) for p in every_order(copies)}
    assert len(results) == 1


@heavy
@given(st.lists(wide_session_states, min_size=2, max_size=4))
def test_session_versions_merge_to_the_same_bytes_in_every_read_order(versions):
    results = {canonical(merge_session_versions(list(p)).to_json()) for p in every_order(versions)}
    assert len(results) == 1


def test_one_and_one_point_zero_and_true_are_three_versions():
    """The example from the issue: same clock, same host, values 1 / 1.0 / true."""
    versions = [{"s1": {"conversationId": "c", "hlc": "5:0", "host": "h", "note": v}} for v in (1, 1.0, True)]
    assert len({text_of(merge_raw(list(p))) for p in every_order(versions)}) == 1
    sets = [{"pin": Setting(v, Stamp(5, 0), "h")} for v in ({"a": 1}, {"a": 1.0}, {"a": True})]
    assert len({text_of(merge_maps(list(p))) for p in every_order(sets)}) == 1


@given(json_equalish, json_equalish, edge_stamps, hosts)
def test_settings_are_equal_only_when_their_json_is(a, b, stamp, host):
    sa, sb = Setting(a, stamp, host), Setting(b, stamp, host)
    assert (sa == sb) is (canonical(a) == canonical(b))
    if sa == sb:
        assert hash(sa) == hash(sb)


# --------------------------------------------------------------------------- the git merge driver


def check_same_winner(a, b, order, normalize, store_pick):
    """The driver's three-way merge (no ancestor) and n-way fold of two written versions ``a``, ``b``
    give, normalized, the bytes of the store's winner, whichever side is ours."""
    store = canonical(store_pick(a, b))
    for ours, theirs in ((a, b), (b, a)):
        assert canonical(normalize(merge_map3(None, {"k": ours}, {"k": theirs}, order)["k"])) == store
        assert canonical(normalize(merge_map2([{"k": ours}, {"k": theirs}], order)["k"])) == store


@heavy
@given(stored_copies)
def test_the_merge_driver_and_the_store_pick_the_same_winner(copies):
    def store_pick(a, b):
        return merge_raw([{"k": normalize_record(a)}, {"k": normalize_record(b)}])["k"]

    for a, b in versions_of_each_key(copies):
        check_same_winner(a, b, conversation_order, normalize_record, store_pick)


@heavy
@given(setting_copies)
def test_the_merge_driver_and_the_store_pick_the_same_setting(copies):
    def store_pick(a, b):
        return merge_maps([{"k": parse_setting(a)}, {"k": parse_setting(b)}])["k"].to_json()

    for a, b in versions_of_each_key(copies):
        check_same_winner(a.to_json(), b.to_json(), setting_order, lambda v: parse_setting(v).to_json(), store_pick)


@heavy
@given(stored_copies, st.one_of(st.none(), stored_maps))
def test_the_view_merge_gives_the_same_bytes_whichever_side_is_ours(sides, base):
    a, b = sides[0], sides[1]
    assert text_of(merge_views(base, a, b)) == text_of(merge_views(base, b, a))
    results = {text_of(merge_map2(list(p), conversation_order)) for p in every_order(sides)}
    assert len(results) == 1


@given(stored_values, stored_values)
def test_the_drivers_order_is_the_stores_order_of_versions(a, b):
    """Same sign of comparison: the driver's key only adds a tie-break between two written forms
    of one version (e.g. a legacy string and its normalized object)."""
    from subconscious.state.order import version_key

    ka, kb = version_key(normalize_record(a)), version_key(normalize_record(b))
    oa, ob = conversation_order(a)[:-1], conversation_order(b)[:-1]
    assert (ka > kb) == (oa > ob) and (ka == kb) == (oa == ob)


# --------------------------------------------------------------------------- the order itself


@given(stored_values, stored_values)
def test_wins_is_a_total_order_whose_ties_are_byte_identical(a, b):
    from subconscious.state.order import version_key, wins

    na, nb = normalize_record(a), normalize_record(b)
    assert wins(na, nb) or wins(nb, na)
    assert wins(na, nb) is (version_key(na) >= version_key(nb))
    if wins(na, nb) and wins(nb, na):
        assert canonical(na) == canonical(nb)


@given(wide_settings, wide_settings)
def test_record_later_is_the_order_of_the_json_forms(a, b):
    from subconscious.state.order import wins
    from subconscious.state.records import later

    assert later(a, b) is wins(a.to_json(), b.to_json())
    assert (setting_order(a.to_json())[:-1] >= setting_order(b.to_json())[:-1]) is later(a, b)


@given(stored_values)
def test_the_fast_equality_path_only_takes_values_whose_fields_are_strings(value):
    """merge_raw trusts ``==`` for these shapes: it must then mean byte-identical JSON."""
    from subconscious.state.order import exact_eq

    n = normalize_record(value)
    if exact_eq(n):
        assert all(type(v) is str or (k == "deleted" and v is True) for k, v in n.items())


@given(st.sampled_from([1, 1.0, True]), st.sampled_from([1, 1.0, True]), st.sampled_from([None, 1, 1.0, True]))
def test_a_shards_unknown_fields_merge_to_the_same_bytes_whichever_side_is_ours(x, y, o):
    from subconscious.state.recordmerge import merge_shards

    def shard(v):
        return {"format": 1, "host": "alpha", "clock": "5:0", "written": 5, "conversations": {}, "settings": {},
                "upstreamField": v}

    base = shard(o) if o is not None else None
    assert canonical(merge_shards(base, shard(x), shard(y))) == canonical(merge_shards(base, shard(y), shard(x)))


@given(st.one_of(json_equalish, stored_values), st.one_of(json_equalish, stored_values))
@example(1, 1.0)
@example({"a": [True]}, {"a": [1]})
@example({"conversationId": "c", "hlc": "1:0", "host": "h", "n": 0.0}, {"conversationId": "c", "hlc": "1:0", "host": "h", "n": -0.0})
def test_same_json_is_equality_of_canonical_text(a, b):
    from subconscious.state.order import same_json

    for x, y in ((a, b), (a, a), (b, a)):
        assert same_json(x, y) is (canonical(x) == canonical(y))
