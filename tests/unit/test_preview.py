"""``subconscious preview``: what the next delivery would send, as a user runs it — private text and secrets
already gone (and counted), the budget summary when over a cap — and not one byte or mtime of any state file
changed (the real-server side, where the worker then sends exactly the previewed text, is in
tests/integration/test_privacy_letta.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from subconscious.local import sessions as localsession
from subconscious.delivery import notices
from subconscious.delivery.transcript import answer_digest
from subconscious.state.records import SessionState
from subconscious.state.store.core import Store

SID = "0b5e7c1a-preview-test"


def _snapshot(*roots: Path) -> dict[str, tuple[bytes, int]]:
    out = {}
    for root in roots:
        for p in sorted(root.rglob("*")):
            if p.is_file():
                out[str(p)] = (p.read_bytes(), p.stat().st_mtime_ns)
            else:
                out[str(p)] = (b"<dir>", p.stat().st_mtime_ns)
    return out


def _line(kind: str, i: int, content) -> str:
    return json.dumps({"type": kind, "uuid": f"{kind}-{i}", "isSidechain": False,
                       "message": {"role": kind, "content": content}}) + "\n"


def setup(tmp: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "CLAUDE"))}
    env.update(HOME=str(tmp / "user"), SUBCONSCIOUS_STATE_DIR=str(tmp / "local"), SUBCONSCIOUS_HOST="laptop",
               LETTA_HOME=str(tmp / "shared"), LETTA_BASE_URL="http://127.0.0.1:9", LETTA_API_KEY="k-not-used",
               SUBCONSCIOUS_PRIVATE_PATHS="secrets/**")
    home = tmp / "shared" / ".letta" / "claude"
    store = Store(home, "laptop", tmp / "local" / "locks", tmp / "local" / "clocks")
    store.put_conversation(SID, "conv-preview", "agent-preview")
    store.update_session(SID, lambda cur: SessionState(SID, conversation_id="conv-preview", last_processed_index=1))
    transcript = tmp / "t" / f"{SID}.jsonl"
    transcript.parent.mkdir()
    transcript.write_text(
        _line("user", 0, "already delivered QZZOLD") + _line("assistant", 1, [{"type": "text", "text": "ok"}])
        + _line("user", 2, "deploy it, password <private>QZZPRIVATE</private> and key sk_live_51HxQv2Lk8bYt0aZ1c9dEfGhIjKlMn")
        + _line("assistant", 3, [{"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/p/secrets/db"}}])
        + _line("user", 4, [{"type": "tool_result", "tool_use_id": "t1", "content": "QZZFILE"}])
        + _line("assistant", 5, [{"type": "text", "text": "deployed QZZPUBLIC"}]))
    sessions = tmp / "local" / "sessions"
    local = localsession.LocalSession(SID, transcript_path=str(transcript), home=str(tmp / "shared"),
                                      anchor=[1, "assistant-1"])
    localsession.save(sessions, local)
    answer = "the final answer QZZNOTICE <private>QZZNOTICEPRIV</private>"  # Stop's last_assistant_message
    notices.add(sessions, SID, "answer", 6, key="answer-1", text=answer, digest=answer_digest(answer))
    return env


def preview(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "subconscious", "preview", *args], env=env, capture_output=True,
                          text=True, timeout=60)


def test_preview_shows_the_pending_lines_redacted_and_changes_nothing(tmp_path):
    env = setup(tmp_path)
    before = _snapshot(tmp_path / "local", tmp_path / "shared", tmp_path / "t")
    ran = preview(env, "--json")
    assert ran.returncode == 0, ran.stderr
    after = _snapshot(tmp_path / "local", tmp_path / "shared", tmp_path / "t")
    assert after == before  # no file written, created, removed or touched (no log file either)
    [plan] = json.loads(ran.stdout)["sessions"]
    [msg] = plan["messages"]
    assert msg["kind"] == "update" and msg["lines"] == [2, 5]
    text = msg["text"]
    for gone in ("QZZOLD", "QZZPRIVATE", "51HxQv2Lk8bYt0aZ1c9d", "QZZFILE", "QZZNOTICEPRIV"):
        assert gone not in text
    assert "the final answer QZZNOTICE [private text removed]" in text  # a notice goes as the worker sends it
    assert "deploy it, password [private text removed] and key [REDACTED]" in text and "deployed QZZPUBLIC" in text
    assert msg["removed"] == {"secrets": 1, "private_text": 2, "private_paths": 1}
    human = preview(env, "--session", SID)
    assert human.returncode == 0, human.stderr
    assert "1 message(s) would be sent to conv-preview" in human.stdout
    assert "transcript lines 2-5" in human.stdout and "removed: 2 private passage(s), 1 secret(s)" in human.stdout
    assert _snapshot(tmp_path / "local", tmp_path / "shared", tmp_path / "t") == before


def test_preview_over_the_budget_shows_the_summary(tmp_path):
    env = setup(tmp_path)
    env["SUBCONSCIOUS_DAILY_CHARS"] = "100"
    ran = preview(env, "--json")  # the default, defer: nothing is sent today, the lines wait
    assert ran.returncode == 0, ran.stderr
    got = json.loads(ran.stdout)["sessions"][0]
    assert got["messages"] == [] and any("wait for the next UTC day" in n for n in got["notes"])
    env["SUBCONSCIOUS_BUDGET_OVERFLOW"] = "summarise"
    ran = preview(env, "--json")
    assert ran.returncode == 0, ran.stderr
    [msg] = json.loads(ran.stdout)["sessions"][0]["messages"]
    assert msg["kind"] == "summary" and "this machine's daily characters: 0 of 100" in msg["summarised"]
    assert "QZZPUBLIC" not in msg["text"] and "2 user prompts" not in msg["text"]
    assert "1 user prompts, 2 answers from Claude Code, 1 tool calls (Read x1)" in msg["text"]
