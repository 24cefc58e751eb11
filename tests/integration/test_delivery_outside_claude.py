"""Issue 25, tried from outside: a real Claude Code session (``claude -p``, this repo loaded as a plugin, the
pip-installed hooks) whose second prompt is one huge markup-heavy line, delivered by the real detached worker
to the real Letta server through a recording proxy (tests/harness/fault_proxy.py, pass-through: it keeps the
exact bytes of every request body). The agent's context window is 32,000 tokens, so one update may hold
32,000 characters (delivery_plan.update_limit).

"The message" of a request is the text of one item of the body's ``messages`` array (its ``content``: a
string, or its text parts joined; for tool results, their returns joined), read from the exact bytes the proxy saw with ``json.loads``: the text the
server stores and the agent reads, so the update's XML escaping (``<`` is ``&lt;``, 4 characters), the
envelope, inserts and answers all count; the JSON string escaping of the transport (``"`` is ``\\"``) does
not, as it is not in what the agent reads. Both sizes are printed.

What must hold at that boundary: no message-sending request (POST …/messages, streaming or not) carries a
message over the bound; each transcript line is in exactly one accepted update (the update ranges follow
one another, each ordinary line's marker is in one accepted send), the huge line arrives cut with its
visible marker, never whole; the cursor ends past Claude's last answer; nothing is resent (every delivery
key is sent once, and the session has no retry pending at the end)."""

from __future__ import annotations

import json
import re
import uuid

import httpx
import pytest

from subconscious.local import sessions as localsession
from subconscious.delivery import notices
from subconscious.delivery.plan import update_limit
from subconscious.letta.messages import content_text
from subconscious.delivery.transcript import parse_line
from subconscious.delivery.update_xml import CUT_MARK, TRUNCATED
from tests.harness.claude_machine import ClaudeMachine
from tests.harness.fault_proxy import FaultProxy

pytestmark = [pytest.mark.claude, pytest.mark.letta]

SENDS = r"/messages(/async|/stream)?/?$"  # POST: a message sent to a conversation (listing is GET)
UPDATE = "<claude_code_session_update>"
CUT = CUT_MARK.split("%d")[0].strip()
WINDOW = 32_000  # tokens: the bound is 32,000 characters


@pytest.fixture
def recording_proxy(letta_server):
    p = FaultProxy(letta_server.base_url).start()
    yield p
    p.stop()


