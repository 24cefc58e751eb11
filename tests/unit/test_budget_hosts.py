"""The daily budget across machines, with real processes: N hosts (each its own SUBCONSCIOUS_HOST and state
dir, one shared home in a local directory) whose workers deliver at the same moment (simultaneous Stops)
against SUBCONSCIOUS_DAILY_CHARS_TOTAL. The reservation is written and checked before the send
(budget.reserve), so the characters sent in full stay within the cap plus the bound docs/privacy.md states:
(N-1) x one update, for reservations no host could see yet — here, in one directory, none."""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from pathlib import Path

import pytest

from subconscious.delivery import budget

N_HOSTS, CAP, ROUNDS = 3, 2500, 3
WORDS = "the build uses make and the deploy goes through fly with a staging step first"


def _env(tmp: Path, host: str, overflow: str, lag: bool = False) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_"))}
    env.update(LETTA_HOME=str(tmp / (f"replica-{host}" if lag else "shared")), SUBCONSCIOUS_HOST=host, SUBCONSCIOUS_STATE_DIR=str(tmp / f"local-{host}"),
               HOME=str(tmp / f"user-{host}"), LETTA_API_KEY="k", LETTA_BASE_URL="http://127.0.0.1:9",
               SUBCONSCIOUS_DAILY_CHARS_TOTAL=str(CAP), SUBCONSCIOUS_BUDGET_OVERFLOW=overflow)
    return env


def _host(tmp: str, host: str, overflow: str, barrier, out, lag: bool = False) -> None:
    """One machine, ROUNDS turns: each round a turn is written to its transcript, then — with every other
    host at once — its Stop's worker delivers (the send takes a moment, as a real agent turn does)."""
    env = _env(Path(tmp), host, overflow, lag)
    os.environ.clear()
    os.environ.update(env)
    from subconscious.local import sessions as localsession
    from subconscious.delivery import worker
    from subconscious.local.runtime import runtime
    from tests.harness.fake_letta_conv import FakeLetta
    from tests.harness.transcripts import Transcript

    rt = runtime()
    sid = f"session-{host}"
    store = rt.store()
    store.put_conversation(sid, f"conv-{host}", "agent-1")
    store.update_session(sid, lambda cur: budget_state(sid, f"conv-{host}"))
    tr = Transcript(Path(tmp) / f"{sid}.jsonl", sid, tmp)
    local = localsession.load(rt.local.root / "sessions", sid)
    local.transcript_path = str(tr.path)
    localsession.save(rt.local.root / "sessions", local)
    server = FakeLetta()
    real_send = server.send_message_streaming

    def slow_send(*a, **k):
        time.sleep(0.3)
        return real_send(*a, **k)

    server.send_message_streaming = slow_send
    for i in range(ROUNDS):
        tr.user(f"{host} turn {i}: {WORDS}").assistant(f"noted {i}")
        barrier.wait(60)  # the Stops of every host at the same moment
        result = worker.deliver(rt, sid, client=server)
        if lag:  # the sync engine carries this host's shard to the others' replicas only after the round
            barrier.wait(60)
            _push_shard(Path(tmp), host)
            barrier.wait(60)
    sent = [content for (m, _) in server.turns() for content in [m.get("content")] if m.get("message_type") == "user_message"]
    out.put({"host": host, "sent": [len(t) for t in sent], "full": [len(t) for t in sent if "<budget_summary>" not in t],
             "cursor": rt.store().session(sid).last_processed_index, "lines": tr.line_count() - 1,
             "deferred": getattr(result, "deferred_until", None), "error": result.error})


def _push_shard(tmp: Path, host: str) -> None:
    import shutil

    mine = tmp / f"replica-{host}" / ".letta" / "claude" / "budget"
    for other in tmp.glob("replica-*"):
        if other.name != f"replica-{host}":
            for f in mine.glob(f"*/{host}.json"):
                dest = other / ".letta" / "claude" / "budget" / f.parent.name
                dest.mkdir(parents=True, exist_ok=True)
                shutil.copy2(f, dest / f"{f.name}.part")
                os.replace(dest / f"{f.name}.part", dest / f.name)


def budget_state(sid: str, conv: str):
    from subconscious.state.records import SessionState

    return SessionState(sid, conversation_id=conv, agent_id="agent-1")


