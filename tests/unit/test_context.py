"""subconscious.injection.context: what Claude Code is shown, by mode and hook."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from subconscious.injection.context import (AgentMessage, Block, block_diff, changed_blocks, format_memory_update,
                                  new_messages, pre_tool_injection, prompt_injection)

# As the Letta conversation messages API returns them: newest first, mixed types.
API = [
    {"id": "message-4", "message_type": "assistant_message", "date": "2026-11-30T10:04:00Z",
     "content": "Tests live in tests/unit; run <pytest -q> & check."},
    {"id": "message-3", "message_type": "reasoning_message", "date": "2026-11-30T10:03:00Z", "reasoning": "hm"},
    {"id": "message-2", "message_type": "assistant_message", "date": "2026-11-30T10:02:00Z",
     "content": [{"type": "text", "text": "User prefers tabs."}]},
    {"id": "message-1", "message_type": "user_message", "date": "2026-11-30T10:01:00Z", "content": "update"},
    {"id": "message-0", "message_type": "assistant_message", "date": "2026-11-30T10:00:00Z", "content": "Old."},
]


def parse(text: str) -> ET.Element:
    return ET.fromstring("<root>%s</root>" % text)


def test_new_messages_dedup_order_and_last_seen():
    fresh, seen = new_messages(API, None)
    assert [m.id for m in fresh] == ["message-0", "message-2", "message-4"]  # oldest first
    assert seen == "message-4"
    fresh, seen = new_messages(API, "message-2")
    assert [m.content for m in fresh] == ["Tests live in tests/unit; run <pytest -q> & check."]
    assert seen == "message-4"
    assert new_messages(API, "message-4") == ([], "message-4")
    assert new_messages([], "message-9") == ([], "message-9")
    # unknown last-seen id (scrolled out of the fetched window): everything fetched is new
    assert len(new_messages(API, "message-gone")[0]) == 3


def test_whisper_prompt_injection():
    inj = prompt_injection("whisper", "Subconscious", API, "message-0")
    root = parse(inj.text)
    msgs = root.findall("letta_message")
    assert [m.get("from") for m in msgs] == ["Subconscious", "Subconscious"]
    assert [m.get("timestamp") for m in msgs] == ["2026-11-30T10:02:00Z", "2026-11-30T10:04:00Z"]
    assert msgs[1].text.strip() == "Tests live in tests/unit; run <pytest -q> & check."
    assert "&lt;pytest -q&gt; &amp;" in inj.text
    assert "Sub notes:" in root.findtext("instruction")
    assert inj.last_seen_id == "message-4" and inj.block_values is None
    again = prompt_injection("whisper", "Subconscious", API, inj.last_seen_id)
    assert again.text is None and again.last_seen_id == "message-4"


def test_full_mode_first_prompt_then_diffs():
    blocks = [Block("guidance", "Use tabs.\nRun tests first.", "What to tell Claude"),
              Block("user_preferences", "Likes short answers.")]
    first = prompt_injection("full", "Sub", [], None, blocks, None, agent_description="Watches <you>",
                             conversation_url="https://app.example/agents/a?conversation=c")
    root = parse(first.text)
    ctx = root.findtext("letta_context")
    assert 'named "Sub"' in ctx and "Watches <you>" in ctx and "conversation=c" in ctx
    mem = root.find("letta_memory_blocks")
    assert [(b.tag, b.get("label"), b.get("description"), b.text.strip()) for b in mem] == [
        ("letta_memory_block", "guidance", "What to tell Claude", "Use tabs.\nRun tests first."),
        ("letta_memory_block", "user_preferences", "", "Likes short answers.")]
    assert first.block_values == {"guidance": "Use tabs.\nRun tests first.", "user_preferences": "Likes short answers."}

    nothing = prompt_injection("full", "Sub", [], None, blocks, first.block_values)
    assert nothing.text is None

    blocks2 = [Block("guidance", "Use spaces.\nRun tests first."), Block("pending_items", "Fix CI")]
    upd = prompt_injection("full", "Sub", API[:1], None, blocks2, first.block_values)
    root = parse(upd.text)
    assert root.find("letta_message") is not None
    update = {b.get("label"): b for b in root.find("letta_memory_update")}
    assert {b.tag for b in update.values()} == {"letta_memory_block"}
    assert update["guidance"].get("status") == "modified"
    assert update["guidance"].text.strip().splitlines() == ["- Use tabs.", "+ Use spaces."]
    assert update["pending_items"].get("status") == "new"
    assert update["pending_items"].text.strip() == "Fix CI"
    assert update["user_preferences"].get("status") == "removed"
    assert upd.block_values == {"guidance": "Use spaces.\nRun tests first.", "pending_items": "Fix CI"}


def test_whitespace_only_change_shows_full_value():
    changes = changed_blocks([Block("g", "a\n  b  ")], {"g": "a\nb"})
    assert [(c.status, c.value) for c in changes] == [("modified", "a\n  b  ")]
    root = parse(format_memory_update(changes))
    assert root.find("letta_memory_update/letta_memory_block[@label='g']").text.strip("\n") == "a\n  b  "


def test_pre_tool_use_json():
    assert pre_tool_injection("whisper", "Sub", API, "message-4").text is None  # silent when nothing new
    inj = pre_tool_injection("whisper", "Sub", API, "message-2")
    out = json.loads(inj.text)
    assert list(out) == ["hookSpecificOutput"]
    assert out["hookSpecificOutput"]["hookEventName"] == "PreToolUse"
    ctx = out["hookSpecificOutput"]["additionalContext"]
    root = ET.fromstring(ctx)
    assert root.tag == "letta_update"
    assert root.find("letta_message").text.strip() == "Tests live in tests/unit; run <pytest -q> & check."
    assert inj.last_seen_id == "message-4"
    # full mode: block changes too, but never before the first prompt showed the blocks
    blocks = [Block("guidance", "new text")]
    assert pre_tool_injection("full", "Sub", [], None, blocks, None).text is None
    full = pre_tool_injection("full", "Sub", [], None, blocks, {"guidance": "old text"})
    ctx = json.loads(full.text)["hookSpecificOutput"]["additionalContext"]
    assert "- old text\n+ new text" in ctx and full.block_values == {"guidance": "new text"}


def test_off_mode_prints_nothing_and_keeps_state():
    for fn in (prompt_injection, pre_tool_injection):
        inj = fn("off", "Sub", API, "message-0", [Block("g", "v")], {"g": "old"})
        assert inj.text is None and inj.last_seen_id == "message-0" and inj.block_values == {"g": "old"}


def test_block_diff_examples():
    assert block_diff("a\nb\nc", "a\nc\nd") == (["b"], ["d"])
    assert block_diff("  a  \n\n", "a") == ([], [])
    assert block_diff("", "x\ny") == ([], ["x", "y"])


def test_dataclass_and_dict_inputs_agree():
    as_dicts = prompt_injection("whisper", "S", [{"id": "a", "date": "d", "content": "hi"}], None)
    as_objs = prompt_injection("whisper", "S", [AgentMessage("a", "d", "hi")], None)
    assert as_dicts == as_objs


def test_tag_names_are_fixed():
    from subconscious.injection.context import TAG_NAMES
    from tests.unit.test_context_tags_attack import OURS

    assert TAG_NAMES == OURS
