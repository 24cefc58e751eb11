"""Hypothesis strategies for state records (small alphabets so that keys and clocks collide often).

Besides the shapes we write, they generate what the merges must also order the same way everywhere:
upstream's legacy forms (bare strings, objects without ``hlc``), unknown fields, values that are
equal in Python but not in JSON (``1``, ``1.0``, ``true``, nested), and clocks at the limits of the
text form (counters near 999,999,999, walls near 16 digits).
"""

from hypothesis import HealthCheck, settings as hsettings, strategies as st

from subconscious.state.clock import MAX_COUNT, MAX_WALL, Stamp
from subconscious.state.records import Conversation, SessionState, Setting, Tombstone, canonical, parse_record
from tests.harness.sizes import examples

# For tests that take several copies (and often every permutation of them): no deadline on a shared,
# busy machine, and the composite strategies below may be slow to generate.
heavy = hsettings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])

hosts = st.sampled_from(["alpha", "beta", "gamma", ""])
stamps = st.builds(Stamp, st.integers(0, 6), st.integers(0, 3))
session_ids = st.sampled_from(["s1", "s2", "s3", "s4", "abc-def", "x_y"])
conv_ids = st.sampled_from(["conv-1", "conv-2", "conv-3"])
agents = st.sampled_from([None, "agent-a", "agent-b"])

# Every stamp the decoder accepts, biased to the ends of both fields.
any_walls = st.one_of(st.integers(0, 6), st.integers(0, MAX_WALL), st.integers(MAX_WALL - 3, MAX_WALL))
any_counts = st.one_of(st.integers(0, 3), st.integers(0, MAX_COUNT), st.integers(MAX_COUNT - 3, MAX_COUNT))
any_stamps = st.builds(Stamp, any_walls, any_counts)
# Few enough to collide, including counters and walls at their limits.
edge_stamps = st.one_of(
    stamps,
    st.builds(Stamp, st.sampled_from([1, 2, MAX_WALL - 1, MAX_WALL]), st.sampled_from([0, MAX_COUNT - 1, MAX_COUNT])),
)

# Equal under Python's ==, different as JSON text: 1 == 1.0 == True, 0 == 0.0 == -0.0 == False.
_scalars = st.sampled_from([1, 1.0, True, 0, 0.0, -0.0, False, None, "1", 2, 2.0])
json_equalish = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=2), st.dictionaries(st.sampled_from(["a", "b"]), inner, max_size=2)),
    max_leaves=4,
)
unknown_fields = st.dictionaries(st.sampled_from(["note", "upstreamField", "v"]), json_equalish, max_size=2)
extras = unknown_fields.map(lambda d: canonical(d) if d else "")

conversations = st.builds(Conversation, conv_ids, agents, stamps, hosts)
tombstones = st.builds(Tombstone, stamps, hosts)
records = st.one_of(conversations, tombstones)
record_maps = st.dictionaries(session_ids, records, max_size=6)
settings = st.builds(Setting, st.one_of(st.none(), st.integers(0, 3), st.text(max_size=3)), stamps, hosts)

# The same, with unknown fields, JSON-different-equal values and clocks at the limits.
wide_conversations = st.builds(Conversation, conv_ids, agents, edge_stamps, hosts, extras)
wide_records = st.one_of(wide_conversations, st.builds(Tombstone, edge_stamps, hosts))
wide_record_maps = st.dictionaries(session_ids, wide_records, max_size=6)
wide_settings = st.builds(Setting, json_equalish, edge_stamps, hosts)
wide_setting_maps = st.dictionaries(st.sampled_from(["pinnedAgent", "encryption"]), wide_settings, max_size=2)

# JSON values of one conversations key as found on disk: ours, upstream's legacy forms, unknown fields.
legacy_strings = st.sampled_from(["conv-1", "conv-2", "legacy-1"])
legacy_objects = st.builds(
    lambda conv, agent, extra: {"conversationId": conv, **({"agentId": agent} if agent else {}), **extra},
    conv_ids, agents, unknown_fields,
)
stored_values = st.one_of(
    wide_records.map(lambda r: r.to_json()), legacy_strings, legacy_objects,
)
stored_maps = st.dictionaries(session_ids, stored_values, max_size=4)

_TWINS = ([1, 1.0, True], [0, 0.0, -0.0, False], [2, 2.0])


@st.composite
def twin_of(draw, value, keep=frozenset({"deleted"})):
    """A value equal to ``value`` under Python's ``==`` whose JSON text may differ (1 / 1.0 / true)."""
    if isinstance(value, (bool, int, float)):
        for group in _TWINS:
            if value in group:
                return draw(st.sampled_from(group))
        return value
    if isinstance(value, list):
        return [draw(twin_of(v)) for v in value]
    if isinstance(value, dict):
        return {k: v if k in keep else draw(twin_of(v)) for k, v in value.items()}
    return value


@st.composite
def copies_of(draw, maps, values, min_size=2, max_size=4):
    """Several copies of one map: each key holds a Python-equal twin of the first copy's version, or
    another version, or is missing — so JSON-different-equal versions of one key meet often."""
    first = draw(maps)
    out = [first]
    for _ in range(draw(st.integers(min_size - 1, max_size - 1))):
        copy = {}
        for key, value in first.items():
            what = draw(st.sampled_from(["twin", "twin", "other", "missing"]))
            if what == "twin":
                copy[key] = draw(twin_of(value))
            elif what == "other":
                copy[key] = draw(values)
        out.append(copy)
    return out


stored_copies = copies_of(stored_maps, stored_values)
setting_json_copies = copies_of(wide_setting_maps.map(lambda m: {k: s.to_json() for k, s in m.items()}),
                                wide_settings.map(lambda s: s.to_json()))
record_copies = stored_copies.map(lambda cs: [{k: parse_record(v) for k, v in c.items()} for c in cs])
setting_copies = setting_json_copies.map(lambda cs: [{k: Setting(v["value"], Stamp.decode(v["hlc"]), v["host"]) for k, v in c.items()} for c in cs])

block_values = st.one_of(st.none(), st.dictionaries(st.sampled_from(["guidance", "prefs"]), st.text(max_size=5), max_size=2))
session_states = st.builds(
    SessionState,
    session_id=st.just("s1"),
    conversation_id=st.one_of(st.none(), conv_ids),
    last_processed_index=st.integers(-1, 50),
    started_at=st.one_of(st.none(), st.sampled_from(["2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z"])),
    last_block_values=block_values,
    last_seen_message_id=st.one_of(st.none(), st.sampled_from(["m1", "m2"])),
    host=hosts,
    stamp=stamps,
)
wide_session_states = st.builds(
    SessionState,
    session_id=st.just("s1"),
    conversation_id=st.one_of(st.none(), conv_ids),
    last_processed_index=st.integers(-1, 5),
    last_block_values=st.one_of(st.none(), st.dictionaries(st.sampled_from(["guidance", "prefs"]), json_equalish, max_size=2)),
    host=hosts,
    stamp=edge_stamps,
    extra=extras,
)
