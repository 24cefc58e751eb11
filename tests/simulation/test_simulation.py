"""The deterministic simulation, CI part (fixed seed, bounded; the full run is ``python -m tests.simulation
--full``): every schedule of two actors with up to two preemptions, seeded random schedules for more."""

from __future__ import annotations

import pytest

from .runner import CI, SEED, explore_scenario
from .scenarios import all_cases

MIN = {"hosts": 5000, "upstream": 1000, "sync": 1000, "deletes": 300, "mixed": 600}


@pytest.mark.parametrize("scenario", list(all_cases()))
def test_simulation(scenario):
    tally = explore_scenario(scenario, CI, SEED, stop_after=5)
    print("\n" + tally.line(scenario))
    details = "\n".join(f.describe() for f in tally.failures)
    assert tally.bad == 0, f"{tally.line(scenario)}\n{details}"
    assert tally.interleavings >= MIN[scenario], tally.line(scenario)
