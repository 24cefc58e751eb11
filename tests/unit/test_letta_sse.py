"""SSE parser properties and the Letta meaning of stream events."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from subconscious.letta.errors import LettaProtocolError, LettaStreamError
from subconscious.letta.sse import DONE, SSEDecoder, SSEEvent, encode_sse, interpret, letta_items, letta_stream, \
    parse_sse
from tests.harness.sizes import examples

# field values may hold anything but line breaks (data may hold line breaks: it is split into data: lines)
_line_text = st.text(alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=40)
_name = st.text(alphabet=st.characters(whitelist_categories=("Ll", "Lu", "Nd"), whitelist_characters="_-"),
                min_size=1, max_size=12)
_events = st.lists(st.builds(
    SSEEvent,
    data=st.lists(_line_text, min_size=1, max_size=4).map("\n".join),
    event=st.one_of(st.just("message"), _name),
    id=st.one_of(st.none(), _line_text.filter(lambda s: "\0" not in s)),
    retry=st.one_of(st.none(), st.integers(min_value=0, max_value=10**6)),
), max_size=8)


def _split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts})
    out, prev = [], 0
    for p in points:
        out.append(text[prev:p])
        prev = p
    out.append(text[prev:])
    return out


def _normalise_ids(events: list[SSEEvent]) -> list[SSEEvent]:
    """The last-event-id persists across events (SSE rule); compute what a decoder must report."""
    out, last_id, last_retry = [], None, None
    for e in events:
        last_id = e.id if e.id is not None else last_id
        last_retry = e.retry if e.retry is not None else last_retry
        out.append(SSEEvent(data=e.data, event=e.event, id=last_id, retry=last_retry))
    return out


@given(_events, st.lists(st.integers(min_value=0, max_value=10**6), max_size=12),
       st.sampled_from(["\n", "\r\n", "\r"]))
@settings(max_examples=examples(300))
def test_events_survive_any_chunking_and_line_ending(events, cuts, eol):
    wire = "".join(encode_sse(e) for e in events).replace("\n", eol)
    assert parse_sse(_split(wire, cuts)) == _normalise_ids(events)


@given(_events, st.lists(_line_text, max_size=5))
def test_comments_and_unknown_fields_are_ignored(events, comments):
    noise = "".join(f":{c}\nfoo: {c}\n" for c in comments)
    wire = "".join(noise + encode_sse(e) for e in events)
    assert parse_sse([wire]) == _normalise_ids(events)


def test_incomplete_event_at_end_of_stream_is_discarded():
    assert parse_sse(["data: one\n\ndata: two"]) == [SSEEvent(data="one")]


def test_crlf_split_across_chunks_is_one_line_break():
    dec = SSEDecoder()
    assert dec.feed("data: a\r") == []
    assert dec.feed("\n\r") == []
    assert dec.feed("\n") == [SSEEvent(data="a")]


def test_single_leading_space_is_stripped_only_once_and_colonless_lines_are_fields():
    assert parse_sse(["data:  two spaces\ndata\n\n"]) == [SSEEvent(data=" two spaces\n")]


def test_blank_event_without_data_is_not_dispatched():
    assert parse_sse(["event: x\n\ndata: y\n\n"]) == [SSEEvent(data="y")]


# ---------------------------------------------------------------- Letta meaning

def _wire(*items, error=None, done=True) -> str:
    out = "".join(f"data: {json.dumps(i)}\n\n" for i in items)
    if error is not None:
        out += f"event: error\ndata: {json.dumps(error)}\n\n"
    if done:
        out += "data: [DONE]\n\n"
    return out


_item = st.fixed_dictionaries({"message_type": st.text(min_size=1, max_size=20).filter(
    lambda s: s not in ("error_message",))}, optional={"id": st.text(max_size=10), "content": st.text(max_size=30)})


@given(st.lists(_item, max_size=6), st.lists(st.integers(min_value=0, max_value=5000), max_size=6))
def test_every_item_passes_through_in_order_even_unknown_types(items, cuts):
    items = items + [{"message_type": "stop_reason", "stop_reason": "end_turn"}]
    assert list(letta_stream(_split(_wire(*items), cuts))) == items


def test_nothing_after_done_is_read():
    wire = _wire({"message_type": "stop_reason", "stop_reason": "end_turn"}) + "data: {not json\n\n"
    assert [i["message_type"] for i in letta_stream([wire])] == ["stop_reason"]


def test_error_event_raises_with_the_server_detail():
    err = {"message_type": "error_message", "run_id": "run-1", "error_type": "llm_error",
           "message": "An error occurred with the LLM request.", "detail": "upstream said 503"}
    seen = []
    with pytest.raises(LettaStreamError) as exc:
        for item in letta_stream([_wire({"message_type": "stop_reason", "stop_reason": "llm_api_error"}, error=err)]):
            seen.append(item)
    assert seen == [{"message_type": "stop_reason", "stop_reason": "llm_api_error"}]
    assert "llm_error" in str(exc.value) and "upstream said 503" in str(exc.value)
    assert exc.value.event == err


def test_error_message_type_without_event_name_also_raises():
    with pytest.raises(LettaStreamError):
        list(letta_items(parse_sse([_wire({"message_type": "error_message", "message": "boom"})])))


@pytest.mark.parametrize("data", ["{not json", "[1, 2]", "\"text\""])
def test_malformed_data_is_a_protocol_error(data):
    with pytest.raises(LettaProtocolError):
        interpret(SSEEvent(data=data))


def test_stream_cut_before_stop_reason_is_reported():
    wire = _wire({"message_type": "assistant_message", "content": "half"}, done=False)
    with pytest.raises(LettaProtocolError, match="ended before"):
        list(letta_stream([wire]))


def test_stream_without_done_but_with_stop_reason_is_accepted():
    wire = _wire({"message_type": "stop_reason", "stop_reason": "end_turn"}, done=False)
    assert len(list(letta_stream([wire]))) == 1


def test_done_marker_and_empty_data():
    assert interpret(SSEEvent(data="[DONE]")) is DONE
    assert interpret(SSEEvent(data="  ")) is None
