"""`doctor` and `status` in an 80-column terminal: no line longer than the terminal, every finding's
kind, path and whole message still there (a path folded over lines joins back to itself), and --json
unchanged by the text rendering."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from subconscious.state.copynames import Engine, make_copy_name
from subconscious.state.records import SessionState
from subconscious.state.store.core import Store


def run(verb: str, *args: str, env: dict, cwd: Path, columns: int = 80) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "subconscious", verb, *args], cwd=cwd, env=env | {"COLUMNS": str(columns)},
                          capture_output=True, text=True, timeout=120)


def squeeze(text: str) -> str:
    return re.sub(r"\s+", "", text)


def test_doctor_and_status_fit_80_columns_and_lose_nothing(tmp_path):
    # a home deep in the file system (long paths) with two sync engines' conflict copies, a git conflict
    # and a session problem: the findings with the longest paths and messages there are
    letta_home = tmp_path / "Users" / "someone-with-a-long-name" / "Library" / "CloudStorage" / "Dropbox-Personal"
    state = letta_home / ".letta" / "claude"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "GIT_"))}
    env.update(LETTA_HOME=str(letta_home), SUBCONSCIOUS_HOST="laptop", SUBCONSCIOUS_STATE_DIR=str(tmp_path / "local"))
    cwd = tmp_path / "project"
    cwd.mkdir()
    a = Store(state, "laptop", tmp_path / "local" / "locks", tmp_path / "local" / "clocks")
    b = Store(state, "desktop", tmp_path / "b" / "locks", tmp_path / "b" / "clocks")
    a.put_conversation("s-a", "conv-a", "agent-1")
    sid = "0b9d6c1e-5f1e-4c7a-9a57-1f7f2c3d4e5f"
    a.update_session(sid, lambda cur: SessionState(sid, conversation_id="conv-x", last_processed_index=3))
    b.put_conversation("s-b", "conv-b", "agent-1")
    shutil.copyfile(b.view_path, state / make_copy_name(Engine.SYNCTHING, "conversations.json", host="DESKTOP-PC"))
    (state / make_copy_name(Engine.DROPBOX, f"session-{sid}.json", host="DESKTOP-PC", user="someone")).write_text(
        json.dumps(json.loads(a.session_path(sid).read_text()) | {"lastProcessedIndex": 9, "hlc": "1:0"}))
    (state / "hosts" / "desktop.json").write_text("{ not json")

    doctor = run("doctor", env=env, cwd=cwd)
    assert doctor.returncode == 1, doctor.stderr
    findings = json.loads(run("doctor", "--json", env=env, cwd=cwd).stdout)["findings"]
    assert {"conflict-copy", "unparseable"} <= {f["kind"] for f in findings}
    status = run("status", env=env, cwd=cwd)
    assert status.returncode == 0, status.stderr
    for out in (doctor.stdout, status.stdout):
        too_long = [line for line in out.splitlines() if len(line.rstrip()) > 80]
        assert not too_long, "\n".join(too_long)

    flat = squeeze(doctor.stdout)
    for f in findings:
        assert f["kind"] in doctor.stdout
        assert squeeze(f["path"]) in flat and squeeze(f["message"]) in flat, f
    assert "…" not in doctor.stdout  # folded, never cut
    status_flat = squeeze(status.stdout)
    info = json.loads(run("status", "--json", env=env, cwd=cwd).stdout)
    assert squeeze(info["home"]) in status_flat and squeeze(info["state_dir"]) in status_flat
    for p in info["problems"]:
        assert squeeze(p["message"]) in status_flat

    # the text follows the terminal: wider, the same report takes fewer lines; --json does not change
    wide = run("doctor", env=env, cwd=cwd, columns=160)
    assert len(wide.stdout.splitlines()) < len(doctor.stdout.splitlines())
    assert json.loads(run("doctor", "--json", env=env, cwd=cwd, columns=40).stdout)["findings"] == findings
