"""Hypothesis strategies for state records (small alphabets so that keys and clocks collide often)."""

from hypothesis import strategies as st

from subconscious.state.clock import Stamp
from subconscious.state.records import Conversation, SessionState, Setting, Tombstone

hosts = st.sampled_from(["alpha", "beta", "gamma", ""])
stamps = st.builds(Stamp, st.integers(0, 6), st.integers(0, 3))
session_ids = st.sampled_from(["s1", "s2", "s3", "s4", "abc-def", "x_y"])
conv_ids = st.sampled_from(["conv-1", "conv-2", "conv-3"])
agents = st.sampled_from([None, "agent-a", "agent-b"])

conversations = st.builds(Conversation, conv_ids, agents, stamps, hosts)
tombstones = st.builds(Tombstone, stamps, hosts)
records = st.one_of(conversations, tombstones)
record_maps = st.dictionaries(session_ids, records, max_size=6)
settings = st.builds(Setting, st.one_of(st.none(), st.integers(0, 3), st.text(max_size=3)), stamps, hosts)

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
