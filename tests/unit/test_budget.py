"""Daily budgets (subconscious/delivery/budget.py, delivery_plan.py): caps per machine and across machines, counters
that merge safely in a shared home (each host writes only its own key; the total is the sum), and an update
over a cap summarised — counts, no transcript text — under the same delivery key."""
from __future__ import annotations

import html
import json
import multiprocessing
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, strategies as st

from subconscious.delivery import budget
from subconscious.delivery.budget import Caps, Usage
from subconscious.delivery.plan import Budget, plan_update
from subconscious.local.identity import Host
from subconscious.state.store.core import Store
from subconscious.delivery.transcript import build_update

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
    full = build_update(ls, -1, "s", max_chars=1_500)
    assert full.more  # the backlog would go in pieces
    room = Budget(Caps(chars=10**6), Usage(DAY), Usage(DAY))
    assert plan_update(ls, -1, "s", max_chars=1_500, budget=room).payload == full.payload
    tight = Budget(Caps(total_chars=50_000), Usage(DAY), Usage(DAY, chars=49_000, turns=9))
    p = plan_update(ls, -1, "s", max_chars=1_500, budget=tight)
    whole = build_update(ls, -1, "s")
    assert p.summarised and "daily characters of all machines: 49,000 of 50,000" in p.summarised
    assert "QZZTRANSCRIPT" not in p.payload and p.update.cursor == len(ls) - 1 and (p.first, p.last) == (0, 59)
    assert f'<lines first="0" last="59" delivery="{whole.key}"/>' in p.payload
    assert "30 user prompts, 30 answers from Claude Code, 30 tool calls (Read x30)" in p.payload



@pytest.mark.parametrize("names", [[f"mcp__server_{i:02d}__fetch_the_{i:02d}_thing" for i in range(80)],
                                   ["mcp__" + "<x>&" * 3_000, "Read"]])
def test_a_budget_summary_stays_within_the_bound_whatever_tools_the_backlog_used(names):
    """The summary is sent as the update: 80 distinct MCP tools or one tool named with 12,000 characters of
    markup made it 3,855 and 42,673 characters for a bound of 2,000 (the smallest a daily cap bounds an
    update to). It names the most used tools that fit (a name cut at 64 characters) and counts the others."""
    ls = []
    for i, name in enumerate(names):
        for j in range(len(names) - i):  # the first name most used
            ls.append(json.dumps({"type": "assistant", "uuid": f"a{i}-{j}", "message": {"role": "assistant", "content": [
                {"type": "tool_use", "id": f"t{i}-{j}", "name": name, "input": {}}]}}))
    tight = Budget(Caps(total_chars=50_000), Usage(DAY), Usage(DAY, chars=49_000, turns=9))
    p = plan_update(ls, -1, "s", max_chars=2_000, budget=tight)
    assert p.summarised and len(p.payload) <= 2_000, len(p.payload)
    calls = sum(range(1, len(names) + 1))
    assert f"{calls} tool calls ({names[0][:40]}" in html.unescape(p.payload)
    assert "Read x1" in p.payload or "other tools" in p.payload

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
    r = budget.report(reader.read().settings, "laptop", {"SUBCONSCIOUS_DAILY_TURNS_TOTAL": "19"},
                      home=tmp_path / "home")
    assert r["this_machine"] == {"day": day, "chars": 150, "turns": 15, "summarised": 0}
    assert r["all_machines"]["turns"] == 19 and r["all_machines"]["chars"] == 190
    assert r["reached"] == "the daily turns of all machines: 19 of 19 used today (UTC)"
    assert sorted(p.name for p in (tmp_path / "home" / "budget" / day).iterdir()) == ["desktop.json", "laptop.json"]
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


def _rt_home(tmp: Path, host: str):
    rt, store = _rt(tmp, host)
    return rt, tmp / "home"


def test_a_failed_send_releases_its_reservation_and_a_killed_workers_expires(tmp_path):
    rt, home = _rt_home(tmp_path, "laptop")
    caps = Caps(total_chars=1000)
    r = budget.reserve(rt, home, caps, 600)
    assert r.ok
    other_rt, _ = _rt_home(tmp_path, "desktop")
    refused = budget.reserve(other_rt, home, caps, 600)  # the laptop's reservation counts before its send
    assert not refused.ok and "the daily characters of all machines: 600 of 1,000" in refused.why
    budget.release(rt, home, r)  # its send failed
    assert budget.reserve(other_rt, home, caps, 600).ok
    left = budget.reserve(rt, home, caps, 300, now_s=__import__("time").time() - budget.RESERVATION_TTL_S - 5)
    assert left.ok  # a worker killed half an hour ago: its reservation no longer counts
    assert budget.reserve(other_rt, home, caps, 350).ok
    shards = budget.read_day(home, budget.today())
    assert shards["laptop"]["chars"] == 0 and shards["desktop"]["chars"] == 0  # nothing settled: nothing sent
    import stat

    day = home / "budget" / budget.today()
    assert stat.S_IMODE((day / "laptop.json").stat().st_mode) == 0o600
    assert stat.S_IMODE(day.stat().st_mode) == 0o700 and stat.S_IMODE(day.parent.stat().st_mode) == 0o700


