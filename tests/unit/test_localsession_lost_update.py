"""The machine-local session file is written by several processes at once (hooks and the detached
worker). Each writes only what it changed: a hook that loaded the file before the worker delivered the
start message must not put the delivered message back (seen with the real CLI: the start message was
sent to Letta twice, because UserPromptSubmit saved its fetch time over the worker's update)."""

from __future__ import annotations

import json
import multiprocessing

from subconscious.local import sessions as localsession

SID = "0b7c2a1e-3f4d-4c5b-9a8e-1d2c3b4a5f60"


def test_a_stale_copy_does_not_undo_what_another_process_wrote(tmp_path):
    start = localsession.load(tmp_path, SID)
    start.pending_start = "<claude_code_session_start>…"
    start.transcript_path = "/t.jsonl"
    localsession.save(tmp_path, start)

    hook = localsession.load(tmp_path, SID)      # UserPromptSubmit loads, then fetches for a while
    worker = localsession.load(tmp_path, SID)
    worker.pending_start = None                  # …meanwhile the worker delivers the start message
    localsession.save(tmp_path, worker)
    hook.last_fetch_ms = 1234                    # the hook saves only its fetch time
    localsession.save(tmp_path, hook)

    now = localsession.load(tmp_path, SID)
    assert now.pending_start is None, "the delivered start message came back: it would be sent again"
    assert now.last_fetch_ms == 1234
    assert now.transcript_path == "/t.jsonl"
    assert localsession.pending(tmp_path) == [SID]  # still has a transcript to follow


def test_stop_hook_update_survives_a_worker_that_loaded_earlier(tmp_path):
    worker = localsession.load(tmp_path, SID)
    worker.pending_start = "start"
    localsession.save(tmp_path, worker)
    stop = localsession.load(tmp_path, SID)
    stop.pending_update, stop.pending_cursor = "<update/>", [-1, 7]
    localsession.save(tmp_path, stop)
    worker.pending_start = None                  # the worker finishes sending the start message
    localsession.save(tmp_path, worker)
    now = localsession.load(tmp_path, SID)
    assert (now.pending_start, now.pending_update, now.pending_cursor) == (None, "<update/>", [-1, 7])


def test_the_same_object_saved_twice_keeps_its_own_later_changes(tmp_path):
    s = localsession.load(tmp_path, SID)
    s.failures = 1
    localsession.save(tmp_path, s)
    s.failures = 0                               # back to the default: still a change of ours
    localsession.save(tmp_path, s)
    assert localsession.load(tmp_path, SID).failures == 0


def test_file_holds_only_the_public_fields(tmp_path):
    s = localsession.load(tmp_path, SID)
    s.agent_name = "Sub"
    localsession.save(tmp_path, s)
    data = json.loads(localsession.path_for(tmp_path, SID).read_text())
    assert set(data) == {f for f in localsession.LocalSession.__dataclass_fields__ if not f.startswith("_")}
    assert (localsession.path_for(tmp_path, SID).stat().st_mode & 0o777) == 0o600


def _bump(args):
    directory, field, n = args
    s = localsession.load(directory, SID)  # loaded once: its other fields go stale while the other writes
    for i in range(n):
        setattr(s, field, i + 1)
        localsession.save(directory, s)
    return True


def test_processes_writing_different_fields_at_once_lose_nothing(tmp_path):
    localsession.save(tmp_path, localsession.LocalSession(SID))
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        assert all(pool.map(_bump, [(tmp_path, "last_fetch_ms", 200), (tmp_path, "failures", 200)]))
    now = localsession.load(tmp_path, SID)
    assert (now.last_fetch_ms, now.failures) == (200, 200)
