"""End to end with both real programs: the real Claude Code CLI (`claude -p`, this repo loaded with
``--plugin-dir``) runs the pip-installed ``subconscious`` hooks against the real Letta server.

Only the two models are scripted: the fake Anthropic API answers Claude Code by the ``[[...]]`` markers
in the prompt, the fake LLM behind Letta edits memory on ``REMEMBER <block>: <text>`` and waits for
``LLM_WAIT_FOR <file>``. Everything between them is real: hook stdin and environment as Claude Code gives them,
the transcript file Claude Code writes, the detached worker, the shared home and the Letta conversation.

What a user would see is checked where it lands: in the model requests Claude Code makes (the fake API
records every body) and in the Letta conversation and memory blocks.
"""

from __future__ import annotations

import json
import re
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

from subconscious.local import sessions as localsession
from tests.harness.claude_code import ClaudeRun, ClaudeSandbox
from tests.harness.claude_machine import ClaudeMachine
from tests.harness.hooks import conversation_messages, said, user_texts

pytestmark = [pytest.mark.claude, pytest.mark.letta]

EVENTS = {"SessionStart", "UserPromptSubmit", "PreToolUse", "Stop"}
# The agent is slower than the user: on the first transcript the fake LLM waits until turn 2's Bash call (which
# runs after turn 2's UserPromptSubmit) makes this file, however loaded the machine (a 6 s sleep per step lost
# the race once under load: the precondition below failed)
AGENT_GO = "agent-may-answer"

WAIT_SCRIPT = '''\
import sys, time
from pathlib import Path
from subconscious.local import sessions as localsession
sessions, sid = Path(sys.argv[1]), sys.argv[2]
Path(sys.argv[3]).touch()  # the agent, waiting on its first step, may answer now
deadline = time.monotonic() + 100
while time.monotonic() < deadline:
    s = localsession.load(sessions, sid)
    if s.pending_start is None and s.pending_update is None and s.attempt is None:
        print("the subconscious has caught up")
        sys.exit(0)
    time.sleep(0.2)
print("still delivering after 100 s")
'''


# --------------------------------------------------------------------------- helpers

class Machine(ClaudeMachine):
    """One simulated host: its own Claude Code sandbox, local state dir and host name; the shared home. Every
    run shows the hooks of EVENTS but PreToolUse (a run may call no tool)."""

    def __init__(self, sandbox: ClaudeSandbox, root: Path, host: str, letta_env: dict[str, str]):
        super().__init__(sandbox, root, letta_env, host=host, hook_events=EVENTS - {"PreToolUse"})

    def wait_delivered(self, sid: str, run: ClaudeRun, timeout: float = 120) -> float:
        """Until the detached worker has delivered everything this machine has for ``sid``: the start
        message, no delivery pending or in flight, and the shared cursor past Claude's last answer in
        ``run``'s transcript (the worker reads the transcript itself; Stop hands it no payload)."""
        target = max(i for i, e in enumerate(run.transcript_entries()) if e.get("type") == "assistant")

        def caught_up() -> bool:
            s = localsession.load(self.sessions, sid)
            state = self.store().session(sid)
            cursor = -1 if state is None else state.last_processed_index
            return (s.pending_start is None and s.attempt is None and cursor >= target
                    and not (self.sessions / "pending" / sid).exists())
        return self.wait_until(caught_up, timeout)


def system_texts(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content or [] if isinstance(b, dict))


def context_after(request_body: dict, predicate) -> str:
    """The hook context Claude Code put right after the message matching ``predicate`` (2.1.3xx: a
    ``role: system`` message; older releases: a ``<system-reminder>`` in the next user message)."""
    messages = request_body["messages"]
    at = max(i for i, m in enumerate(messages) if predicate(m))
    following = []
    for m in messages[at + 1:]:
        if m.get("role") != "system":
            break
        following.append(system_texts(m))
    if not following and at + 1 < len(messages):
        following.append(json.dumps(messages[at + 1].get("content")))
    return "\n".join(following)


def is_prompt(text: str):
    return lambda m: m.get("role") == "user" and text in json.dumps(m.get("content"))


def is_tool_result(tool_use_id: str):
    return lambda m: m.get("role") == "user" and isinstance(m.get("content"), list) and any(
        b.get("type") == "tool_result" and b.get("tool_use_id") == tool_use_id for b in m["content"])


def tool_use_ids(run: ClaudeRun, name: str) -> list[str]:
    return [b["id"] for r in run.message_requests() for b in r.reply or [] if b.get("type") == "tool_use"
            and b.get("name") == name]


