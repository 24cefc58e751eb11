"""Red team of issue 23 through the real Claude Code CLI, the real worker and a recording proxy in front of the
real Letta server: Claude Code's Edit inside a private block (2.1.332's result names the file only; older ones
showed a numbered snippet, checked as a Read window), an Edit whose ``old_string`` matches twice (its error
repeats the string), and its Grep in count and files_with_matches mode for a word only the block holds (an oracle on
the block). Not one private byte, nor a figure about the block, may be in any request body."""
from __future__ import annotations

import json
import uuid

import pytest

from tests.harness.claude_machine import ClaudeMachine
from tests.harness.hooks import conversation_messages, user_texts
from tests.integration.test_privacy_claude_e2e import recording_proxy  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.claude, pytest.mark.letta]


def test_claude_codes_edit_and_grep_counts_send_nothing_of_a_block(
        tmp_path, claude_sandbox, fake_anthropic, letta_server, letta_env, fake_llm, recording_proxy,  # noqa: F811
        agents_to_delete):
    tag = uuid.uuid4().hex[:8]
    project = claude_sandbox.project_dir
    lines = [f"public line {i} pub-{tag}" for i in range(1, 41)]
    lines[4] = "<private>"
    for i in range(5, 34):
        lines[i] = f"PRIV-E-{tag} entry {i + 1}"
    lines[20] = f"PRIV-E-{tag} twice"
    lines[24] = f"PRIV-E-{tag} twice"
    lines[34] = "</private>"
    notes = project / "notes.md"
    notes.write_text("\n".join(lines) + "\n")
    laptop = ClaudeMachine(claude_sandbox, tmp_path, {**letta_env, "LETTA_BASE_URL": recording_proxy.url},
                           allowed_tools=("Read", "Edit", "Grep"))
    edit = json.dumps({"file_path": str(notes), "old_string": f"PRIV-E-{tag} entry 18",
                       "new_string": f"PRIV-E-{tag} entry 18 changed"})
    twice = json.dumps({"file_path": str(notes), "old_string": f"PRIV-E-{tag} twice", "new_string": "x"})
    count = json.dumps({"pattern": f"E-{tag} entry", "output_mode": "count", "path": str(project)})
    names = json.dumps({"pattern": f"E-{tag} entry", "path": str(project)})
    # the script for the stand-in model names the block's lines: the prompt keeps it in tags of its own
    run = laptop.run(f"<private>[[tool:Read {notes}]] [[tool:Edit {edit}]] [[tool:Edit {twice}]] [[tool:Grep {count}]] "
                     f"[[tool:Grep {names}]]</private> [[text:Edited {tag}.]] Change entry 18.", timeout=240)
    entry = laptop.store().conversation(run.session_id)
    assert entry is not None
    agents_to_delete.append(entry.agent_id)
    claude_saw = fake_anthropic.bodies_text()
    # what Claude Code 2.1.332 said (the test is not vacuous): the Edit error repeats the block's line, the
    # counts and names are those of the block's text
    assert f"String: PRIV-E-{tag} twice" in claude_saw
    assert "notes.md:27" in claude_saw and "Found 1 file\\nnotes.md" in claude_saw

    def done() -> bool:
        msgs = user_texts(conversation_messages(letta_server.base_url, entry.conversation_id),
                          "<claude_code_session_update>")
        return any(f"Edited {tag}." in u for u in msgs)
    laptop.wait_until(done, timeout=180, failure="the turn never reached the agent")
    laptop.wait_until(lambda: not (laptop.sessions / "pending" / run.session_id).exists(), timeout=60)
    sent = "\n".join(s.body.decode("utf-8", "replace") for s in recording_proxy.seen() if s.body)
    updates = "\n".join(user_texts(conversation_messages(letta_server.base_url, entry.conversation_id),
                                   "<claude_code_session_update>"))
    assert f"PRIV-E-{tag}" not in sent and f"PRIV-E-{tag}" not in updates
    assert "[Tool Result: Edit]" in updates and "[Tool Error: Edit]" in updates and "String: [private text removed]" in updates
    assert f"public line 40 pub-{tag}" in updates  # Claude's Read of the whole file: the public lines arrive
    assert "notes.md:" not in updates.split("[Tool: Grep]")[1]  # no count, no file name: as if nothing matched
    assert "No matches found" in updates and "No files found" in updates
