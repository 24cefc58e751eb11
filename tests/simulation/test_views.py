"""The view oracles' findings, each as the schedules that show it (see views.py for the oracles)."""

from __future__ import annotations

from .explore import Case, exhaustive, randomized
from .runner import SEED
from .scenarios import _w
from .world import World


def _clean(case: Case, bound: int = 2) -> None:
    tally = exhaustive(case, bound, stop_after=3)
    print(f"\n{tally.line(case.name)}")
    assert tally.bad == 0, "\n".join(f.describe() for f in tally.failures)


def test_upstreams_half_written_view_is_never_dropped():
    """Upstream truncates the view and writes it in three parts; our put reads the half-written file, and
    its publish displaced it. It removed the displaced file because it equalled the half-written bytes it
    had read, and upstream finished writing into a file with no name: its new key was gone for good."""
    _clean(Case("views", "upstream new key (torn) / our put",
                lambda: (w := _w()).do(w.put("h1", "s1", "c0")),
                lambda w: [("h1", w.put("h1", "s2", "cA")), ("upstream", w.upstream_start("r1", "s3", "cU"))]))


def test_upstreams_half_written_session_is_never_dropped():
    _clean(Case("views", "upstream worker (torn) / our Stop hook",
                lambda: (w := _w()).do(w.cursor("h1", "s1", 24)),
                lambda w: [("h1", w.cursor("h1", "s1", 25)), ("upstream", w.upstream_worker("r1", "s1", 30))]))


def test_an_acknowledged_conversation_never_leaves_the_view():
    """h2's put returns between h1's check and h1's swap: h1's older version (without h2's key) must never
    be what conversations.json holds after h2 returned."""
    _clean(Case("views", "put/put other keys",
                lambda: (w := _w()).do(w.put("h2", "s1", "c0")),
                lambda w: [("h1", w.put("h1", "s2", "cA")), ("h2", w.put("h2", "s3", "cB"))]))


def test_six_hosts_never_move_the_view_cursor_back():
    six = {f"h{i}": "r1" for i in range(1, 7)}
    case = Case("views", "six hosts, the view", lambda: (w := World(six)).do(w.cursor("h1", "s1", 24)),
                lambda w: [(f"h{i}", w.cursor(f"h{i}", "s1", 25 + i)) for i in range(1, 7)])
    tally = randomized(case, SEED, 60, stop_after=3)
    print(f"\n{tally.line(case.name)}")
    assert tally.bad == 0, "\n".join(f.describe() for f in tally.failures)
