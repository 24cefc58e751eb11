import pytest
from hypothesis import given

from subconscious.state.clock import ZERO
from subconscious.state.records import RecordError, parse_record, parse_session, parse_setting

from .strategies import records, session_states, settings


@given(records)
def test_records_round_trip_through_json(record):
    assert parse_record(record.to_json()) == record


@given(session_states)
def test_sessions_round_trip_through_json(state):
    assert parse_session(state.to_json(), state.session_id) == state


@given(settings)
def test_settings_round_trip(setting):
    assert parse_setting(setting.to_json()) == setting


def test_upstream_legacy_forms_are_read_with_the_zero_stamp():
    bare = parse_record("conv-123")
    assert (bare.conversation_id, bare.agent_id, bare.stamp) == ("conv-123", None, ZERO)
    obj = parse_record({"conversationId": "conv-9", "agentId": "agent-1"})
    assert (obj.conversation_id, obj.agent_id, obj.legacy) == ("conv-9", "agent-1", True)


def test_unknown_fields_are_kept():
    rec = parse_record({"conversationId": "c", "agentId": "a", "hlc": "5:0", "host": "h", "note": [1, 2]})
    assert rec.to_json()["note"] == [1, 2]


@pytest.mark.parametrize(
    "value",
    [42, None, [], "", {"agentId": "a"}, {"conversationId": 7}, {"conversationId": "c", "agentId": 3},
     {"conversationId": "c", "hlc": "yesterday"}, {"deleted": True}],
)
def test_wrong_types_are_refused_with_a_reason(value):
    with pytest.raises(RecordError) as err:
        parse_record(value)
    assert str(err.value)


@pytest.mark.parametrize(
    "value",
    [[], {"sessionId": "other"}, {"sessionId": "s1", "lastProcessedIndex": "3"},
     {"sessionId": "s1", "lastProcessedIndex": True}, {"sessionId": "s1", "lastProcessedIndex": -2},
     {"sessionId": "s1", "lastBlockValues": []}, {"sessionId": "s1", "conversationId": 5}],
)
def test_session_files_of_wrong_shape_are_refused(value):
    with pytest.raises(RecordError):
        parse_session(value, "s1")


def test_upstream_session_file_reads_and_keeps_its_fields():
    upstream = {
        "sessionId": "s1", "conversationId": "conv-1", "lastProcessedIndex": 12,
        "startedAt": "2026-01-01T00:00:00.000Z", "lastBlockValues": {"guidance": "be brief"},
        "lastSeenMessageId": "message-9",
    }
    state = parse_session(upstream, "s1")
    out = state.to_json()
    assert {k: out[k] for k in upstream} == upstream
    assert state.stamp == ZERO
