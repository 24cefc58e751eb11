"""Helpers for tests that run the real `subconscious watch`: a machine's side of a shared home, and
the watch process with its output lines collected."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from subconscious.state.store.core import Store


class Side:
    def __init__(self, tmp: Path, host: str):
        self.tmp, self.host = tmp, host
        self.letta_home = tmp / f"home-{host}"
        self.state = self.letta_home / ".letta" / "claude"
        self.local = tmp / f"local-{host}"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_"))}
        env.update(LETTA_HOME=str(self.letta_home), SUBCONSCIOUS_HOST=self.host, SUBCONSCIOUS_STATE_DIR=str(self.local))
        return env

    def store(self) -> Store:
        return Store(self.state, self.host, self.local / "locks", self.local / "clocks")


class WatchProc:
    """`subconscious watch` as a child process; its stdout lines are collected by a reader thread."""

    def __init__(self, side: Side, *args: str):
        import threading

        self.lines: list[str] = []
        self.proc = subprocess.Popen([sys.executable, "-m", "subconscious", "watch", *args], env=side.env(),
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.wait_line("watching", 30)

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_line(self, text: str, timeout: float = 20) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.lines:
                if text in line:
                    return line
            if self.proc.poll() is not None and not self.reader.is_alive():
                break
            time.sleep(0.02)
        raise AssertionError(f"no line with {text!r} from watch; got {self.lines}")

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(15)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.reader.join(5)
