"""Helpers for tests that drive the pipeline as Claude Code does: hook processes with JSON on stdin,
and the conversation read back straight from the Letta server."""

from __future__ import annotations

import json
import subprocess
import sys

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
    after = None
    while True:
        params: dict = {"limit": 100, "order": "asc"}
        if after:
            params["after"] = after
        r = httpx.get(f"{base_url}/v1/conversations/{conversation_id}/messages", params=params, timeout=30)
        r.raise_for_status()
        page = r.json()
        out += page
        if len(page) < 100:
            return out
        after = page[-1]["id"]