def request_with_result(run: ClaudeRun, tool_use_id: str) -> dict:
    """The first model request that carries the result of ``tool_use_id``: the one after the tool ran."""
    return next(r.body for r in run.message_requests() if any(map(is_tool_result(tool_use_id), r.body["messages"])))


def agent_said_memory_insert(context: str, fact: str) -> bool:
    """The agent's own message (the scripted model's answer after its memory_insert of ``fact``)."""
    return re.search(r'<letta_message from="Subconscious"[^>]*>\nDone: memory_insert[^<]*' + re.escape(fact),
                     context) is not None


def assert_ranges_disjoint(updates: list[str]) -> None:
    """Transcript lines are delivered exactly once: the ranges of the updates follow one another."""
    ranges = [tuple(map(int, m)) for u in updates for m in re.findall(r'<lines first="(\d+)" last="(\d+)"[^>]*/>', u)]
    assert len(ranges) == len(updates) and ranges, updates
    for (a1, b1), (a2, b2) in zip(ranges, ranges[1:]):
        assert a1 <= b1 < a2 <= b2, ranges


def block(base_url: str, agent_id: str, label: str) -> str:
    r = httpx.get(f"{base_url}/v1/agents/{agent_id}", params={"include": "agent.blocks"}, timeout=30)
    r.raise_for_status()
    return next(b["value"] for b in r.json()["blocks"] if b["label"] == label)


# --------------------------------------------------------------------------- the test