def _run_hosts(tmp: Path, overflow: str, lag: bool = False) -> list[dict]:
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(N_HOSTS), ctx.Queue()
    procs = [ctx.Process(target=_host, args=(str(tmp), f"host{i}", overflow, barrier, out, lag))
             for i in range(N_HOSTS)]
    for p in procs:
        p.start()
    got = []
    deadline = time.monotonic() + 180
    while len(got) < len(procs) and time.monotonic() < deadline:
        try:
            got.append(out.get(timeout=1))
        except Exception:  # noqa: BLE001 - queue.Empty: is every host still alive?
            assert all(p.is_alive() or p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert len(got) == len(procs)
    return sorted(got, key=lambda g: g["host"])


def test_simultaneous_stops_on_three_hosts_stay_within_the_total_and_defer_the_rest(tmp_path):
    got = _run_hosts(tmp_path, "defer")
    full = sum(sum(g["full"]) for g in got)
    biggest = max(max(g["full"], default=0) for g in got)
    overshoot = max(0, full - CAP)
    bound = (N_HOSTS - 1) * biggest
    print(f"\n{N_HOSTS} hosts, SUBCONSCIOUS_DAILY_CHARS_TOTAL={CAP}: {full} chars sent in full in "
          f"{sum(len(g['full']) for g in got)} updates (largest {biggest}); overshoot {overshoot} "
          f"(bound (N-1) x one update = {bound})")
    assert overshoot <= bound
    assert full <= CAP  # one directory: every reservation is seen, the cap holds exactly
    assert all(g["error"] is None for g in got), got
    assert not any("<budget_summary>" in str(g) for g in got)
    home = tmp_path / "shared" / ".letta" / "claude"
    shards = budget.read_day(home, budget.today())
    assert sum(s["chars"] for s in shards.values()) == full  # what was sent is what is counted
    assert all(not s["reserved"] for s in shards.values())  # every reservation settled or released
    waiting = [g for g in got if g["cursor"] < g["lines"]]
    assert waiting, "the cap was never reached: the test proves nothing"
    for g in waiting:  # deferred: the cursor stays, the retry is due at the next UTC midnight
        assert g["deferred"] is not None and g["deferred"] > time.time()
        assert f"session-{g['host']}" in shards[g["host"]]["deferred"]
    r = budget.report({}, "host0", _env(tmp_path, "host0", "defer"), home=home)
    assert r["deferred"] and "lines wait for the budget" in budget.report_line(r)


def test_with_a_sync_engine_that_lags_a_round_the_overshoot_stays_within_n_minus_1_updates(tmp_path):
    """Each host has its own replica of the home; its shard reaches the others only after each round (a sync
    engine slower than a turn). In a round no host sees the others' reservations: the cap can be passed by at
    most what the others reserved unseen, (N-1) x one update, never more; the round after, everyone sees it."""
    got = _run_hosts(tmp_path, "defer", lag=True)
    full = sum(sum(g["full"]) for g in got)
    biggest = max(max(g["full"], default=0) for g in got)
    overshoot, bound = max(0, full - CAP), (N_HOSTS - 1) * biggest
    print(f"\n{N_HOSTS} hosts, each seeing the others' shards one round late, SUBCONSCIOUS_DAILY_CHARS_TOTAL={CAP}: "
          f"{full} chars sent in full in {sum(len(g['full']) for g in got)} updates (largest {biggest}); "
          f"overshoot {overshoot} (bound (N-1) x one update = {bound})")
    assert overshoot <= bound
    assert all(len(g["full"]) <= 2 for g in got)  # once the shards have synced, nobody sends past the cap
    assert any(g["cursor"] < g["lines"] for g in got)


def test_tomorrow_the_deferred_lines_go_and_nothing_is_sent_twice(tmp_path, monkeypatch):
    got = _run_hosts(tmp_path, "defer")
    waiting = [g for g in got if g["cursor"] < g["lines"]]
    assert waiting
    g = waiting[0]
    monkeypatch.setattr(budget.time, "time", lambda real=time.time: real() + 86_400)  # the next UTC day
    for k, v in _env(tmp_path, g["host"], "defer").items():
        monkeypatch.setenv(k, v)
    from subconscious.delivery import worker
    from subconscious.local.runtime import runtime
    from tests.harness.fake_letta_conv import FakeLetta

    rt = runtime()
    server = FakeLetta()
    sid = f"session-{g['host']}"
    result = worker.deliver(rt, sid, client=server)
    assert result.error is None and result.deferred_until is None
    assert rt.store().session(sid).last_processed_index == g["lines"]
    firsts = [t for (m, _) in server.turns() if m.get("message_type") == "user_message"
              for t in [m.get("content")]]
    assert firsts and all("<budget_summary>" not in str(t) for t in firsts)
    assert f'first="{g["cursor"] + 1}"' in str(firsts[0])  # from the cursor on, the earlier lines not again


def test_summarise_mode_lists_what_was_summarised_for_good(tmp_path):
    got = _run_hosts(tmp_path, "summarise")
    home = tmp_path / "shared" / ".letta" / "claude"
    assert all(g["cursor"] == g["lines"] for g in got)  # the cursor moved past the summarised lines
    summaries = sum(len(g["sent"]) - len(g["full"]) for g in got)
    assert summaries >= 1
    r = budget.report({}, "host0", _env(tmp_path, "host0", "summarise"), home=home)
    good = r["summarised_for_good"]
    assert good["updates"] == summaries and good["lines"] > 0
    line = budget.report_line(r)
    assert f"summarised for good (never sent in full): {summaries} updates" in line
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "subconscious", "status", "--json"], capture_output=True, text=True,
                         env=_env(tmp_path, "host0", "summarise"), timeout=60)
    assert out.returncode == 0, out.stderr
    shown = json.loads(out.stdout)["budget"]
    assert shown["summarised_for_good"]["updates"] == summaries and shown["overflow"] == "summarise"


