"""The whole session lifecycle with both real programs: the real Claude Code CLI (`claude -p`, this repo as a
plugin) runs the pip-installed hooks against the real Letta server, through a subagent, `/compact`, resumes
and `/clear`. Only the two models are scripted (the fake Anthropic API runs a subagent on ``[[agent:…]]`` and
answers compaction requests with a summary; the fake LLM behind Letta edits memory on ``REMEMBER``).

What a user would notice is checked where it lands: in what Claude Code sends its model (is the memory back
after the context was replaced?) and in the agent's conversation (did every prompt, answer and the
subagent's own tool calls arrive, each once?).
"""

from __future__ import annotations

import json
import re
import time
import uuid
from pathlib import Path

import httpx
import pytest

from subconscious.local import sessions as localsession
from subconscious.delivery import notices
from tests.harness.claude_code import ClaudeRun, ClaudeSandbox
from tests.harness.claude_machine import ClaudeMachine
from tests.harness.hooks import conversation_messages, said, user_texts

pytestmark = [pytest.mark.claude, pytest.mark.letta]


class Machine(ClaudeMachine):
    """One host: a Claude Code sandbox that may run subagents, its own local state dir, the shared home."""

    def __init__(self, sandbox: ClaudeSandbox, root: Path, letta_env: dict[str, str], mode: str):
        super().__init__(sandbox, root, letta_env, mode=mode, allowed_tools=("Bash", "Read", "Agent", "Task"))

    def wait_delivered(self, sid: str, transcript: Path, timeout: float = 60) -> None:
        """Until the worker has delivered everything of ``sid``: start message, every line up to Claude's
        last answer in the file, every notice; nothing pending or in flight."""
        def caught_up() -> bool:
            lines = transcript.read_text().splitlines()
            target = max((i for i, l in enumerate(lines) if '"type":"assistant"' in l), default=-1)
            s = localsession.load(self.sessions, sid)
            state = self.store().session(sid)
            left = [n for n in notices.load_all(self.sessions, sid) if n["kind"] != "answered"]
            return (state is not None and s.pending_start is None and s.attempt is None and not left
                    and state.last_processed_index >= target and not (self.sessions / "pending" / sid).exists())
        self.wait_until(caught_up, timeout)


def sessions_seen(machine: Machine) -> set[str]:
    """The sessions our hooks have seen on this machine (the stream's session_id of a resumed run is not the
    one Claude Code gives its hooks)."""
    return {p.stem for p in machine.sessions.glob("*.json")}


def transcript_of(machine: Machine, sid: str) -> Path:
    """The transcript file Claude Code writes for ``sid`` (found by name: its directory name is the CLI's)."""
    found = list(machine.sandbox.config_dir.glob(f"projects/*/{sid}.jsonl"))
    assert len(found) == 1, found
    return found[0]


def first_request_text(run: ClaudeRun) -> str:
    return run.message_requests()[0].body_text()


