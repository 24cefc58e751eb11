"""`subconscious demo`, the newcomer's first command: it runs without a server, shows conflicts made
and repaired, ends with lost = 0, and leaves nothing behind."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path


def test_demo_shows_conflicts_repaired_and_counts_with_nothing_lost(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "GIT_"))}
    env.update(TMPDIR=str(tmp_path), HOME=str(tmp_path / "user"), COLUMNS="140")
    r = subprocess.run([sys.executable, "-m", "subconscious", "demo"], env=env, capture_output=True, text=True,
                       timeout=300, cwd=tmp_path)
    out = r.stdout
    assert r.returncode == 0, out + r.stderr
    # conflict copies named exactly as the engines name them
    assert re.search(r"conversations\.sync-conflict-\d{8}-\d{6}-[A-Z2-7]{7}\.json", out)
    assert re.search(r"conversations \(\w+'s conflicted copy \d{4}-\d{2}-\d{2}\)\.json", out)
    # doctor before (problems, exit 1) and after --fix (clean, exit 0)
    assert "subconscious doctor on laptop (exit 1)" in out and "conflict-copy" in out
    assert "subconscious doctor --fix on laptop (exit 0)" in out and "no problems found" in out
    # the git scene: the driver merged, the clone without it was reported and repaired
    assert "merged by the driver, no conflict" in out
    assert "git-driver-missing" in out and "git-conflict-markers" in out
    # the counts
    m = re.search(r"Result: entries written (\d+), entries present (\d+), lost (\d+); every machine converged: yes", out)
    assert m, out[-2000:]
    written, present, lost = map(int, m.groups())
    assert written == present > 20 and lost == 0
    for line in re.findall(r"entries written \d+, entries present \d+ on every machine, lost 0", out):
        assert line
    assert len(re.findall(r"lost 0", out)) >= 3
    # nothing left behind: the workspace and no stray files in the temp dir or the user's home
    ws = re.search(r"workspace: (\S+)", out).group(1)
    assert not Path(ws).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    print(f"\n[demo] {out.strip().splitlines()[-1]}")


def test_demo_keep_keeps_the_workspace(tmp_path):
    keep = tmp_path / "ws"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "GIT_"))}
    r = subprocess.run([sys.executable, "-m", "subconscious", "demo", "--keep", str(keep), "--no-git", "--sessions", "2"],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (keep / "replicas" / "laptop" / ".letta" / "claude" / "conversations.json").exists()
    assert subprocess.run([sys.executable, "-m", "subconscious", "demo", "--keep", str(keep)], env=env,
                          capture_output=True, text=True).returncode == 2