def test_a_server_that_fails_before_the_send_leaves_no_reservation_behind(tmp_path, monkeypatch):
    """The worker reserves, then asks the server for the conversation's newest message before it sends: a
    server down at that moment sent nothing, so nothing stays reserved (it held the budget for 30 minutes)."""
    from subconscious.local import sessions as localsession
    from subconscious.delivery import worker
    from subconscious.letta.errors import LettaConnectionError
    from subconscious.local.runtime import runtime
    from tests.harness.fake_letta_conv import FakeLetta
    from tests.harness.transcripts import Transcript

    for k, v in _env(tmp_path, "host0", "defer").items():
        monkeypatch.setenv(k, v)
    rt = runtime()
    sid = "session-host0"
    rt.store().put_conversation(sid, "conv-1", "agent-1")
    rt.store().update_session(sid, lambda cur: budget_state(sid, "conv-1"))
    tr = Transcript(tmp_path / "t.jsonl", sid, str(tmp_path)).user("hello").assistant("ok")
    local = localsession.load(rt.local.root / "sessions", sid)
    local.transcript_path = str(tr.path)
    localsession.save(rt.local.root / "sessions", local)
    server = FakeLetta()
    home = tmp_path / "shared" / ".letta" / "claude"
    listing = server.list_messages

    def down_once_reserved(*a, **k):  # the server goes down just after the reservation was written
        if budget.read_day(home, budget.today()).get("host0", {}).get("reserved"):
            raise LettaConnectionError("listing: cannot connect", "start the server")
        return listing(*a, **k)

    server.list_messages = down_once_reserved
    result = worker.deliver(rt, sid, client=server)
    assert result.error and server.sends == 0
    shards = budget.read_day(home, budget.today())
    assert shards["host0"]["reserved"] == {} and shards["host0"]["chars"] == 0


@pytest.mark.parametrize("outcome,counted", [("down", 0), ("timeout_ok", 1), ("error", 1)])
def test_a_refused_send_gives_its_reservation_back_one_that_may_have_arrived_counts(tmp_path, monkeypatch,
                                                                                   outcome, counted):
    """Connection refused: nothing reached the server, the reservation goes back. A lost reply (the run
    completed) or a failed run (the server stored the message): it may have arrived, so it counts — were
    it released, the next run would find it delivered and it would never count (the cap passed unseen)."""
    from subconscious.local import sessions as localsession
    from subconscious.delivery import worker
    from subconscious.local.runtime import runtime
    from tests.harness.fake_letta_conv import FakeLetta
    from tests.harness.transcripts import Transcript

    monkeypatch.setattr(worker.time, "sleep", lambda s: None)
    for k, v in _env(tmp_path, "host0", "defer").items():
        monkeypatch.setenv(k, v)
    rt = runtime()
    sid = "session-host0"
    rt.store().put_conversation(sid, "conv-1", "agent-1")
    rt.store().update_session(sid, lambda cur: budget_state(sid, "conv-1"))
    tr = Transcript(tmp_path / "t.jsonl", sid, str(tmp_path)).user("hello").assistant("ok")
    local = localsession.load(rt.local.root / "sessions", sid)
    local.transcript_path = str(tr.path)
    localsession.save(rt.local.root / "sessions", local)
    server = FakeLetta([outcome])
    assert worker.deliver(rt, sid, client=server).error
    shard = budget.read_day(tmp_path / "shared" / ".letta" / "claude", budget.today())["host0"]
    assert shard["reserved"] == {} and shard["turns"] == counted and (shard["chars"] > 0) == bool(counted)
    assert worker.deliver(rt, sid, client=server).error is None  # the next run settles or sends it
    shard = budget.read_day(tmp_path / "shared" / ".letta" / "claude", budget.today())["host0"]
    assert shard["turns"] >= 1 and shard["reserved"] == {}
