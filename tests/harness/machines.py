"""Several simulated machines feeding one agent through one shared home, driven as Claude Code drives a
machine: real hook processes (``subconscious hook …``) and the real worker they spawn, against the real
Letta server. Each machine has its own SUBCONSCIOUS_HOST, state dir and HOME; all share one LETTA_HOME.

    laptop = Machine(tmp, machine_env(tmp, letta_env, "laptop", agent_id), "webapp")
    laptop.start(); laptop.turn("REMEMBER guidance: ..."); laptop.prompt("next")
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from subconscious.state.store.core import Store
from tests.harness.hooks import run_hook
from tests.harness.transcripts import Transcript


def machine_env(tmp: Path, letta_env: dict, host: str, agent_id: str, *, mode: str = "full") -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "CLAUDE"))}
    env.update(letta_env, HOME=str(tmp / f"user-{host}"), SUBCONSCIOUS_STATE_DIR=str(tmp / f"local-{host}"),
               SUBCONSCIOUS_HOST=host, LETTA_HOME=str(tmp / "shared"), LETTA_AGENT_ID=agent_id, LETTA_MODE=mode)
    return env


def shared_state(tmp: Path) -> Path:
    return tmp / "shared" / ".letta" / "claude"


def reader(tmp: Path) -> Store:
    """A read-only Store over the shared home (a host of its own, so it never writes a shard)."""
    return Store(shared_state(tmp), "reader", tmp / "r" / "locks", tmp / "r" / "clocks", read_only=True)


def wait_for(what: str, ok, env: dict, timeout: float = 90.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = ok()
        if got:
            return got
        time.sleep(0.2)
    log = Path(env["SUBCONSCIOUS_STATE_DIR"]) / "logs" / "subconscious.log"
    raise AssertionError(f"{what} never happened; log:\n{log.read_text()[-3000:] if log.exists() else ''}")


class Machine:
    def __init__(self, tmp: Path, env: dict, project: str):
        self.tmp, self.env = tmp, env
        self.host = env["SUBCONSCIOUS_HOST"]
        self.sid = str(uuid.uuid4())
        self.project = tmp / project
        self.project.mkdir(exist_ok=True)
        self.tr = Transcript(tmp / "t" / f"{self.sid}.jsonl", self.sid, str(self.project))
        self.base = {"session_id": self.sid, "transcript_path": str(self.tr.path), "cwd": str(self.project)}

    def _started(self) -> bool:
        path = Path(self.env["SUBCONSCIOUS_STATE_DIR"]) / "sessions" / f"{self.sid}.json"
        return path.exists() and json.loads(path.read_text()).get("pending_start") is None

    def start(self) -> None:
        """SessionStart, then wait until the worker delivered the start message."""
        run_hook("session-start", {**self.base, "hook_event_name": "SessionStart", "source": "startup"}, self.env)
        wait_for("the start message's delivery", self._started, self.env)

    def turn(self, user: str, answer: str = "ok") -> None:
        """A user/assistant exchange in the transcript, then Stop; wait until the worker delivered it."""
        self.tr.user(user).assistant(answer)
        run_hook("stop", {**self.base, "hook_event_name": "Stop", "stop_hook_active": False}, self.env)
        last = self.tr.line_count() - 1
        wait_for("the turn's delivery", lambda: (s := reader(self.tmp).session(self.sid)) is not None
                 and s.last_processed_index >= last, self.env)

    def prompt(self, text: str) -> str:
        """UserPromptSubmit: what the hook put into Claude Code's context (the agent's new notes)."""
        return run_hook("user-prompt-submit", {**self.base, "hook_event_name": "UserPromptSubmit", "prompt": text},
                        self.env).stdout

    def cli(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        proc = subprocess.run([sys.executable, "-m", "subconscious", *args], capture_output=True, text=True,
                              env=self.env, timeout=timeout, cwd=str(self.project))
        assert "Traceback" not in proc.stderr, proc.stderr
        return proc

    def json(self, *args: str) -> dict:
        """A CLI verb's ``--json`` output (the verb must succeed)."""
        proc = self.cli(*args, "--json")
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)
