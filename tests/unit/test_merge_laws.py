"""The merge is a join: any set of copies folds to one result, in any order, on any host."""

from hypothesis import given, settings, strategies as st

from subconscious.state.merge import merge_maps, merge_session_versions, merge_sessions, prune_tombstones
from subconscious.state.records import order_key

from .strategies import record_maps, session_states


@given(record_maps, record_maps)
def test_map_merge_is_commutative(a, b):
    assert merge_maps([a, b]) == merge_maps([b, a])


@given(record_maps, record_maps, record_maps)
def test_map_merge_is_associative(a, b, c):
    assert merge_maps([merge_maps([a, b]), c]) == merge_maps([a, merge_maps([b, c])])


@given(record_maps)
def test_map_merge_is_idempotent(a):
    assert merge_maps([a, a]) == merge_maps([a])


@given(st.lists(record_maps, min_size=1, max_size=6), st.randoms())
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


@given(st.lists(record_maps, min_size=2, max_size=5), st.randoms())
def test_any_fold_order_gives_one_result(copies, rnd):
    first = merge_maps(copies)
    shuffled = list(copies)
    rnd.shuffle(shuffled)
    pairwise = {}
    for c in shuffled:
        pairwise = merge_maps([pairwise, c])
    assert pairwise == first


@given(record_maps, st.integers(0, 10), st.integers(0, 5))
def test_pruning_drops_only_old_tombstones(m, now, retention):
    pruned = prune_tombstones(m, now, retention)
    for key, record in m.items():
        if not record.deleted:
            assert pruned[key] == record
        elif record.stamp.wall >= now - retention:
            assert pruned[key] == record
        else:
            assert key not in pruned


@given(session_states, session_states)
def test_session_merge_is_commutative(a, b):
    assert merge_sessions(a, b) == merge_sessions(b, a)


@given(session_states, session_states, session_states)
def test_session_merge_is_associative(a, b, c):
    assert merge_sessions(merge_sessions(a, b), c) == merge_sessions(a, merge_sessions(b, c))


@given(session_states)
def test_session_merge_is_idempotent(a):
    assert merge_sessions(a, a) == a


@settings(max_examples=200)
@given(st.lists(session_states, min_size=1, max_size=6))
def test_session_cursor_never_moves_back(versions):
    merged = merge_session_versions(versions)
    assert merged.last_processed_index == max(v.last_processed_index for v in versions)
    newest = max(versions, key=lambda v: v.group_key())
    assert merged.conversation_id == newest.conversation_id
    assert merged.last_seen_message_id == newest.last_seen_message_id


@given(st.lists(record_maps, min_size=1, max_size=5))
def test_the_stores_raw_merge_agrees_with_the_record_merge(copies):
    from subconscious.state.merge import merge_raw
    from subconscious.state.records import normalize_record, parse_record

    raw = merge_raw([{k: normalize_record(r.to_json()) for k, r in c.items()} for c in copies])
    assert {k: parse_record(v) for k, v in raw.items()} == merge_maps(copies)
