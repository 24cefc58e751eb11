"""Test-wide setup: the real-part harnesses' fixtures (Letta server, Claude Code CLI, sync engines).

Each harness installs what it needs on first use (cached outside the clone under
~/.cache/subconscious-tests, or SUBCONSCIOUS_TEST_CACHE) and starts only 127.0.0.1 services.
"""

import os

from hypothesis import settings

# Property tests: in CI (``CI`` set) derandomized, so a red run replays exactly; elsewhere random, and a
# failure prints the blob that replays it (``@reproduce_failure``) along with the falsifying example.
settings.register_profile("ci", derandomize=True, print_blob=True, database=None)
settings.register_profile("dev", print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

pytest_plugins = [
    "tests.harness.letta_fixtures",
    "tests.harness.claude_fixtures",
    "tests.harness.sync_fixtures",
]


import logging

import pytest


@pytest.fixture(autouse=True)
def _subconscious_logger_restored():
    """Tests that run a hook or the worker in-process set up the "subconscious" logger (its own handlers,
    no propagation); put it back after each test, so a later test's caplog sees the records again."""
    logger = logging.getLogger("subconscious")
    saved = (list(logger.handlers), logger.propagate, logger.level, logger.disabled)
    yield
    for handler in logger.handlers[:]:
        if handler not in saved[0]:
            logger.removeHandler(handler)
            try:
                handler.close()
            except Exception:  # noqa: BLE001 - a handler that cannot close is not this test's failure
                pass
    logger.handlers[:] = saved[0]
    logger.propagate, logger.level, logger.disabled = saved[1], saved[2], saved[3]

