"""Helpers for tests that drive the pipeline as Claude Code does: hook processes with JSON on stdin,
and the conversation read back straight from the Letta server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import httpx


def run_hook(event: str, data: dict, env: dict, timeout: float = 30) -> subprocess.CompletedProcess:
    """``subconscious hook <event>`` as a real process; it must exit 0 and never show a traceback."""
    proc = subprocess.run([sys.executable, "-m", "subconscious", "hook", event], input=json.dumps(data),
                          capture_output=True, text=True, env=env, timeout=timeout, cwd=data.get("cwd"))
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    return proc


def conversation_messages(base_url: str, conversation_id: str) -> list[dict]:
    """Every message of a conversation, oldest first (all pages), read from the server directly."""
    out: list[dict] = []
    seen: set = set()
    after = None
    while True:
        params: dict = {"limit": 100, "order": "asc"}
        if after:
            params["after"] = after
        r = httpx.get(f"{base_url}/v1/conversations/{conversation_id}/messages", params=params, timeout=30)
        r.raise_for_status()
        page = [m for m in r.json() if m.get("id") not in seen]
        out += page
        # Letta counts rows, and a row may list as no message: only an empty page (or one of nothing new: a
        # cursor the server did not know) is the end
        if not page:
            return out
        seen.update(m.get("id") for m in page)
        after = page[-1]["id"]


def user_texts(messages: list[dict], tag: str) -> list[str]:
    """The text (JSON for structured content) of each user message that contains ``tag``, in order."""
    out = []
    for m in messages:
        c = m.get("content")
        text = c if isinstance(c, str) else json.dumps(c)
        if m.get("message_type") == "user_message" and tag in text:
            out.append(text)
    return out


def said(text: str) -> str:
    """How Claude Code's answer ``text`` looks in a delivered transcript."""
    return f'<message role="claude_code">\n{text}\n</message>'


def times_said(updates: list[str], text: str) -> int:
    """How often Claude Code's answer ``text`` reached the agent in ``updates``: as Claude's message (a
    transcript line, or a notice of an answer the file lagged on), not as words of a prompt. A prompt
    ``[[text:Noted x.]] ...`` (the fake API's answer directive) holds the answer's words too: once the prompt
    and the answer go in two updates (the transcript's later lines came after the worker's first read), a
    plain ``text in u`` counts two."""
    return sum(u.count(said(text)) for u in updates)


# The hooks a Claude Code session runs on its way: each is checked for what it must not load.
HOOK_EVENTS = ("pre-tool-use", "user-prompt-submit", "session-start", "stop")
_LOADED_PROBE = ("import sys; from subconscious.cli import main; main(['hook', sys.argv[1]]); "
                 "import json; print('LOADED', json.dumps(sorted(sys.modules)), file=sys.stderr)")


def hook_loaded_modules(tmp: Path, letta_base_url: str) -> Iterator[tuple[str, set[str], str]]:
    """Each of HOOK_EVENTS as a real process (the CLI's ``main``, full mode, a fresh home under ``tmp``, Letta
    at ``letta_base_url``): yields the event, every module the process had loaded once the hook returned,
    and the rest of its stderr. The hook must return (a process that dies before the report fails here)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "CLAUDE"))}
    env.update(HOME=str(tmp), SUBCONSCIOUS_STATE_DIR=str(tmp / "local"), LETTA_HOME=str(tmp / "h"),
               LETTA_BASE_URL=letta_base_url, LETTA_MODE="full")
    for event in HOOK_EVENTS:
        data = {"session_id": "0b9d6c1e-5f1e-4c7a-9a57-1f7f2c3d4e5f", "hook_event_name": event, "cwd": str(tmp),
                "transcript_path": str(tmp / "t.jsonl"), "prompt": "hi", "tool_name": "Read", "tool_input": {}}
        out = subprocess.run([sys.executable, "-c", _LOADED_PROBE, event], input=json.dumps(data),
                             capture_output=True, text=True, env=env, timeout=60, cwd=tmp)
        reports = [x for x in out.stderr.splitlines() if x.startswith("LOADED ")]
        assert len(reports) == 1, (event, out.stderr[-2000:])
        said = "\n".join(x for x in out.stderr.splitlines() if not x.startswith("LOADED "))
        yield event, set(json.loads(reports[0][len("LOADED "):])), said
