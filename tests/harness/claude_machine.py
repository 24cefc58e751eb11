"""One simulated host running the real Claude Code CLI (``claude -p`` in a ClaudeSandbox, this repo loaded as a
plugin) with the pip-installed hooks: its own sandbox, local state dir and host name; a home shared with the
other machines of the same ``root``.

    laptop = ClaudeMachine(claude_sandbox, tmp_path, letta_env)
    run = laptop.run("[[text:Hi.]] hello")
    laptop.wait_until(lambda: ..., timeout=60)
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Collection

from subconscious.state.store.core import Store
from tests.harness.claude_code import ClaudeRun, ClaudeSandbox


class ClaudeMachine:
    def __init__(self, sandbox: ClaudeSandbox, root: Path, letta_env: dict[str, str], *, host: str = "laptop",
                 mode: str = "full", allowed_tools: tuple[str, ...] = ("Bash", "Read"),
                 hook_events: Collection[str] = ()):
        """``hook_events``: the hook events every run must show a hook_response of (beside all of them
        succeeding quietly)."""
        self.sandbox, self.host = sandbox, host
        self.local = root / f"local-{host}"
        self.shared = root / "shared"
        self.env = {**letta_env, "LETTA_HOME": str(self.shared), "SUBCONSCIOUS_STATE_DIR": str(self.local),
                    "SUBCONSCIOUS_HOST": host, "LETTA_MODE": mode, "SUBCONSCIOUS_FETCH_TTL": "0"}
        self.path = sandbox.path_with_subconscious()
        self.allowed_tools, self.hook_events = allowed_tools, set(hook_events)

    def run(self, prompt: str, **kw: Any) -> ClaudeRun:
        """One ``claude -p`` run; it must succeed with no traceback, and every hook must succeed quietly."""
        run = self.sandbox.run(prompt, env=self.env, path=self.path, output_format="stream-json",
                               allowed_tools=self.allowed_tools, **kw)
        assert run.returncode == 0, run.describe()
        assert "Traceback" not in run.stdout + run.stderr
        responses = [e for e in run.output if isinstance(e, dict) and e.get("subtype") == "hook_response"]
        assert self.hook_events <= {r["hook_event"] for r in responses}, run.describe()
        for r in responses:  # every hook ran our command, quietly, and succeeded
            assert (r["exit_code"], r["outcome"], r["stderr"]) == (0, "success", ""), r
        return run

    @property
    def sessions(self) -> Path:
        return self.local / "sessions"

    def store(self) -> Store:
        """A read-only Store over the shared home (a host of its own, so it never writes a shard)."""
        return Store(self.shared / ".letta" / "claude", "test-reader", self.local.parent / "reader-locks",
                     self.local.parent / "reader-clocks", read_only=True)

    def wait_until(self, done: Callable[[], bool], timeout: float, failure: str = "the worker never caught up") -> float:
        """Poll ``done`` until it holds; the seconds it took. Past ``timeout``: fail with ``failure`` and the
        tail of this machine's log."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if done():
                return time.monotonic() - t0
            time.sleep(0.2)
        log = self.local / "logs" / "subconscious.log"
        raise AssertionError(f"{failure}; log:\n" + (log.read_text()[-4000:] if log.exists() else ""))
