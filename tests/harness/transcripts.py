"""Claude Code 2.1.x transcript lines in the real shape (see tests/fixtures/claude-code), for tests that
need a transcript to grow turn by turn."""

from __future__ import annotations

import json
import uuid
from pathlib import Path


class Transcript:
    def __init__(self, path: Path, session_id: str, cwd: str = "/home/alice/work/project"):
        self.path, self.session_id, self.cwd = path, session_id, cwd
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()

    def _write(self, obj: dict) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(obj) + "\n")

    def _base(self, kind: str) -> dict:
        return {"type": kind, "uuid": str(uuid.uuid4()), "timestamp": "2026-11-30T08:11:10.173Z",
                "sessionId": self.session_id, "cwd": self.cwd, "version": "2.1.332", "isSidechain": False}

    def user(self, text: str) -> "Transcript":
        self._write({**self._base("user"), "message": {"role": "user", "content": text}})
        return self

    def assistant(self, text: str) -> "Transcript":
        self._write({**self._base("assistant"),
                     "message": {"id": "msg_" + uuid.uuid4().hex[:12], "role": "assistant", "type": "message",
                                 "content": [{"type": "text", "text": text}]}})
        return self

    def bookkeeping(self) -> "Transcript":
        self._write({"type": "last-prompt", "sessionId": self.session_id, "lastPrompt": "x"})
        return self

    def line_count(self) -> int:
        return len(self.path.read_text().splitlines())
