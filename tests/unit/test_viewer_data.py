"""The pure shaping behind the viewer's page and the MCP tools' answers (subconscious/viewer/backend.py,
subconscious/mcp/server.py): what a person reads there must be what the data says."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given, strategies as st

from subconscious.mcp.server import blocks_text, search_text
from subconscious.see.memory import snapshot, timeline
from subconscious.state.clock import Stamp
from subconscious.viewer.backend import clock_rows, encryption_state, history_changes

NOW = 1_800_000_000_000


def test_history_lists_each_change_newest_first_with_its_lines_and_where_it_was_seen():
    snaps = [
        snapshot(NOW - 3000, "session", {"guidance": "a"}, session="s-desk", host="desktop", host_name="desk"),
        snapshot(NOW - 2000, "session", {"guidance": "a\nb"}, session="s-lap", host="laptop", host_name="lap"),
        snapshot(NOW - 1000, "session", {"guidance": "a\nb"}, session="s-lap2", host="laptop", host_name="lap"),
        snapshot(NOW, "server", {"guidance": "b", "human": "likes tea\nand tests"}),
    ]
    out = history_changes(timeline(snaps))
    assert [(c["label"], c["status"]) for c in out["changes"]] == [("guidance", "modified"), ("human", "new"),
                                                                   ("guidance", "modified")]
    now_guidance, human, first = out["changes"]
    assert now_guidance["diff"] == [["-", "a"]] and now_guidance["source"] == "on the server now"
    assert human["diff"] == [["+", "likes tea"], ["+", "and tests"]]
    assert first["diff"] == [["+", "b"]] and first["source"] == "shown to session s-lap on lap"
    assert out["snapshots"] == 3  # the unchanged one is not a step
    assert "s-desk on desk" in out["note"]


def test_an_empty_history_says_so():
    assert history_changes([]) == {"changes": [], "note": None, "snapshots": 0}


shard = st.builds(lambda written, lead: SimpleNamespace(name="n", written_ms=written, clock=Stamp(written + lead, 0)),
                  st.integers(0, 2 * NOW), st.integers(-10**7, 10**7))


@given(st.dictionaries(st.sampled_from(["desk", "lap", "nas"]), shard, max_size=3))
def test_one_clock_row_per_machine_and_skew_is_never_negative(shards):
    rows = clock_rows(shards, NOW, [])
    assert [r["host"] for r in rows] == sorted(shards)
    for r in rows:
        info = shards[r["host"]]
        if info.written_ms:
            assert r["skew_s"] >= 0
            assert r["ahead_of_this_machine_s"] == max(0.0, (info.written_ms - NOW) / 1000)
        else:
            assert r["skew_s"] is None and r["last_write"] is None


def test_a_machine_writing_from_the_future_is_shown_ahead_and_flagged_as_doctor_flags_it():
    shards = {"desk": SimpleNamespace(name="desk", written_ms=NOW + 300_000, clock=Stamp(NOW + 300_000, 0)),
              "lap": SimpleNamespace(name="lap", written_ms=NOW - 5_000, clock=Stamp(NOW - 5_000, 0))}
    rows = {r["host"]: r for r in clock_rows(shards, NOW, [{"kind": "clock-skew", "host": "desk"}])}
    assert rows["desk"]["ahead_of_this_machine_s"] == 300 and rows["desk"]["skewed"] is True
    assert rows["lap"]["skew_s"] == 0 and rows["lap"]["skewed"] is False


def test_encryption_line_counts_sealed_and_plain_values():
    info = {"enabled": True, "keyId": "k1", "passphrase": False, "hasCurrentKey": False,
            "values": {"plain": 2, "k1": 3, "k0": 1}, "readableHere": {"k0": 1}}
    assert encryption_state(info) == {"enabled": True, "key_id": "k1", "passphrase": False,
                                      "this_machine_has_key": False, "values": 6, "sealed": 4, "readable_here": 1}
    assert encryption_state({"enabled": False, "values": {"plain": 0}})["enabled"] is False


def test_search_answer_holds_every_matching_line_and_passage_or_why_archival_was_not_searched():
    result = {"blocks": [{"label": "guidance", "line": "run pytest -x"}, {"label": "human", "line": "pytest lover"}],
              "archival": [{"content": "deploys on Fridays", "timestamp": "2026-12-01T10:00:00Z", "tags": ["ops"]}]}
    text = search_text(result, "pytest")
    assert "[guidance] run pytest -x" in text and "[human] pytest lover" in text
    assert "- deploys on Fridays (2026-12-01T10:00:00Z) [tags: ops]" in text
    text = search_text({"blocks": [], "archival": None, "archival_error": "HTTP 404 from the server"}, "x")
    assert "no line holds every word of 'x'" in text and "not searched (HTTP 404 from the server)" in text


def test_the_whole_memory_answer_holds_every_block():
    text = blocks_text({"blocks": [{"label": "a", "size": 1, "limit": 10, "value": "x", "description": "d"},
                                   {"label": "b", "size": 0, "limit": None, "value": "", "description": ""}]})
    assert text == "## a (1/10 chars)\nd\nx\n\n## b (0 chars)\n(empty)"
