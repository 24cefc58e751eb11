"""What leaves the machine, on the real Letta server (0.16.8) with real hook processes and the real detached
worker:

- ``<private>`` text (in a prompt, an answer, a tool result), the result of a Read on a path of
  SUBCONSCIOUS_PRIVATE_PATHS, and a sample of every secret format of the redaction corpus never reach the
  server — neither the conversation's messages nor what the model was sent — while the rest of each line does;
- ``subconscious preview`` shows the pending lines and the server receives nothing; the worker then sends
  exactly the previewed text;
- over a daily budget, the update is summarised (counts, no text), the log and ``status`` say so.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.integration.test_faults import Rig, proxy  # noqa: F401 (proxy: a fixture)

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "secrets" / "corpus.jsonl"

pytestmark = pytest.mark.letta


def one_sample_per_format() -> list[dict]:
    """The redaction corpus's shortest sample of each format (Grep hits or a cut header for key blocks)."""
    best: dict[str, dict] = {}
    for line in CORPUS.read_text(encoding="utf-8").splitlines():
        s = json.loads(line)
        if s["format"] not in best or len(s["text"]) < len(best[s["format"]]["text"]):
            best[s["format"]] = s
    return [best[f] for f in sorted(best)]


def strings(obj) -> list[str]:
    """Every string inside a JSON value (what the model was sent, decoded)."""
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for v in obj.values() for s in strings(v)]
    if isinstance(obj, list):
        return [s for v in obj for s in strings(v)]
    return []


def tool_turn(rig: Rig, name: str, tool_input: dict, result: str) -> None:
    """An assistant tool call and its result, in Claude Code's transcript shape."""
    tid = "toolu_" + uuid.uuid4().hex[:12]
    t = rig.transcript
    t._write({**t._base("assistant"), "message": {"id": "msg_" + uuid.uuid4().hex[:12], "role": "assistant",
                                                  "content": [{"type": "tool_use", "id": tid, "name": name,
                                                               "input": tool_input}]}})
    t._write({**t._base("user"), "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": tid, "content": result}]}})


def run_cli(rig: Rig, *args: str) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, "-m", "subconscious", *args], env=rig.env, capture_output=True, text=True,
                         cwd=str(rig.project), timeout=120)
    assert out.returncode == 0, out.stderr
    return out


def test_private_text_and_every_secret_format_never_reach_letta(tmp_path, proxy, letta_server, letta_agent,  # noqa: F811
                                                                letta_env, fake_llm):
    rig = Rig(tmp_path, proxy, letta_server.base_url, letta_agent["id"], letta_env, SUBCONSCIOUS_PRIVATE_PATHS="secrets/**")
    rig.start()
    private, public, secrets = [], [], []
    tag = uuid.uuid4().hex[:8]
    rig.transcript.user(f"public-prompt-{tag} deploy; the vault word is <private>QZZPRIV-PROMPT-{tag}</private> ok")
    rig.transcript.assistant(f"public-answer-{tag} <PRIVATE>QZZPRIV-ANSWER-{tag}</PRIVATE> done")
    tool_turn(rig, "Read", {"file_path": str(rig.project / "secrets" / "db.txt")}, f"QZZPRIV-FILE-{tag}")
    tool_turn(rig, "Read", {"file_path": str(rig.project / "notes.md")},
              f"public-result-{tag}\n<private>QZZPRIV-RESULT-{tag}</private>")
    private += [f"QZZPRIV-{w}-{tag}" for w in ("PROMPT", "ANSWER", "FILE", "RESULT")]
    public += [f"public-{w}-{tag}" for w in ("prompt", "answer", "result")]
    for i, sample in enumerate(one_sample_per_format()):
        marker = f"public-{sample['format']}-{tag}"
        text = f"{marker}\n{sample['text']}"
        if i % 3 == 0:
            rig.transcript.user(text)
        elif i % 3 == 1:
            rig.transcript.assistant(text)
        else:  # a tool result is cut at 1,500 characters: the marker is first, the sample short enough
            tool_turn(rig, "Bash", {"command": "cat config"}, text)
        public.append(marker)
        secrets += sample["secrets"]
    rig.transcript.bookkeeping()
    rig.hook("stop")
    rig.wait_cursor(rig.transcript.line_count() - 1, timeout=240)
    rig.wait_worker_idle()

    conversation = "\n".join(rig.user_texts())
    model_saw = "\n".join(s for r in fake_llm.chat_requests() for s in strings(r["body"]))
    for where, text in (("the conversation", conversation), ("the model's requests", model_saw)):
        for p in public:
            assert p in text, (where, p)
        for s in private + secrets:
            assert s not in text, (where, s)
    assert "[private text removed]" in conversation and "[REDACTED]" in conversation
    assert "[the result of Read on a private path (SUBCONSCIOUS_PRIVATE_PATHS) was not sent]" in conversation


def test_preview_shows_what_is_pending_sends_nothing_and_is_what_the_worker_sends(tmp_path, proxy, letta_server,  # noqa: F811
                                                                                  letta_agent, letta_env, fake_llm):
    rig = Rig(tmp_path, proxy, letta_server.base_url, letta_agent["id"], letta_env)
    rig.start()
    token = rig.turn("pending")
    before_requests, before_messages = len(rig.proxy.seen()), rig.user_texts()
    shown = json.loads(run_cli(rig, "preview", "--json").stdout)
    human = run_cli(rig, "preview", "--session", rig.sid).stdout
    assert len(rig.proxy.seen()) == before_requests  # not one request reached the server
    assert rig.user_texts() == before_messages
    [plan] = shown["sessions"]
    [msg] = plan["messages"]
    assert msg["kind"] == "update" and f"question {token}" in msg["text"] and f"answer {token}" in msg["text"]
    assert f"question {token}" in human and "transcript lines" in human

    rig.hook("stop")
    rig.wait_cursor(rig.transcript.line_count() - 1)
    rig.wait_worker_idle()
    sent = [t for t in rig.user_texts() if f"question {token}" in t]
    assert sent == [msg["text"]]  # byte for byte what preview showed
    assert json.loads(run_cli(rig, "preview", "--json").stdout)["sessions"][0]["messages"] == []


def test_over_the_daily_budget_an_update_is_summarised(tmp_path, proxy, letta_server, letta_agent, letta_env,  # noqa: F811
                                                       fake_llm):
    rig = Rig(tmp_path, proxy, letta_server.base_url, letta_agent["id"], letta_env, SUBCONSCIOUS_DAILY_TURNS="1",
              SUBCONSCIOUS_BUDGET_OVERFLOW="summarise")  # the default, defer, would keep the lines for tomorrow
    rig.start()  # the start message is today's one turn
    token = rig.turn("over")
    rig.hook("stop")
    rig.wait_cursor(rig.transcript.line_count() - 1)
    rig.wait_worker_idle()
    texts = rig.user_texts()
    assert not any(token in t for t in texts)
    [summary] = [t for t in texts if "<budget_summary>" in t]
    assert "this machine's daily turns: 1 of 1 used today (UTC)" in summary
    assert "1 user prompts, 1 answers from Claude Code" in summary
    assert re.search(r"daily budget reached .*: lines 0-\d+ summarised instead of sent", rig.log())
    status = json.loads(run_cli(rig, "status", "--json").stdout)["budget"]
    assert status["this_machine"]["turns"] == 2 and status["this_machine"]["summarised"] == 1
    assert status["reached"]
    assert "OVER BUDGET" in run_cli(rig, "status").stdout
