"""Red team of the 1 s lease wait (issue 24) against the hooks' deadlines: SessionEnd has 1.2 s (Claude Code
gives all SessionEnd hooks 1.5 s). With another holder keeping the session view's lease fresh (a slow or
stuck writer of another host on the same share), its update_session waited the whole LEASE_WAIT_S, the
deadline fired first: the end record (endedAt, for retention) was never written, and the deadline's log line,
landing inside the first record's import of the redaction rules, put a logging traceback on stderr. A hook's
write now waits at most an eighth of its deadline, then writes this host's files (acknowledged). Real hook
processes, real files; durations are printed, not asserted."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

from subconscious.local.log import setup
from subconscious.state.records import SessionState
from subconscious.state.store.core import Store
from subconscious.state.viewlock import lock_path


def test_session_end_records_its_end_while_another_holder_keeps_the_lease(tmp_path):
    env = dict(os.environ, LETTA_HOME=str(tmp_path / "lh"), HOME=str(tmp_path / "home"), LETTA_API_KEY="",
               LETTA_BASE_URL="http://127.0.0.1:9")
    env.pop("LETTA_DEBUG", None)
    (tmp_path / "proj").mkdir()
    home = tmp_path / "lh" / ".letta" / "claude"
    other = Store(home, "other", tmp_path / "l" / "locks", tmp_path / "l" / "clocks")
    stop = threading.Event()

    def keep(paths):
        while not stop.is_set():
            for p in paths:
                try:
                    if not p.exists():
                        p.write_bytes(b"evil 1 toucher\n")
                    os.utime(p)
                except OSError:
                    pass
            stop.wait(0.05)

    took = []
    try:
        for i in range(3):
            sid = f"sess-{i}"
            other.put_conversation(sid, f"conv-{i}", "agent-1")
            other.update_session(sid, lambda cur, sid=sid: SessionState(sid, conversation_id="c", last_processed_index=2))
            leases = [lock_path(other.view_path), lock_path(other.session_path(sid))]
            stop.clear()
            toucher = threading.Thread(target=keep, args=(leases,), daemon=True)
            toucher.start()
            t = time.monotonic()
            proc = subprocess.run([sys.executable, "-m", "subconscious", "hook", "session-end"],
                                  input=json.dumps({"session_id": sid, "cwd": str(tmp_path / "proj"), "reason": "other"}),
                                  capture_output=True, text=True, env=env, timeout=30, cwd=str(tmp_path / "proj"))
            took.append(time.monotonic() - t)
            stop.set()
            toucher.join()
            assert proc.returncode == 0 and "Traceback" not in proc.stdout + proc.stderr, proc.stderr[-2000:]
            reader = Store(home, "reader", tmp_path / "r" / "locks", tmp_path / "r" / "clocks")
            assert reader.session(sid).to_json().get("endedAt"), sid  # acknowledged: in the hook host's files
    finally:
        stop.set()
    print("session-end with a kept lease, s:", [round(x, 2) for x in took])


def test_the_deadline_line_is_logged_even_inside_the_first_records_import(tmp_path, monkeypatch, capsys):
    logger = setup(tmp_path / "logs", name="deadline")
    partial = types.ModuleType("subconscious.privacy.redact")  # as while `from .redact import redact` runs
    monkeypatch.setitem(sys.modules, "subconscious.privacy.redact", partial)
    logger.warning("hook %s: gave up after %.1f s (deadline)", "session-end", 1.2, extra={"fixed_text": True})
    logger.warning("token=sk-secretsecretsecret in a line the rules would redact")
    for h in logger.handlers:
        h.flush()
    text = (tmp_path / "logs" / "deadline.log").read_text()
    for h in list(logger.handlers):
        if getattr(h, "baseFilename", "").endswith("deadline.log"):
            logger.removeHandler(h)
            h.close()
    assert "gave up after 1.2 s (deadline)" in text
    assert "secret" not in text and "withheld" in text
    assert "Traceback" not in capsys.readouterr().err
    logging.getLogger("subconscious")
