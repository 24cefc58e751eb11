"""SIGKILL at random points during writes: every state file still parses and every write that
returned is present."""

from __future__ import annotations

import json
import os
import random
import signal
import time

import pytest

from subconscious.state.store.core import Store
from subconscious.state.textforms import TEMP_PREFIX

from tests.harness.sizes import size

from .test_store_concurrency import spawn

# Kill trials: 100 in CI (each kill still lands at a random point before, during or after a writer's writes,
# on two hosts' files), 200 with --full; SUBCONSCIOUS_CRASH_TRIALS sets any other number.
TRIALS = int(os.environ.get("SUBCONSCIOUS_CRASH_TRIALS", "") or size(100, 200))


def read_completed(proc, seen: list[str] = ()) -> list[str]:
    """The writes a killed writer reported returned: the lines already read (``seen``) and the rest of its stdout
    (a line cut by the kill has no digit at its end and does not count)."""
    out = "".join(seen) + (proc.stdout.read() if proc.stdout else "")
    return [line.split(" ", 1)[1] for line in out.splitlines() if line.startswith("ok ") and line.endswith(tuple("0123456789"))]


@pytest.mark.slow
def test_sigkill_during_writes_never_corrupts_or_loses_a_returned_write(tmp_path):
    rnd = random.Random(int(os.environ.get("SUBCONSCIOUS_CRASH_SEED", "20261130")))
    home, local = tmp_path / "home", tmp_path / "local"
    returned: set[str] = set()
    killed_mid_run = 0
    for trial in range(TRIALS):
        host = rnd.choice(["alpha", "beta"])
        proc = spawn(home, local / host, host, f"t{trial}", 40, sessions=True)
        seen: list[str] = []
        if trial % 2 == 0:
            # before or during the first writes: a random moment after the spawn (start-up is ~0.1 s when quiet)
            time.sleep(rnd.uniform(0.0, 0.3))
        else:
            # inside the writes, however loaded the machine: after the writer's n-th returned write, a random
            # moment into the next one (a clock from the spawn alone lands in start-up under load)
            n = rnd.randint(1, 39)
            while len(seen) < n and (line := proc.stdout.readline()):
                seen.append(line)
            time.sleep(rnd.uniform(0.0, 0.01))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            killed_mid_run += 1
        proc.wait()
        returned.update(read_completed(proc, seen))
        proc.stdout.close()
        proc.stderr.close()

        # every state file parses, as JSON and as our format; the view exists once a write returned (a writer
        # killed before its first write, as under load, leaves none)
        view = [home / "conversations.json"] if returned or (home / "conversations.json").exists() else []
        for path in [*view, *home.glob("hosts/*.json"), *home.glob("session-*.json")]:
            json.loads(path.read_text())
        store = Store(home, "checker", tmp_path / "checker" / "locks", tmp_path / "checker" / "clocks", read_only=True)
        snap = store.read()
        assert snap.problems == [], snap.problems
        lost = sorted(returned - set(snap.live))
        assert lost == [], f"trial {trial}: writes that returned are missing: {lost[:5]}"
        for sid in store.session_ids():
            assert store.session(sid) is not None
    assert killed_mid_run >= TRIALS // 2, "the kills should mostly land while the writer runs"
    assert len(returned) > TRIALS  # plenty of writes completed across trials
    # killed writers leave temp files behind: plain temps are never read as state and a sweep removes them;
    # a view's temp is named as a displaced version (a source: it holds nothing its writer's own files do
    # not), which the next write or fold merges and removes
    before = {p.name for p in [home / "conversations.json", *home.glob("hosts/*.json"), *home.glob("session-*.json")]}
    writer = Store(home, "alpha", local / "alpha" / "locks", local / "alpha" / "clocks")
    writer.fold_all()
    writer.sweep_temp(max_age_s=0)
    assert list(home.rglob(TEMP_PREFIX + "*")) == []
    after = {p.name for p in [home / "conversations.json", *home.glob("hosts/*.json"), *home.glob("session-*.json")]}
    # nothing was removed; a session view a killed writer never published is rebuilt from its versions
    assert before <= after and all(n.startswith("session-") for n in after - before)
    assert returned <= set(writer.read().live)
