"""pytest fixtures for the real Claude Code CLI.

Load with ``pytest_plugins = ["tests.harness.claude_fixtures"]`` (or ``-p tests.harness.claude_fixtures``).

- ``claude_code``      (session) the pinned CLI, installed once into the test cache
- ``fake_anthropic``   a fresh fake Anthropic API on 127.0.0.1, stopped after the test
- ``claude_sandbox``   a :class:`ClaudeSandbox` under ``tmp_path`` using both; ``.run(prompt, ...)``
- ``recording_subconscious``  a ``subconscious`` test double in the sandbox's ``bin/`` (first on
  PATH) that records each hook call; ``.records()`` returns them in order

A CLI that cannot be installed is a test failure with the reason, never a skip.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.harness.claude_code import (ClaudeCode, ClaudeCodeUnavailable, ClaudeSandbox, ensure_claude_code,
                                       read_recordings, write_recording_double)
from tests.harness.fake_anthropic import FakeAnthropic


@pytest.fixture(scope="session")
def claude_code() -> ClaudeCode:
    try:
        return ensure_claude_code()
    except ClaudeCodeUnavailable as e:
        pytest.fail("Claude Code CLI unavailable: %s" % e, pytrace=False)


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as fake:
        yield fake


@pytest.fixture
def claude_sandbox(tmp_path: Path, claude_code: ClaudeCode, fake_anthropic: FakeAnthropic) -> ClaudeSandbox:
    return ClaudeSandbox(tmp_path / "claude", claude_code, fake_anthropic)


@dataclass
class Recorder:
    script: Path
    record_dir: Path

    def records(self) -> list[dict[str, Any]]:
        return read_recordings(self.record_dir)

    def events(self) -> list[str]:
        return [r["argv"][-1] for r in self.records()]


@pytest.fixture
def recording_subconscious(claude_sandbox: ClaudeSandbox) -> Recorder:
    rec = claude_sandbox.root / "recordings"
    return Recorder(write_recording_double(claude_sandbox.bin_dir, rec), rec)