def test_claude_code_and_letta_end_to_end(tmp_path, claude_sandbox, claude_code, fake_anthropic, letta_server,
                                          letta_env, agents_to_delete):
    base = letta_server.base_url
    tag = uuid.uuid4().hex[:8]
    fact1, fact2, fact3 = (f"e2e-{tag}-{n}" for n in ("run-the-linter-first", "prefer-small-commits",
                                                        "desktop-uses-zsh"))
    laptop = Machine(claude_sandbox, tmp_path, "laptop", letta_env)
    project = claude_sandbox.project_dir
    # the file Claude reads in turn 2: its content (the tool result) asks the agent to remember FACT2
    (project / "notes.txt").write_text(f"alpha\nREMEMBER guidance: {fact2}\n")
    (project / "wait_for_subconscious.py").write_text(WAIT_SCRIPT)
    times: dict[str, float] = {}

    # ---- turn 1 (startup): the transcript asks the agent to remember FACT1; the agent is slow
    run1 = laptop.run(f"[[text:Noted {tag}.]] Start of the e2e session.\n"
                      f"REMEMBER guidance: {fact1}\nLLM_WAIT_FOR {tmp_path / AGENT_GO}")
    stop1 = time.monotonic()
    times["claude -p, turn 1"] = run1.seconds
    sid = run1.session_id
    entry = laptop.store().conversation(sid)
    assert entry is not None and entry.conversation_id.startswith("conv-"), "SessionStart made no conversation"
    conv, agent_id = entry.conversation_id, entry.agent_id
    agents_to_delete.append(agent_id)
    assert laptop.store().setting("agentId") == agent_id  # imported once, pinned in the shared home
    # full mode, first prompt: the agent's memory blocks reached the model with the prompt
    first = context_after(run1.message_requests()[0].body, is_prompt("Start of the e2e session."))
    assert "<letta_memory_blocks>" in first and "<letta_memory_block label=\"guidance\" description=" in first, first[-3000:]
    assert fact1 not in block(base, agent_id, "guidance")

    # ---- turn 2 (--resume, at once): the agent is still reading turn 1 when the prompt is submitted;
    # a Bash call waits until it has caught up, then the Read call's PreToolUse brings its news.
    waiter = f"{sys.executable} wait_for_subconscious.py {laptop.sessions} {sid} {tmp_path / AGENT_GO}"
    run2 = laptop.run(f"[[tool:Bash {waiter}]] [[tool:Read {project / 'notes.txt'}]] [[text:Read {tag}.]] "
                      "Second turn.", resume=sid, timeout=240)
    times["claude -p, turn 2 (waits for the slow agent)"] = run2.seconds
    assert run2.session_id == sid
    assert laptop.store().conversation(sid).conversation_id == conv, "--resume must keep the conversation"
    prompt2 = context_after(run2.message_requests()[0].body, is_prompt("Second turn."))
    assert fact1 not in prompt2, ("precondition: the agent answered before the next prompt "
                                  f"(before the Bash call let it); UserPromptSubmit showed:\n{prompt2[:2000]}")
    (read_id,) = tool_use_ids(run2, "Read")
    after_read = context_after(request_with_result(run2, read_id), is_tool_result(read_id))
    # the very next model request after the Read tool call carries what the agent wrote and changed
    assert "<letta_update>" in after_read, after_read[:3000]
    assert agent_said_memory_insert(after_read, fact1), after_read[:3000]
    assert "<letta_memory_update>" in after_read and f"+ {fact1}" in after_read, after_read[:3000]
    assert fact2 not in after_read  # the Read had not run yet
    assert fact1 in block(base, agent_id, "guidance")
    times["Stop of turn 1 → agent done (it waits for turn 2's Bash call)"] = time.monotonic() - stop1

    # the transcript of turn 1 reached the conversation once, with what Claude answered
    times["Stop of turn 2 → delivered"] = laptop.wait_delivered(sid, run2)
    msgs = conversation_messages(base, conv)
    updates = user_texts(msgs, "<claude_code_session_update>")
    assert sum(fact1 in u for u in updates) == 1 and sum(fact2 in u for u in updates) == 1
    assert sum(said(f"Noted {tag}.") in u for u in updates) == 1  # Claude's answers, once each
    assert sum(said(f"Read {tag}.") in u for u in updates) == 1
    assert sum(f"[Tool Result: Read]\n1\talpha\n2\tREMEMBER guidance: {fact2}" in u for u in updates) == 1
    assert sum("the subconscious has caught up" in u for u in updates) == 1  # the Bash call's output
    assert_ranges_disjoint(updates)
    assert fact2 in block(base, agent_id, "guidance")
    # the shared cursor passed Claude's last answer (only bookkeeping lines written after Stop may follow)
    last_answer = max(i for i, e in enumerate(run2.transcript_entries()) if e.get("type") == "assistant")
    assert laptop.store().session(sid).last_processed_index >= last_answer

    # ---- turn 3 (--resume): UserPromptSubmit brings the agent's message and the change to its memory
    run3 = laptop.run(f"[[text:Third {tag}.]] Third turn.", resume=sid)
    times["claude -p, turn 3"] = run3.seconds
    prompt3 = context_after(run3.message_requests()[0].body, is_prompt("Third turn."))
    assert agent_said_memory_insert(prompt3, fact2), prompt3[:3000]
    assert "<letta_memory_update>" in prompt3 and f"+ {fact2}" in prompt3, prompt3[:3000]
    assert f"+ {fact1}" not in prompt3  # already shown by PreToolUse in turn 2: not again
    laptop.wait_delivered(sid, run3)
    assert laptop.store().conversation(sid).conversation_id == conv
    msgs = conversation_messages(base, conv)
    # one start message for the session, delivered once: resuming it (twice) queues no second one
    assert len(user_texts(msgs, "<claude_code_session_start>")) == 1
    assert sum(said(f"Third {tag}.") in u for u in user_texts(msgs, "<claude_code_session_update>")) == 1
    assert_ranges_disjoint(user_texts(msgs, "<claude_code_session_update>"))

    # ---- another machine: its own Claude Code, local state and host name; the same shared home
    desktop = Machine(ClaudeSandbox(tmp_path / "claude-desktop", claude_code, fake_anthropic), tmp_path,
                      "desktop", letta_env)
    run4 = desktop.run(f"[[text:Desk {tag}.]] On the desktop.\nREMEMBER guidance: {fact3}")
    times["claude -p, desktop"] = run4.seconds
    sid4 = run4.session_id
    entry4 = desktop.store().conversation(sid4)
    assert entry4.agent_id == agent_id and entry4.conversation_id != conv, "the desktop must feed the same agent"
    assert desktop.store().setting("agentId") == agent_id
    assert desktop.store().read().live[sid4].host == "desktop"
    assert not localsession.path_for(laptop.sessions, sid4).exists()  # machine-local state stayed local
    # what the agent learnt from the laptop's session is in the desktop's first prompt
    first4 = context_after(run4.message_requests()[0].body, is_prompt("On the desktop."))
    assert "<letta_memory_blocks>" in first4 and fact1 in first4 and fact2 in first4, first4[:3000]
    desktop.wait_delivered(sid4, run4)
    assert fact3 in block(base, agent_id, "guidance")
    assert sum(fact3 in u for u in user_texts(conversation_messages(base, entry4.conversation_id),
                                                "<claude_code_session_update>")) == 1

    print("\n".join(f"e2e timing: {k}: {v:.2f} s" for k, v in times.items()))
