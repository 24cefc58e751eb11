"""The merge is a join: any set of copies folds to one result, in any order, on any host.

The maps include unknown fields, values equal in Python but not in JSON (1 / 1.0 / true), clocks at
the limits of the text form and settings, besides the shapes we write; results are compared as
canonical JSON text (``==`` would call 1 and 1.0 the same result).
"""

import random

from hypothesis import example, given, settings, strategies as st

from subconscious.state.clock import Stamp
from subconscious.state.merge import merge_maps, merge_session_versions, merge_sessions
from subconscious.state.store.plan import prunable
from subconscious.state.records import Setting, canonical, order_key

from .strategies import (
    stamps,
    heavy,
    record_copies,
    record_maps,
    session_states,
    setting_copies,
    wide_record_maps,
    wide_session_states,
    wide_setting_maps,
)
from tests.harness.sizes import examples

law_maps = st.one_of(record_maps, wide_record_maps, wide_setting_maps)
# Three or more copies, of which near-twins (versions of one key equal in Python, not in JSON) are common.
law_copies = st.one_of(st.lists(law_maps, min_size=3, max_size=5), record_copies, setting_copies).map(lambda c: c + [{}] * (3 - len(c)))
law_sessions = st.one_of(session_states, wide_session_states)


# The example: one setting written as 1, 1.0 and true (same clock, same host).
TWINS = [{"pin": Setting(v, Stamp(5, 0), "h")} for v in (1, 1.0, True)]


def text(m) -> str:
    return canonical({k: r.to_json() for k, r in m.items()})


@heavy
@given(law_copies)
@example(TWINS)
def test_map_merge_is_commutative(copies):
    a, b = copies[:2]
    assert text(merge_maps([a, b])) == text(merge_maps([b, a]))


@heavy
@given(law_copies)
@example(TWINS)
def test_map_merge_is_associative(copies):
    a, b, c = copies[:3]
    assert text(merge_maps([merge_maps([a, b]), c])) == text(merge_maps([a, merge_maps([b, c])]))


@given(law_maps)
def test_map_merge_is_idempotent(a):
    assert text(merge_maps([a, a])) == text(merge_maps([a]))


@given(st.lists(law_maps, min_size=1, max_size=6), st.randoms())
def test_no_write_disappears_unless_a_newer_one_exists(copies, rnd):
    """Every version of every key either survives or is beaten by a newer write or tombstone."""
    order = list(copies)
    rnd.shuffle(order)
    merged = merge_maps(order)
    for copy in copies:
        for key, record in copy.items():
            assert key in merged
            assert order_key(merged[key]) >= order_key(record)
    assert set(merged) == {k for c in copies for k in c}


@heavy
@given(law_copies, st.randoms(use_true_random=False))
@example(TWINS, random.Random(0))
def test_any_fold_order_gives_one_result(copies, rnd):
    first = merge_maps(copies)
    shuffled = list(copies)
    rnd.shuffle(shuffled)
    pairwise = {}
    for c in shuffled:
        pairwise = merge_maps([pairwise, c])
    assert text(pairwise) == text(first)


@given(st.one_of(record_maps, wide_record_maps), st.lists(st.one_of(record_maps, wide_record_maps), max_size=3),
       st.lists(stamps, max_size=3), st.integers(0, 10), st.integers(0, 5))
def test_pruning_drops_only_old_tombstones_every_shard_passed_and_nobody_holds_live(m, sources, clocks, now, retention):
    """plan.prunable, which every write calls: a live entry is never pruned; a tombstone only when it is older
    than the retention window, every shard's clock has reached it, and no source holds the key live."""
    merged = {k: r.to_json() for k, r in m.items()}
    raw_sources = [{k: r.to_json() for k, r in src.items()} for src in sources]
    pruned = prunable(merged, raw_sources, clocks, now, retention)
    for key, record in m.items():
        live_elsewhere = any(key in src and not src[key].deleted for src in sources)
        allowed = (record.deleted and record.stamp.wall < now - retention and not live_elsewhere
                   and min(clocks, default=Stamp(0, 0)) >= record.stamp)  # no shard read: nothing has passed it
        assert (key in pruned) == allowed, (key, record)


def stext(s) -> str:
    return canonical(s.to_json())


@given(law_sessions, law_sessions)
def test_session_merge_is_commutative(a, b):
    assert stext(merge_sessions(a, b)) == stext(merge_sessions(b, a))


@given(law_sessions, law_sessions, law_sessions)
def test_session_merge_is_associative(a, b, c):
    assert stext(merge_sessions(merge_sessions(a, b), c)) == stext(merge_sessions(a, merge_sessions(b, c)))


@given(law_sessions)
def test_session_merge_is_idempotent(a):
    assert stext(merge_sessions(a, a)) == stext(a)


@settings(max_examples=examples(200))
@given(st.lists(law_sessions, min_size=1, max_size=6))
def test_session_cursor_never_moves_back(versions):
    merged = merge_session_versions(versions)
    assert merged.last_processed_index == max(v.last_processed_index for v in versions)
    newest = max(versions, key=lambda v: v.group_key())
    assert merged.conversation_id == newest.conversation_id
    assert merged.last_seen_message_id == newest.last_seen_message_id


@heavy
@given(st.one_of(st.lists(st.one_of(record_maps, wide_record_maps), min_size=1, max_size=5),
                 record_copies))
def test_the_stores_raw_merge_agrees_with_the_record_merge(copies):
    from subconscious.state.merge import merge_raw
    from subconscious.state.records import normalize_record

    raw = merge_raw([{k: normalize_record(r.to_json()) for k, r in c.items()} for c in copies])
    assert canonical(raw) == text(merge_maps(copies))
