"""Issue 9's findings, each as the schedules that show it (they fail on the store of 26aa5d4, which had no
cross-host protection; run there with ``python -m tests.simulation --store-at 26aa5d4``)."""

from __future__ import annotations

from .explore import Case, exhaustive
from .sched import INF, Plan
from .scenarios import TWO, _adopted_legacy, _w
from .world import World


def _assert_clean(case: Case, bound: int = 2) -> None:
    tally = exhaustive(case, bound, stop_after=3)
    print(f"\n{tally.line(case.name)}")
    assert tally.bad == 0, "\n".join(f.describe() for f in tally.failures)


def test_cursor_never_moves_back_across_hosts():
    """Two hosts' Stop hooks on one session, one shared directory: 24 -> 25 by h1 while h2 (which read 24)
    writes its change: the cursor must stay 25 (it went back to 24, the session file's read-merge-write
    being protected only by the per-host lock)."""
    _assert_clean(Case("finding", "cursor 25 / cursor 24",
                       lambda: (w := _w()).do(w.cursor("h1", "s1", 24)),
                       lambda w: [("h1", w.cursor("h1", "s1", 25)), ("h2", w.cursor("h2", "s1", 24, "blocks"))]))


def test_six_hosts_stop_hooks_cursor_never_moves_back():
    six = {f"h{i}": "r1" for i in range(1, 7)}
    from .explore import randomized

    case = Case("finding", "six hosts", lambda: (w := _w(six)).do(w.cursor("h1", "s1", 24)),
                lambda w: [(f"h{i}", w.cursor(f"h{i}", "s1", 24 + i % 3)) for i in range(1, 7)]
                + [("reader", w.reader("h1", "s1", 3, cursor=True))])
    tally = randomized(case, 7, 200, stop_after=3)
    print(f"\n{tally.line(case.name)}")
    assert tally.bad == 0, "\n".join(f.describe() for f in tally.failures)


def test_upstream_new_entry_survives_our_concurrent_write():
    """Upstream's SessionStart adds a key (read whole map, write in place) while we write another: our
    write, based on a read that did not see the new key, must not drop it."""
    _assert_clean(Case("finding", "upstream new key / our put",
                       lambda: (w := _w()).do(w.put("h1", "s1", "c0")),
                       lambda w: [("h1", w.put("h1", "s2", "cA")), ("upstream", w.upstream_start("r1", "s3", "cU"))]))


def _serial(build, *steps) -> World:
    w = build()
    for name, fn in steps:
        w.spawn(name, fn)
    v = w.run(Plan([(i, INF) for i in range(len(steps))]))
    assert v.ok, v.summary()
    return w


def test_upstream_rewrite_of_an_adopted_legacy_entry_wins():
    """A legacy entry adopted by ours (refresh) was stamped 0:0 host ""; upstream's later rewrite of it tied
    and lost. Serially: upstream rewrites after we adopted; upstream's value must be what everyone reads."""
    w = World(TWO)
    _serial(lambda: _adopted_legacy(w), ("upstream", w.upstream_start("r1", "s1", "cU")))
    for h in w.stores:
        assert w.stores[h].read().get("s1").conversation_id == "cU"


def test_upstream_rewrite_keeping_our_fields_wins():
    """Upstream's object spread keeps our hlc and host but changes the conversation: a newer write."""
    w = World(TWO)
    _serial(lambda: w.do(w.put("h1", "s1", "c0")), ("upstream", w.upstream_start("r1", "s1", "cU", keep_fields=True)))


def test_our_put_after_upstreams_write_of_the_same_key_wins():
    """Upstream writes s3 (no hlc), then we put s3: ours started after upstream's finished and must win.
    (Found by the simulation: upstream's version, stamped when first seen, got our own write's stamp, tied
    and won on content.)"""
    w = World(TWO)
    _serial(lambda: w.do(w.put("h2", "s1", "c0")), ("upstream", w.upstream_start("r1", "s3", "cU")),
            ("h1", w.put("h1", "s3", "cA")))
    for h in w.stores:
        assert w.stores[h].read().get("s3").conversation_id == "cA"


def test_upstream_cursor_written_into_a_replaced_file_is_kept():
    """Upstream's worker opens the session file (truncating it) and we replace it before its write lands:
    the write goes into the inode we displaced. Its cursor must not be lost."""
    _assert_clean(Case("finding", "upstream worker / Stop hook",
                       lambda: (w := _w()).do(w.cursor("h1", "s1", 24)),
                       lambda w: [("h1", w.cursor("h1", "s1", 25)), ("upstream", w.upstream_worker("r1", "s1", 30))]))