def test_hostile_shards_in_the_shared_home_are_skipped_and_never_followed(tmp_path):
    import os

    rt, home = _rt_home(tmp_path, "laptop")
    day = budget.today()
    d = home / "budget" / day
    d.mkdir(parents=True)
    (d / "fifo.json").parent.mkdir(exist_ok=True)
    os.mkfifo(d / "fifo.json")  # a reader that opened it would hang
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"host": "link", "day": day, "chars": 10**9}))
    os.symlink(secret, d / "link.json")
    (d / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (d / "big.json").write_text(json.dumps({"host": "big", "day": day, "chars": 5, "pad": "x" * (2 << 20)}))
    (d / "liar.json").write_text(json.dumps({"host": "laptop", "day": day, "chars": 10**9}))  # another's name
    (d / "ok.json").write_text(json.dumps({"host": "ok", "day": day, "chars": 7, "turns": 1, "reserved": "no"}))
    shards = budget.read_day(home, day)
    assert sorted(shards) == ["ok"] and shards["ok"]["chars"] == 7
    assert budget.reserve(rt, home, Caps(total_chars=100), 50).ok
    # the budget directory replaced by a link out of the home: nothing is written through it
    other = tmp_path / "elsewhere"
    other.mkdir()
    import shutil

    shutil.rmtree(home / "budget")
    os.symlink(other, home / "budget")
    with pytest.raises(OSError, match="symbolic link"):
        budget.reserve(rt, home, Caps(total_chars=100), 50)
    assert list(other.iterdir()) == [] and budget.read_day(home, day) == {}


def test_huge_counts_in_other_hosts_shards_neither_crash_status_nor_the_worker(tmp_path):
    """JSON ints of thousands of digits parse; summed and printed with ',' they passed Python's int-to-text
    limit (ValueError in status and in the worker's refusal message). A count is capped instead."""
    rt, home = _rt_home(tmp_path, "laptop")
    day = budget.today()
    d = home / "budget" / day
    d.mkdir(parents=True)
    for h in "abcdefghijkl":  # twelve of 4,299 digits (each parses): their sum has 4,301
        (d / f"{h}.json").write_text('{"host": "%s", "day": "%s", "chars": %s, "turns": 1}' % (h, day, "9" * 4299))
    r = budget.reserve(rt, home, Caps(total_chars=2500), 100)
    assert not r.ok and "of 2,500 used today" in r.why
    line = budget.report_line(budget.report({}, "laptop", {"SUBCONSCIOUS_DAILY_CHARS_TOTAL": "2500"}, home=home))
    assert "OVER BUDGET" in line


def test_a_damaged_own_shard_is_kept_aside_not_overwritten(tmp_path):
    rt, home = _rt_home(tmp_path, "laptop")
    d = home / "budget" / budget.today()
    d.mkdir(parents=True)
    (d / "laptop.json").write_bytes(b'{"host": "laptop", "day": "' + budget.today().encode() + b'", "chars": 12')
    assert budget.reserve(rt, home, Caps(total_chars=100), 10).ok
    [aside] = [p for p in d.iterdir() if p.name.startswith("laptop.json.unparsed-")]
    assert aside.read_bytes().endswith(b'"chars": 12')  # the bytes kept, for doctor or a person to look at
    assert sorted(budget.read_day(home, budget.today())) == ["laptop"]


def _interleavings(n: int):
    """Every order of n hosts' two steps (write its reservation, then read every shard)."""
    import itertools

    steps = [(h, k) for h in range(n) for k in ("w", "r")]
    for perm in itertools.permutations(steps):
        if all(perm.index((h, "w")) < perm.index((h, "r")) for h in range(n)):
            yield perm


def _decide(rule: str, perm, ats, chars: int, caps: Caps) -> list[int]:
    """Which hosts go on, each deciding on what it read (the shards written before its read)."""
    day, now = DAY, max(ats) + 1
    go = []
    for h in range(len(ats)):
        seen = {f"h{o}": {**budget.empty_shard(f"h{o}", day), "reserved": {f"t{o}": {"chars": chars, "at": ats[o]}}}
                for o in range(len(ats)) if perm.index((o, "w")) < perm.index((h, "r"))}
        if rule == "visible":
            u = budget.usage_of(seen, {}, day, now, skip=f"t{h}")
        else:  # the first design: only reservations ordered before this one
            u = budget.usage_of(seen, {}, day, now, until=(ats[h], f"h{h}", f"t{h}"))
        if budget.over(caps, u.get(f"h{h}", Usage(day)), budget.total(u, day), chars) is None:
            go.append(h)
    return go


def test_every_interleaving_of_three_simultaneous_reservations_keeps_the_cap():
    """Each machine writes its reservation, then reads: explored over every order of those six steps and
    every order of their clock readings. Counting every reservation seen never lets the sends pass the cap;
    counting only those ordered before one's own (the first design) does — the 2,634 of 2,500 seen with
    three real processes."""
    import itertools

    caps, chars = Caps(total_chars=2500), 878
    broken = 0
    for ats in itertools.permutations([1000, 1001, 1002]):
        for perm in _interleavings(3):
            assert len(_decide("visible", perm, ats, chars, caps)) * chars <= 2500, (perm, ats)
            broken += len(_decide("ordered", perm, ats, chars, caps)) * chars > 2500
    assert broken > 0  # the exploration sees the race the first design had