def markup(size: int, tag: str) -> str:
    """One line of ``size`` characters that looks like pasted HTML inside JSON: ``< > & "`` everywhere (the
    update's escaping makes it about 2x longer), with a marker at its start and at its end."""
    unit = '{"html": "<a href=\\"/q?x=1&y=2\\">&amp; <b>\'it\'</b></a>", "ok": true, "n": [1, 2]}, '
    head, tail = f"HUGE-START-{tag} ", f" HUGE-END-{tag}"
    body = (unit * (size // len(unit) + 1))[:size - len(head) - len(tail)]
    return head + body + tail


def message_text(m: dict) -> str:
    """A message's text: its content, or for tool results (``type: approval``) their returns joined."""
    if m.get("type") == "approval":
        return "\n".join(str(a.get("tool_return") or "") for a in m.get("approvals") or [] if isinstance(a, dict))
    return content_text(m.get("content"))


def sends(proxy: FaultProxy) -> list[dict]:
    """Every message-sending request as it left the machine: its body's bytes, status, and messages' texts."""
    out = []
    for s in proxy.seen("POST", SENDS):
        body = json.loads(s.body or b"{}")
        texts = [message_text(m) for m in body.get("messages") or [] if isinstance(m, dict)]
        out.append({"status": s.status, "bytes": len(s.body), "texts": texts})
    return out


def test_a_huge_markup_prompt_from_claude_code_is_delivered_once_within_the_bound(
        tmp_path, claude_sandbox, fake_anthropic, letta_server, letta_env, fake_llm, recording_proxy,
        agents_to_delete):
    tag = uuid.uuid4().hex[:8]
    env = {**letta_env, "LETTA_BASE_URL": recording_proxy.url, "LETTA_CONTEXT_WINDOW": str(WINDOW)}
    laptop = ClaudeMachine(claude_sandbox, tmp_path, env, allowed_tools=("Bash", "Agent", "Task"))

    # turn 1: ordinary lines (the prompt, a Bash call, its output, the answer)
    fake_anthropic.default_text = f"first-answer-{tag}"
    run1 = laptop.run(f"[[tool:Bash printf 'one-%s' {tag}]] first-prompt-{tag}", timeout=120)
    sid = run1.session_id
    entry = laptop.store().conversation(sid)
    assert entry is not None
    agents_to_delete.append(entry.agent_id)
    # turn 2: one prompt line of 100,000 characters of markup (an argument may hold 128 KiB), ordinary lines
    # after; a subagent whose task is 20,000 more (its transcript reaches the agent as an insert)
    huge, task = markup(100_000, tag), markup(20_000, "SUB" + tag)
    fake_anthropic.default_text = f"last-answer-{tag}"
    run2 = laptop.run(f"[[tool:Bash printf 'two-%s' {tag}]] second-prompt-{tag}\n{huge}\n"
                      f"[[agent:general-purpose ((text:sub-report-{tag})) {task}]]", resume=sid, timeout=180)
    assert run2.session_id == sid
    lines = run2.transcript_lines()
    assert sum(f"HUGE-END-{tag}" in ln for ln in lines) >= 1  # Claude Code kept the line whole

    last_answer = max(i for i, ln in enumerate(lines) if f"last-answer-{tag}" in ln)

    def caught_up() -> bool:
        s = localsession.load(laptop.sessions, sid)
        state = laptop.store().session(sid)
        left = [n for n in notices.load_all(laptop.sessions, sid) if n["kind"] != "answered"]
        return (state is not None and state.last_processed_index >= last_answer and s.attempt is None
                and not left and not (laptop.sessions / "pending" / sid).exists())
    laptop.wait_until(caught_up, timeout=120, failure="the worker never delivered the session")

    agent = httpx.get(f"{letta_server.base_url}/v1/agents/{entry.agent_id}", timeout=30).json()
    window = (agent.get("llm_config") or {}).get("context_window")
    bound = update_limit(window)
    assert (window, bound) == (WINDOW, 32_000)

    seen = sends(recording_proxy)
    longest = max(len(t) for s in seen for t in s["texts"])
    print(f"\nbound {bound}: {len(seen)} message-sending bodies recorded, the largest {max(s['bytes'] for s in seen)} "
          f"bytes; the longest message {longest} characters ({longest / bound:.2f}x the bound)")
    over = [(s["status"], len(t), t[:300]) for s in seen for t in s["texts"] if len(t) > bound]
    assert not over, over

    accepted = [t for s in seen if s["status"] == 200 for t in s["texts"] if UPDATE in t]
    keys = [re.search(r'<lines first="(\d+)" last="(\d+)" delivery="([^"]+)"', t) for t in accepted]
    assert all(keys), accepted
    ranges = [(int(k.group(1)), int(k.group(2))) for k in keys]
    every = [t for s in seen for t in s["texts"] if UPDATE in t]
    print(f"updates sent {len(every)}, accepted {len(accepted)}, line ranges {ranges}, transcript {len(lines)} lines")
    # nothing resent: each delivery key once, among all sends (accepted or not)
    all_keys = [re.search(r'delivery="([^"]+)"', t).group(1) for t in every]
    assert len(all_keys) == len(set(all_keys)), all_keys
    # every line once: the accepted ranges follow one another from the first line to the cursor; between
    # two, only lines with nothing to send (bookkeeping written after a Stop: the cursor passes them unsent)
    gaps = [i for (_, b), (a2, _) in zip(ranges, ranges[1:]) for i in range(b + 1, a2)]
    assert ranges[0][0] == 0 and all(b < a2 for (_, b), (a2, _) in zip(ranges, ranges[1:])), ranges
    assert not [lines[i][:300] for i in gaps if parse_line(lines[i]).entries], ranges
    cursor = laptop.store().session(sid).last_processed_index
    # the cursor may pass lines after the last update that have nothing to send (Claude Code's bookkeeping
    # written after the Stop: a full-suite run ended its updates at 60 with the cursor at 62)
    assert last_answer <= ranges[-1][1] <= cursor, (ranges, cursor, last_answer)
    assert not [lines[i][:300] for i in range(ranges[-1][1] + 1, cursor + 1) if parse_line(lines[i]).entries]
    # each ordinary line's marker in exactly one accepted send; the huge line cut, with its marker
    for marker in (f"first-prompt-{tag}", f"[Tool: Bash] printf 'one-%s' {tag}", f"one-{tag}", f"first-answer-{tag}",
                   f"second-prompt-{tag}", f"[Tool: Bash] printf 'two-%s' {tag}", f"two-{tag}", f"last-answer-{tag}",
                   f"HUGE-START-{tag}"):
        assert sum(marker in t for t in accepted) == 1, (marker, [t[:200] for t in accepted])
    assert not any(f"HUGE-END-{tag}" in t for t in every)  # never whole
    (cut,) = [t for t in accepted if f"HUGE-START-{tag}" in t]
    assert CUT in cut and "&lt;a href=" in cut
    # the subagent: its task (in its own transcript) reached the agent once, cut (at half the bound, before
    # the update's own cut), labelled
    assert sum(f"HUGE-START-SUB{tag}" in t for t in accepted) == 1, [t[:200] for t in accepted]
    assert not any(f"HUGE-END-SUB{tag}" in t for t in every)
    (sub,) = [t for t in accepted if f"HUGE-START-SUB{tag}" in t]
    assert "[Subagent general-purpose" in sub and (TRUNCATED in sub or CUT in sub)  # a subagent's message: cut
