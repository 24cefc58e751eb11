"""Red team, issue 24 round 2, item 4: a forged adoption record (a shard whose ``adopted`` names the digest of
upstream's live, never-adopted entry) made every read drop that entry, and nothing said so. Now it is
reported: a read that drops an unstamped view entry as "already adopted" while no shard holds any version
of its key says so (``adopted-hidden``: status problems, doctor and doctor --json)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from subconscious.state.order import adoption_digest
from subconscious.state.store.core import Store


def test_a_forged_adoption_record_hiding_upstreams_entry_is_reported(tmp_path):
    home = tmp_path / "lh" / ".letta" / "claude"
    (home / "hosts").mkdir(parents=True)
    entry = {"conversationId": "conv-up", "agentId": "agent-a"}
    (home / "conversations.json").write_text(json.dumps({"s1": entry, "s2": {"conversationId": "conv-2",
                                                                              "agentId": "agent-a"}}))
    forged = {"format": 1, "host": "evil", "name": "evil", "clock": "1:0", "written": 0, "conversations": {},
              "settings": {}, "adopted": {"s1": [adoption_digest(entry)]}}
    (home / "hosts" / "evil.json").write_text(json.dumps(forged))
    store = Store(home, "alpha", tmp_path / "local-alpha" / "locks", tmp_path / "local-alpha" / "clocks")
    snap = store.read()
    assert sorted(snap.live) == ["s2"]  # what the record says (it may be upstream's stale rewrite) ...
    hidden = [p for p in snap.problems if p.kind == "adopted-hidden"]
    assert hidden and "s1" in hidden[0].message, snap.problems  # ... but never silently
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "GIT_"))}
    env.update(LETTA_HOME=str(tmp_path / "lh"), SUBCONSCIOUS_HOST="alpha",
               SUBCONSCIOUS_STATE_DIR=str(tmp_path / "local-alpha"))
    r = subprocess.run([sys.executable, "-m", "subconscious", "doctor", "--json"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
    found = [f for f in json.loads(r.stdout)["findings"] if f["kind"] == "adopted-hidden"]
    assert found and found[0]["path"] == "conversations.json" and "s1" in found[0]["message"], r.stdout
    assert found[0]["severity"] == "warning"
