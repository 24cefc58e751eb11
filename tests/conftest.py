"""Test-wide setup: the real-part harnesses' fixtures (Letta server, Claude Code CLI, sync engines).

Each harness installs what it needs on first use (cached outside the clone under
~/.cache/subconscious-tests, or SUBCONSCIOUS_TEST_CACHE) and starts only 127.0.0.1 services.
"""

pytest_plugins = [
    "tests.harness.letta_fixtures",
    "tests.harness.claude_fixtures",
    "tests.harness.sync_fixtures",
]
