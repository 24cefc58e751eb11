"""Payload builders, TurnResult folding and approval helpers (pure)."""
from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from subconscious.letta.errors import LettaProtocolError
from subconscious.letta.messages import ClientTool, ToolResult, TurnResult, approval_message, \
    assistant_messages_newest_first, content_text, fold_items, merge_chunks, tool_call_request, \
    turn_from_response, user_message


def test_user_and_approval_payloads_match_the_letta_api():
    assert user_message("hi") == {"role": "user", "content": "hi"}
    assert approval_message([ToolResult("call_1", "text"), ToolResult("call_2", "denied", "error")]) == {
        "type": "approval", "approvals": [
            {"type": "tool", "tool_call_id": "call_1", "tool_return": "text", "status": "success"},
            {"type": "tool", "tool_call_id": "call_2", "tool_return": "denied", "status": "error"}]}
    with pytest.raises(ValueError):
        approval_message([])
    with pytest.raises(ValueError):
        ToolResult("c", "x", "maybe").to_json()
    tool = ClientTool("Read", "Read a file", {"type": "object", "properties": {}})
    assert tool.to_json() == {"name": "Read", "description": "Read a file",
                              "parameters": {"type": "object", "properties": {}}}


def test_content_text_handles_strings_parts_and_junk():
    assert content_text("a") == "a"
    assert content_text([{"type": "text", "text": "a"}, {"type": "image"}, "b"]) == "ab"
    assert content_text(None) == ""


def test_tool_call_request_parses_arguments_tolerantly():
    msg = {"id": "m1", "message_type": "approval_request_message",
           "tool_call": {"name": "Grep", "arguments": '{"pattern": "x"}', "tool_call_id": "call_9"}}
    r = tool_call_request(msg)
    assert (r.name, r.arguments, r.tool_call_id, r.message_id) == ("Grep", {"pattern": "x"}, "call_9", "m1")
    bad = {"tool_call": {"name": "Grep", "arguments": "{oops", "tool_call_id": "c"}}
    assert tool_call_request(bad).arguments is None and tool_call_request(bad).arguments_raw == "{oops"
    only_list = {"tool_calls": [{"name": "Glob", "arguments": {"pattern": "*.py"}, "tool_call_id": "c2"}]}
    assert tool_call_request(only_list).arguments == {"pattern": "*.py"}
    assert tool_call_request({"tool_call": {"name": "X"}}) is None


def test_fold_lifts_stop_reason_and_usage_and_drops_pings():
    items = [{"message_type": "ping"},
             {"message_type": "tool_call_message", "id": "1"},
             {"message_type": "assistant_message", "id": "2", "content": "hello"},
             {"message_type": "brand_new_type", "id": "3"},
             {"message_type": "stop_reason", "stop_reason": "end_turn"},
             {"message_type": "usage_statistics", "total_tokens": 5}]
    r = fold_items(items)
    assert [m["message_type"] for m in r.messages] == ["tool_call_message", "assistant_message", "brand_new_type"]
    assert (r.stop_reason, r.usage["total_tokens"], r.text, r.ok) == ("end_turn", 5, "hello", True)
    assert not TurnResult(stop_reason="llm_api_error").ok


_piece = st.text(max_size=8)


@given(st.lists(_piece, min_size=1, max_size=6))
def test_token_chunks_of_one_message_merge_back(pieces):
    items = [{"message_type": "assistant_message", "id": "m", "content": p} for p in pieces]
    merged = merge_chunks(items)
    assert len(merged) == 1 and merged[0]["content"] == "".join(pieces)


def test_different_messages_are_not_merged():
    items = [{"message_type": "assistant_message", "id": "a", "content": "x"},
             {"message_type": "assistant_message", "id": "b", "content": "y"}]
    assert merge_chunks(items) == items


def test_turn_from_non_streaming_response():
    body = {"messages": [{"message_type": "assistant_message", "content": "hi"}],
            "stop_reason": {"message_type": "stop_reason", "stop_reason": "end_turn"},
            "usage": {"message_type": "usage_statistics", "step_count": 1}}
    r = turn_from_response(body)
    assert (r.text, r.stop_reason, r.usage["step_count"]) == ("hi", "end_turn", 1)
    with pytest.raises(LettaProtocolError):
        turn_from_response({"detail": "nope"})


def test_approval_requests_and_requires_approval():
    r = fold_items([{"message_type": "approval_request_message", "id": "m",
                     "tool_call": {"name": "Read", "arguments": json.dumps({"file_path": "/a"}), "tool_call_id": "c"}},
                    {"message_type": "stop_reason", "stop_reason": "requires_approval"}])
    assert r.requires_approval and r.approval_requests[0].arguments == {"file_path": "/a"}


def test_assistant_messages_newer_than_a_seen_id():
    newest_first = [{"id": "5", "message_type": "assistant_message"}, {"id": "4", "message_type": "user_message"},
                    {"id": "3", "message_type": "assistant_message"}, {"id": "2", "message_type": "assistant_message"}]
    assert [m["id"] for m in assistant_messages_newest_first(newest_first, "3")] == ["5"]
    assert [m["id"] for m in assistant_messages_newest_first(newest_first, None)] == ["5", "3", "2"]
    assert [m["id"] for m in assistant_messages_newest_first(newest_first, "gone")] == ["5", "3", "2"]
