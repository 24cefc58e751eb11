"""Daily budgets (subconscious/budget.py, delivery_plan.py): caps per machine and across machines, counters
that merge safely in a shared home (each host writes only its own key; the total is the sum), and an update
over a cap summarised — counts, no transcript text — under the same delivery key."""
from __future__ import annotations

import json
import multiprocessing
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, strategies as st

from subconscious import budget
from subconscious.budget import Caps, Usage
from subconscious.delivery_plan import Budget, plan_update
from subconscious.localstate import Host
from subconscious.state.store import Store
from subconscious.transcript import build_update

DAY = "2026-12-01"


def lines(n: int, word: str = "hello") -> list[str]:
    out = []
    for i in range(n):
        out.append(json.dumps({"type": "user", "uuid": f"u{i}", "message": {"role": "user", "content": f"{word} {i}"}}))
        out.append(json.dumps({"type": "assistant", "uuid": f"a{i}", "message": {"role": "assistant", "content": [
            {"type": "text", "text": f"answer {i}"},
            {"type": "tool_use", "id": f"t{i}", "name": "Read", "input": {"file_path": "/w/x.py"}}]}}))
    return out


def test_caps_from_env():
    assert budget.caps_from_env({}) == Caps()
    assert budget.caps_from_env({"SUBCONSCIOUS_DAILY_CHARS": "100_000", "SUBCONSCIOUS_DAILY_TURNS_TOTAL": "1,000"}) \
        == Caps(chars=100_000, total_turns=1000)
    with pytest.raises(budget.BudgetError, match="SUBCONSCIOUS_DAILY_TURNS='ten' is not a whole number"):
        budget.caps_from_env({"SUBCONSCIOUS_DAILY_TURNS": "ten"})


usages = st.builds(Usage, st.just(DAY), st.integers(0, 10**6), st.integers(0, 1000), st.integers(0, 50))


@given(st.dictionaries(st.sampled_from(["h1", "h2", "h3", "h4"]), usages), st.integers(0, 10**5))
def test_the_total_is_the_sum_and_a_cap_is_never_passed(by_host, chars):
    everyone = budget.total(by_host, DAY)
    assert everyone.chars == sum(u.chars for u in by_host.values())
    assert everyone.turns == sum(u.turns for u in by_host.values())
    mine = by_host.get("h1", Usage(DAY))
    for caps in (Caps(chars=mine.chars + chars), Caps(total_turns=everyone.turns + 1), Caps(turns=mine.turns)):
        why = budget.over(caps, mine, everyone, chars)
        would = {"chars": mine.chars + chars, "turns": mine.turns + 1, "total_turns": everyone.turns + 1}
        passed = any(getattr(caps, k) is not None and would[k] > getattr(caps, k) for k in would)
        assert (why is not None) == passed


def test_yesterdays_or_damaged_counters_count_as_nothing():
    settings = {"usage.h1": {"day": "2026-11-30", "chars": 5, "turns": 1}, "usage.h2": "garbage",
                "usage.h3": {"day": DAY, "chars": -4, "turns": True}, "other": 1}
    got = budget.usage_by_host(settings, DAY)
    assert budget.total(got, DAY) == Usage(DAY)


def test_over_the_cap_the_backlog_is_one_summary_with_the_same_delivery_key():
    ls = lines(30, "QZZTRANSCRIPT")
    full = build_update(ls, -1, "s", max_chars=500)
    assert full.more  # the backlog would go in pieces
    room = Budget(Caps(chars=10**6), Usage(DAY), Usage(DAY))
    assert plan_update(ls, -1, "s", max_chars=500, budget=room).payload == full.payload
    tight = Budget(Caps(total_chars=50_000), Usage(DAY), Usage(DAY, chars=49_000, turns=9))
    p = plan_update(ls, -1, "s", max_chars=500, budget=tight)
    whole = build_update(ls, -1, "s")
    assert p.summarised and "daily characters of all machines: 49,000 of 50,000" in p.summarised
    assert "QZZTRANSCRIPT" not in p.payload and p.update.cursor == len(ls) - 1 and (p.first, p.last) == (0, 59)
    assert f'<lines first="0" last="59" delivery="{whole.key}"/>' in p.payload
    assert "30 user prompts, 30 answers from Claude Code, 30 tool calls (Read x30)" in p.payload


def _rt(tmp: Path, host: str):
    local = tmp / "local" / host
    return SimpleNamespace(host=Host(host, host), local=SimpleNamespace(locks=local / "locks")), \
        Store(tmp / "home", host, local / "locks", local / "clocks")


def _record_many(tmp: str, host: str, n: int) -> None:
    rt, store = _rt(Path(tmp), host)
    for _ in range(n):
        budget.record(rt, store, 10)


def test_counters_of_two_hosts_and_of_parallel_workers_on_one_host_add_up(tmp_path, monkeypatch):
    """Several worker processes of one host count at once (a machine-local lock: no count lost), another
    host counts in the same home (its own key: neither overwrites the other); every reader sees the sum."""
    monkeypatch.setenv("SUBCONSCIOUS_DAILY_TURNS_TOTAL", "19")  # counted while a cap is set (workers inherit it)
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_record_many, args=(str(tmp_path), "laptop", 5)) for _ in range(3)]
    procs.append(ctx.Process(target=_record_many, args=(str(tmp_path), "desktop", 4)))
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    _, reader = _rt(tmp_path, "reader")
    day = budget.today()
    r = budget.report(reader.read().settings, "laptop", {"SUBCONSCIOUS_DAILY_TURNS_TOTAL": "19"})
    assert r["this_machine"] == {"day": day, "chars": 150, "turns": 15, "summarised": 0}
    assert r["all_machines"]["turns"] == 19 and r["all_machines"]["chars"] == 190
    assert r["reached"] == "the daily turns of all machines: 19 of 19 used today (UTC)"
    assert "OVER BUDGET" in budget.report_line(r) and "all machines 190 chars / 19 turns" in budget.report_line(r)


def test_without_a_cap_nothing_is_counted_and_the_shard_is_not_rewritten(tmp_path, monkeypatch):
    for var in budget.ENV.values():
        monkeypatch.delenv(var, raising=False)
    rt, store = _rt(tmp_path, "laptop")
    store.put_setting("agentId", "agent-x")
    shard = tmp_path / "home" / "hosts" / "laptop.json"
    before = shard.read_bytes(), shard.stat().st_mtime_ns
    budget.record(rt, store, 500)
    assert (shard.read_bytes(), shard.stat().st_mtime_ns) == before
    assert budget.parse_usage(store.setting(budget.usage_key("laptop")), budget.today()).turns == 0
