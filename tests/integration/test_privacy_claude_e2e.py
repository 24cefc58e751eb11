"""Private means private on every path out (issue 23), end to end: the real Claude Code CLI (``claude -p``,
this repo loaded as a plugin, pip-installed hooks), the real detached worker, and a recording proxy in front
of the real Letta server, whose stand-in model calls the agent's own client tools (LETTA_SDK_TOOLS=read-only).

The project holds ``<private>`` blocks (one in a 2,600-line file that Claude Code pages) and a private
directory (SUBCONSCIOUS_PRIVATE_PATHS=secrets/**) with a link to it (``ln -s secrets docs``). Claude Code
reads the long file with an offset inside a block, greps inside a block and reads the private file through the
link; the agent calls Read with an
offset inside a block, Grep inside a block and in count mode, Grep and Read through the link. Not one
private byte may be in any request body the proxy saw, nor in anything the Letta server sent its model —
while the public lines around them do arrive.
"""
from __future__ import annotations

import json
import os
import uuid

import pytest

from tests.harness.claude_machine import ClaudeMachine
from tests.harness.fault_proxy import FaultProxy
from tests.harness.hooks import conversation_messages, user_texts
from tests.integration.test_privacy_letta import strings

pytestmark = [pytest.mark.claude, pytest.mark.letta]


@pytest.fixture
def recording_proxy(letta_server):
    p = FaultProxy(letta_server.base_url).start()
    yield p
    p.stop()


def write_project(project, tag: str) -> dict[str, str]:
    big = [f"big line {i} public-{tag}" for i in range(1, 2601)]
    big[2499] = "<private>"
    for i in range(2500, 2509):
        big[i] = f"PRIV-F-read-with-offset-{tag} {i + 1}"
    big[2509] = "</private>"
    (project / "big.md").write_text("\n".join(big) + "\n")
    (project / "notes.md").write_text(
        f"intro public-notes-{tag}\n<private>\nthe vault word is PRIV-L-agent-grep-{tag} swordfish\n"
        f"second PRIV-L-second-{tag} swordfish\n</private>\npublic swordfish after-{tag}\n")
    (project / "secrets").mkdir()
    (project / "secrets" / "plan.txt").write_text(f"PRIV-PATH-{tag} launch swordfish codes\n")
    os.symlink("secrets", project / "docs")  # ln -s secrets docs
    return {"big": str(project / "big.md"), "notes": str(project / "notes.md")}


def test_no_private_byte_leaves_through_claude_code_the_worker_or_the_agents_tools(
        tmp_path, claude_sandbox, fake_anthropic, letta_server, letta_env, fake_llm, recording_proxy,
        agents_to_delete):
    tag = uuid.uuid4().hex[:8]
    project = claude_sandbox.project_dir
    paths = write_project(project, tag)
    env = {**letta_env, "LETTA_BASE_URL": recording_proxy.url}
    laptop = ClaudeMachine(claude_sandbox, tmp_path, env, allowed_tools=("Bash", "Read", "Grep"))
    laptop.env.update(LETTA_SDK_TOOLS="read-only", SUBCONSCIOUS_PRIVATE_PATHS="secrets/**")

    claude_read = json.dumps({"file_path": paths["big"], "offset": 2502, "limit": 5})
    claude_read2 = json.dumps({"file_path": paths["big"], "offset": 2505, "limit": 12})
    claude_grep = json.dumps({"pattern": "swordfish", "output_mode": "content", "path": str(project), "-n": True})
    agent_calls = [
        ("Read", {"file_path": "notes.md", "offset": 3, "limit": 2}),
        ("Read", {"file_path": "big.md", "offset": 2503, "limit": 3}),
        ("Grep", {"pattern": "swordfish", "output_mode": "content"}),
        ("Grep", {"pattern": "word is P", "output_mode": "count"}),
        ("Grep", {"pattern": "launch", "path": "docs", "output_mode": "content"}),
        ("Read", {"file_path": "docs/plan.txt"}),
        ("Glob", {"pattern": "**/*.txt"}),
    ]
    directives = "\n".join(f"CALL {name} {json.dumps(args)}" for name, args in agent_calls)
    linked = project / "docs" / "plan.txt"  # Claude Code reads the private file through the link
    run = laptop.run(f"[[tool:Read {claude_read}]] [[tool:Read {claude_read2}]] [[tool:Grep {claude_grep}]] "
                     f"[[tool:Read {linked}]] "
                     f"[[text:Checked {tag}.]] Look at the notes.\n{directives}\n", timeout=240)
    sid = run.session_id
    entry = laptop.store().conversation(sid)
    assert entry is not None
    agents_to_delete.append(entry.agent_id)

    # Claude Code itself saw the private lines (it is the user's own machine): the test is not vacuous
    claude_saw = fake_anthropic.bodies_text()
    assert f"PRIV-F-read-with-offset-{tag}" in claude_saw and f"PRIV-L-agent-grep-{tag}" in claude_saw
    assert claude_saw.count(f"PRIV-PATH-{tag}") >= 2  # its Grep and its Read through the link

    def done() -> bool:
        executed = [r for r in fake_llm.chat_requests() if any(
            m.get("role") == "tool" for m in r["body"].get("messages", []) if isinstance(m, dict))]
        msgs = user_texts(conversation_messages(letta_server.base_url, entry.conversation_id),
                          "<claude_code_session_update>")
        return bool(msgs) and any(f"Checked {tag}." in u for u in msgs) and len(executed) >= len(agent_calls)
    laptop.wait_until(done, timeout=180, failure="the agent never ran its tools on the delivered turn")
    laptop.wait_until(lambda: not (laptop.sessions / "pending" / sid).exists(), timeout=60)

    sent = [s.body.decode("utf-8", "replace") for s in recording_proxy.seen() if s.body]
    model_saw = [s for r in fake_llm.chat_requests() for s in strings(r["body"])]
    everything = "\n".join(sent + model_saw)
    for private in (f"PRIV-F-read-with-offset-{tag}", f"PRIV-L-agent-grep-{tag}", f"PRIV-L-second-{tag}",
                    f"PRIV-PATH-{tag}", "launch swordfish codes"):
        assert private not in everything, private
        for body in sent:  # in JSON bodies the text may be escaped
            assert json.dumps(private)[1:-1] not in body
    # what is public did arrive: Claude Code's results around the blocks, the agent's tool answers
    assert f"big line 2511 public-{tag}" in everything          # Claude's second window, after the block
    assert f"public swordfish after-{tag}" in everything        # Claude's Grep line outside the block
    updates = "\n".join(user_texts(conversation_messages(letta_server.base_url, entry.conversation_id),
                                    "<claude_code_session_update>"))
    assert "[Tool Result: Read]\n[private text removed]\n</message>" in updates  # the window inside the block
    assert f"[private text removed]\n2511\tbig line 2511 public-{tag}" in updates
    assert f"[Tool Result: Grep]\n[private text removed]\nnotes.md:6:public swordfish after-{tag}" in updates
    tool_results = [s for r in fake_llm.chat_requests() for m in r["body"].get("messages", [])
                    if isinstance(m, dict) and m.get("role") == "tool" for s in strings(m)]
    joined = "\n".join(tool_results)
    assert f"notes.md:6:public swordfish after-{tag}" in joined, joined[:3000]  # the agent's Grep: the public line
    assert "private path" in joined  # the Read through the link was refused, and said why
    assert "No matches for 'word is P'" in joined  # count mode: no oracle on the hidden text
    assert "[the result of Read on a private path (SUBCONSCIOUS_PRIVATE_PATHS) was not sent]" in updates
