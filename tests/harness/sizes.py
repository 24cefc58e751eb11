"""How big the suite's stress tests and searches run: the CI size by default, the full size on request.

    python -m pytest --full            # or SUBCONSCIOUS_TEST_FULL=1 python -m pytest
    python -m tests.simulation --full  # the simulation's >= 100,000-interleaving run (its own runner)

The CI size keeps every race a test is there for (the same writers, hosts and operations, fewer rounds) and
every known-finding regression test; the full size is the old, bigger run, for before a release or after a
change to the store. ``--full`` sets the variable, so writer processes the tests start see it too.
"""

from __future__ import annotations

import os

ENV = "SUBCONSCIOUS_TEST_FULL"


def full() -> bool:
    return os.environ.get(ENV, "").strip() not in ("", "0")


def size(ci: int, full_size: int) -> int:
    """``full_size`` in a full run, else ``ci``."""
    return full_size if full() else ci


# Property tests: a third of their examples at the CI size (at least 30), all of them with --full. Generated
# bad input (tests/unit/test_fuzz_inputs.py) keeps its thousands of cases at either size. A third, not a
# fixed count: Hypothesis's mutation step costs far more than the examples it adds on some strategies
# (tests/unit/test_conflict_names.py's temp-file names: 0.6 s of CPU at 100 examples, 35 s at 300).
def examples(full_count: int) -> int:
    """``max_examples`` for a property test written with its full count."""
    return full_count if full() else max(30, full_count // 3)
