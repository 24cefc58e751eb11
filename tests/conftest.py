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