def test_subagent_compact_resume_and_clear_each_reach_the_agent_once(tmp_path, claude_sandbox, letta_server,
                                                                     letta_env, agents_to_delete):
    base = letta_server.base_url
    tag = uuid.uuid4().hex[:8]
    fact = f"life-{tag}-tests-run-with-pytest"
    laptop = Machine(claude_sandbox, tmp_path, letta_env, "full")
    t0 = time.monotonic()

    # ---- turn 1: a subagent runs a Bash command of its own; the transcript asks the agent to remember FACT
    secret = f"Vq7{tag}Zx9"
    p1 = f"Prompt one {tag}.\nREMEMBER guidance: {fact}\nThe staging db password={secret}"
    run1 = laptop.run(f"[[agent:general-purpose ((tool:Bash echo sub-{tag}-ran)) ((text:Sub report {tag}.))]] "
                      f"[[text:Answer one {tag}.]] {p1}")
    (sid,) = sessions_seen(laptop)
    transcript = transcript_of(laptop, sid)
    entry = laptop.store().conversation(sid)
    conv, agent_id = entry.conversation_id, entry.agent_id
    agents_to_delete.append(agent_id)
    laptop.wait_delivered(sid, transcript)
    state = laptop.store().session(sid)
    assert state.end_reason == "other" and state.ended_at, state  # SessionEnd of `claude -p` recorded
    msgs = conversation_messages(base, conv)
    updates = user_texts(msgs, "<claude_code_session_update>")
    # the subagent's own tool call and its result reached the agent, labelled with its type, once
    sub = '<message role="subagent" agent_type="general-purpose">\n'
    assert sum(f"{sub}[Tool: Bash] echo sub-{tag}-ran\n</message>" in u for u in updates) == 1, updates
    assert sum(f"{sub}[Tool Result: Bash]\nsub-{tag}-ran\n</message>" in u for u in updates) == 1, updates
    blocks = httpx.get(f"{base}/v1/agents/{agent_id}", params={"include": "agent.blocks"}, timeout=30).json()["blocks"]
    assert any(fact in b["value"] for b in blocks)  # the agent learnt it from turn 1

    # ---- /compact (resumes the session): the context is replaced; the memory comes back into it once
    run2 = laptop.run("/compact", continue_session=True)
    assert sessions_seen(laptop) == {sid}
    laptop.wait_delivered(sid, transcript)
    run3 = laptop.run(f"[[text:Answer three {tag}.]] Prompt three {tag}.", continue_session=True)
    assert sessions_seen(laptop) == {sid}
    after = first_request_text(run3)
    first = run3.message_requests()[0].body["messages"][0]
    assert "continued from a previous conversation" in json.dumps(first), "precondition: the context was compacted"
    assert after.count("<letta_memory_blocks>") == 1 and fact in after, after[-4000:]  # back, once, with FACT
    laptop.wait_delivered(sid, transcript)
    msgs = conversation_messages(base, conv)
    compacted = user_texts(msgs, "[Claude Code compacted this session (manual)")
    # the agent heard of the compaction once, with the summary (which quotes turn 1: redacted like the transcript)
    assert len(compacted) == 1 and "All user messages" in compacted[0] and "password=[REDACTED]" in compacted[0], \
        compacted
    assert not any(secret in json.dumps(m) for m in msgs)
    assert not user_texts(msgs, 'agent_type=""')  # the compaction's own subagent is not re-sent

    # ---- /clear ends the session and starts another: memory in the new context, the old session ended
    run4 = laptop.run("/clear", continue_session=True)
    (sid2,) = sessions_seen(laptop) - {sid}
    assert laptop.store().session(sid).end_reason == "clear"
    run5 = laptop.run(f"[[text:Answer five {tag}.]] Prompt five {tag}.", continue_session=True)
    assert sessions_seen(laptop) == {sid, sid2}
    first5 = first_request_text(run5)
    assert first5.count("<letta_memory_blocks>") == 1 and fact in first5, first5[-4000:]
    transcript2 = transcript_of(laptop, sid2)
    laptop.wait_delivered(sid2, transcript2)

    # ---- every prompt and every final answer reached the agent exactly once, across all of it
    conv2 = laptop.store().conversation(sid2).conversation_id
    updates = (user_texts(conversation_messages(base, conv), "<claude_code_session_update>")
               + user_texts(conversation_messages(base, conv2), "<claude_code_session_update>"))
    for n in ("one", "three", "five"):
        prompt_in_update = re.compile(r'<message role="user">\n[^<]*' + re.escape(f"Prompt {n} {tag}."))
        assert sum(len(prompt_in_update.findall(u)) for u in updates) == 1, (n, updates)
        assert sum(u.count(said(f"Answer {n} {tag}.")) for u in updates) == 1, (n, updates)
    assert sum(u.count(said(f"Sub report {tag}.")) for u in updates) == 0  # main answers only ...
    assert sum(u.count(f"{sub}Sub report {tag}.\n</message>") for u in updates) == 1  # ... the subagent's, once
    print(f"\nlifecycle e2e: {time.monotonic() - t0:.1f} s for 5 claude runs (subagent, /compact, resume, /clear)")
