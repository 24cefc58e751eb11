"""The cases the simulation explores, by scenario.

- ``hosts``: several hosts (and two processes of one host) on ONE shared home (NFS/SMB-like), each with its
  own machine-local lock and clock: puts, deletes, settings and cursors of the same and of different keys,
  refresh and fold racing writes, readers racing writers.
- ``upstream``: upstream's plugin writing ``conversations.json`` (SessionStart: a new key, a rewrite of ours
  or of a legacy entry, with and without keeping the fields it found) and ``session-<id>.json`` (its worker's
  cursor) in place, in two steps, racing our writes.
- ``sync``: two replicas with a Syncthing-like engine between them delivering newer files (temp + rename)
  and making conflict copies while our hosts and upstream write.
- ``deletes``: a delete racing an old conflict copy, an old shard's copy, a restored backup of the view, a
  stale copy of an upgraded legacy entry.
- ``mixed``: three to six actors of all kinds, random schedules.
"""

from __future__ import annotations

import json

from .explore import Case
from .world import World

TWO = {"h1": "r1", "h2": "r1"}
SYNC = {"h1": "r1", "h2": "r2"}
COPY = "conversations.sync-conflict-20261130-090000-CCCCCCC.json"


def _collector(scenario: str):
    """A list of cases and the function that adds one to it."""
    cases: list[Case] = []

    def case(name, build, actors, share=1.0):
        cases.append(Case(scenario, name, build, actors, share))

    return cases, case


def _w(hosts=TWO, replicas=("r1",), **kw) -> World:
    return World(hosts, replicas, **kw)


def _legacy_view(w: World, replica: str, entries: dict) -> None:
    """Upstream wrote these before (legacy: a bare id or an object without hlc)."""
    w.fs.put(w.homes[replica] / "conversations.json", json.dumps(entries, indent=2))
    for sid, v in entries.items():
        w.note(("conv", sid), v if isinstance(v, str) else v["conversationId"], replica)


# ---------------------------------------------------------------------------------------- hosts


def hosts_cases() -> list[Case]:
    c, case = _collector("hosts")

    case("put/put same key",
         lambda: (w := _w()).do(w.put("h1", "s1", "c0")),
         lambda w: [("h1", w.put("h1", "s1", "cA")), ("h2", w.put("h2", "s1", "cB"))])
    case("put/put other keys",
         lambda: (w := _w()).do(w.put("h2", "s1", "c0")),
         lambda w: [("h1", w.put("h1", "s2", "cA")), ("h2", w.put("h2", "s3", "cB"))])
    case("delete/put same key",
         lambda: (w := _w()).do(w.put("h1", "s1", "c0")),
         lambda w: [("h1", w.delete("h1", "s1")), ("h2", w.put("h2", "s1", "cB"))])
    case("delete/put other key",
         lambda: (w := _w()).do(w.put("h2", "s1", "c0")),
         lambda w: [("h1", w.delete("h1", "s1")), ("h2", w.put("h2", "s2", "cB"))])
    case("setting/setting",
         lambda: (w := _w()).do(w.setting("h1", "agent", "a0")),
         lambda w: [("h1", w.setting("h1", "agent", "a1")), ("h2", w.setting("h2", "agent", "a2"))])
    case("cursor 25 / cursor 24 (Stop hooks of two hosts)",
         lambda: (w := _w()).do(w.cursor("h1", "s1", 24)),
         lambda w: [("h1", w.cursor("h1", "s1", 25)), ("h2", w.cursor("h2", "s1", 24, "blocks"))])
    case("cursor/cursor both advance",
         lambda: (w := _w()).do(w.cursor("h1", "s1", 24)),
         lambda w: [("h1", w.cursor("h1", "s1", 30)), ("h2", w.cursor("h2", "s1", 26))])
    case("two processes of one host: put/put",
         lambda: (w := _w({"h1": "r1", "h1.b": "r1", "h2": "r1"})).do(w.put("h2", "s1", "c0")),
         lambda w: [("h1", w.put("h1", "s1", "cA")), ("h1.b", w.put("h1.b", "s1", "cB"))])
    case("two processes of one host: cursor/cursor",
         lambda: (w := _w({"h1": "r1", "h1.b": "r1", "h2": "r1"})).do(w.cursor("h2", "s1", 24)),
         lambda w: [("h1", w.cursor("h1", "s1", 25)), ("h1.b", w.cursor("h1.b", "s1", 24, "blocks"))])
    case("put/refresh",
         lambda: (w := _w()).do(w.put("h2", "s1", "c0")),
         lambda w: [("h1", w.put("h1", "s1", "cA")), ("h2", w.refresh("h2"))])
    case("put/fold_all with a conflict copy",
         lambda: _with_copy(_w()),
         lambda w: [("h1", w.put("h1", "s2", "cA")), ("h2", w.fold_all("h2"))])
    case("put/reader",
         lambda: (w := _w()).do(w.put("h2", "s1", "c0")),
         lambda w: [("h1", w.put("h1", "s1", "cA")), ("reader", w.reader("h2", "s1", 2))])
    case("cursor/reader",
         lambda: (w := _w()).do(w.cursor("h1", "s1", 24)),
         lambda w: [("h1", w.cursor("h1", "s1", 25)), ("reader", w.reader("h2", "s1", 2, cursor=True))])
    case("three hosts' shards: put/put, third host present",
         lambda: (w := _w({"h1": "r1", "h2": "r1", "h3": "r1"})).do(w.put("h3", "s1", "c0"), w.put("h1", "s2", "c1")),
         lambda w: [("h1", w.put("h1", "s1", "cA")), ("h2", w.put("h2", "s1", "cB"))])
    return c


def _with_copy(w: World) -> World:
    """A Syncthing conflict copy of the view holding an entry no shard has."""
    w.do(w.put("h1", "s1", "c0"))
    entry = {"s9": {"agentId": "agent-h3", "conversationId": "c9", "hlc": "1790000000100:0", "host": "h3"}}
    w.fs.put(w.homes["r1"] / COPY, json.dumps(entry))
    w.note(("conv", "s9"), "c9", "r1", "h3")
    return w


# ---------------------------------------------------------------------------------------- upstream


def upstream_cases() -> list[Case]:
    c, case = _collector("upstream")

    case("upstream new key / our put",
         lambda: (w := _w()).do(w.put("h1", "s1", "c0")),
         lambda w: [("h1", w.put("h1", "s2", "cA")), ("upstream", w.upstream_start("r1", "s3", "cU"))])
    case("upstream new key / our put of the same key",
         lambda: (w := _w()).do(w.put("h2", "s1", "c0")),
         lambda w: [("h1", w.put("h1", "s3", "cA")), ("upstream", w.upstream_start("r1", "s3", "cU"))])
    case("upstream rewrites our entry / our put of another",
         lambda: (w := _w()).do(w.put("h1", "s1", "c0")),
         lambda w: [("h2", w.put("h2", "s2", "cB")), ("upstream", w.upstream_start("r1", "s1", "cU"))])
    case("upstream rewrites our entry keeping its fields / our put",
         lambda: (w := _w()).do(w.put("h1", "s1", "c0")),
         lambda w: [("h2", w.put("h2", "s2", "cB")), ("upstream", w.upstream_start("r1", "s1", "cU", keep_fields=True))])
    case("upstream rewrites an adopted legacy entry / our put",
         lambda: _adopted_legacy(_w()),
         lambda w: [("h2", w.put("h2", "s2", "cB")), ("upstream", w.upstream_start("r1", "s1", "cU"))])
    case("upstream rewrites a legacy entry / our refresh adopting it",
         lambda: _legacy(_w()),
         lambda w: [("h1", w.refresh("h1")), ("upstream", w.upstream_start("r1", "s1", "cU"))])
    case("upstream new key / our delete",
         lambda: (w := _w()).do(w.put("h1", "s1", "c0")),
         lambda w: [("h1", w.delete("h1", "s1")), ("upstream", w.upstream_start("r1", "s4", "cU"))])
    case("upstream worker cursor / our Stop hook",
         lambda: (w := _w()).do(w.cursor("h1", "s1", 24)),
         lambda w: [("h1", w.cursor("h1", "s1", 25)), ("upstream", w.upstream_worker("r1", "s1", 30))])
    case("upstream worker cursor (lower) / our Stop hook",
         lambda: (w := _w()).do(w.cursor("h1", "s1", 24)),
         lambda w: [("h1", w.cursor("h1", "s1", 30)), ("upstream", w.upstream_worker("r1", "s1", 25))])
    case("upstream worker cursor / our fold_all",
         lambda: (w := _w()).do(w.cursor("h1", "s1", 24)),
         lambda w: [("h2", w.fold_all("h2")), ("upstream", w.upstream_worker("r1", "s1", 30))])
    case("upstream new key / our fold_all",
         lambda: _with_copy(_w()),
         lambda w: [("h2", w.fold_all("h2")), ("upstream", w.upstream_start("r1", "s5", "cU"))])
    return c


def _legacy(w: World) -> World:
    _legacy_view(w, "r1", {"s1": "conv-legacy", "s7": {"conversationId": "conv-7", "agentId": "a7"}})
    return w


def _adopted_legacy(w: World) -> World:
    _legacy(w)
    return w.do(w.refresh("h1"))


# ---------------------------------------------------------------------------------------- sync


def sync_cases() -> list[Case]:
    c, case = _collector("sync")

    def diverged() -> World:
        w = _w(SYNC, ("r1", "r2"))
        w.do(w.put("h1", "s1", "c1"), w.put("h2", "s2", "c2"))
        w.engine.sync_until_stable()
        w.do(w.put("h1", "s3", "c3"), w.put("h2", "s4", "c4"))  # both views changed: a conflict to come
        return w

    case("our put / engine delivering a conflicting view",
         diverged, lambda w: [("h1", w.put("h1", "s5", "cA")), ("engine", w.sync_pass())])
    case("our put of a key the other side changed / engine",
         lambda: (w := diverged()).do(w.put("h2", "s1", "c1b")),
         lambda w: [("h1", w.put("h1", "s1", "cA")), ("engine", w.sync_pass())])
    case("our delete / engine delivering the key live",
         diverged, lambda w: [("h1", w.delete("h1", "s2")), ("engine", w.sync_pass())])
    case("our Stop hook / engine delivering the session",
         lambda: (w := diverged()).do(w.cursor("h2", "s6", 24)),
         lambda w: [("h1", w.cursor("h1", "s6", 25)), ("engine", w.sync_pass())])
    case("our setting / engine",
         lambda: (w := diverged()).do(w.setting("h2", "agent", "a2")),
         lambda w: [("h1", w.setting("h1", "agent", "a1")), ("engine", w.sync_pass())])
    case("our fold_all / engine bringing copies",
         diverged, lambda w: [("h1", w.fold_all("h1")), ("engine", w.sync_pass(2))])
    case("upstream on the other replica / engine",
         diverged, lambda w: [("upstream", w.upstream_start("r2", "s8", "cU")), ("engine", w.sync_pass())])
    case("upstream worker on the other replica / engine",
         lambda: (w := diverged()).do(w.cursor("h1", "s6", 24)),
         lambda w: [("upstream", w.upstream_worker("r1", "s6", 30)), ("engine", w.sync_pass())])
    return c


# ---------------------------------------------------------------------------------------- deletes


def deletes_cases() -> list[Case]:
    c, case = _collector("deletes")

    def live() -> World:
        w = _w()
        w.do(w.put("h2", "s1", "c0"), w.put("h2", "s2", "c2"))
        w.save("view", "r1", "conversations.json")
        w.save("shard", "r1", "hosts/h2.json")
        return w

    case("delete / an old conflict copy of the view appears", live,
         lambda w: [("h1", w.delete("h1", "s1")), ("copy", w.stale_copy("r1", COPY, w.saved["view"]))])
    case("delete / an old copy of the writer's shard appears", live,
         lambda w: [("h1", w.delete("h1", "s1")),
                    ("copy", w.stale_copy("r1", "hosts/h2.sync-conflict-20261130-090000-CCCCCCC.json", w.saved["shard"]))])
    case("delete / a backup of the view restored in place", live,
         lambda w: [("h1", w.delete("h1", "s1")), ("restore", lambda: w.fs.deliver(w.homes["r1"] / "conversations.json",
                                                                                     w.saved["view"]))])
    case("delete by the writer / old copy of its own shard", live,
         lambda w: [("h2", w.delete("h2", "s1")),
                    ("copy", w.stale_copy("r1", "hosts/h2.sync-conflict-20261130-090000-CCCCCCC.json", w.saved["shard"]))])

    def legacy_deleted() -> World:
        w = _w()
        _legacy_view(w, "r1", {"s1": "conv-legacy"})
        w.save("legacy", "r1", "conversations.json")
        w.do(w.refresh("h1"), w.delete("h2", "s1"))
        return w

    case("deleted legacy entry / its old legacy view comes back", legacy_deleted,
         lambda w: [("h1", w.put("h1", "s2", "cA")), ("copy", w.stale_copy("r1", COPY, w.saved["legacy"]))])
    case("delete then fold / old copy appears", live,
         lambda w: [("h1", lambda: (w.delete("h1", "s1")(), w.fold_all("h1")())), ("copy", w.stale_copy("r1", COPY, w.saved["view"]))])
    return c


# ---------------------------------------------------------------------------------------- mixed (3+ actors)


def mixed_cases() -> list[Case]:
    c, case = _collector("mixed")

    six = {f"h{i}": "r1" for i in range(1, 7)}
    case("six hosts on one directory: Stop hooks on one session + a reader",
         lambda: (w := _w(six)).do(w.cursor("h1", "s1", 24)),
         lambda w: [(f"h{i}", w.cursor(f"h{i}", "s1", 24 + i % 3)) for i in range(1, 7)]
         + [("reader", w.reader("h1", "s1", 3, cursor=True))], 0.15)
    case("three hosts + upstream: puts of one key, a new upstream key, a reader",
         lambda: (w := _w({"h1": "r1", "h2": "r1", "h3": "r1"})).do(w.put("h1", "s1", "c0")),
         lambda w: [("h1", w.put("h1", "s1", "cA")), ("h2", w.put("h2", "s1", "cB")), ("h3", w.delete("h3", "s2")),
                    ("upstream", w.upstream_start("r1", "s3", "cU")), ("reader", w.reader("h3", "s1", 2))])
    case("hosts + upstream worker + cursor reader",
         lambda: (w := _w({"h1": "r1", "h2": "r1", "h3": "r1"})).do(w.cursor("h1", "s1", 24)),
         lambda w: [("h1", w.cursor("h1", "s1", 25)), ("h2", w.cursor("h2", "s1", 26)),
                    ("upstream", w.upstream_worker("r1", "s1", 27)), ("reader", w.reader("h3", "s1", 3, cursor=True))])
    case("two processes of one host + another host + upstream rewrite",
         lambda: (w := _w({"h1": "r1", "h1.b": "r1", "h2": "r1"})).do(w.put("h2", "s1", "c0")),
         lambda w: [("h1", w.put("h1", "s2", "cA")), ("h1.b", w.cursor("h1.b", "s1", 3)), ("h2", w.put("h2", "s2", "cB")),
                    ("upstream", w.upstream_start("r1", "s1", "cU"))])

    def replicas() -> World:
        w = _w({"h1": "r1", "h3": "r1", "h2": "r2"}, ("r1", "r2"))
        w.do(w.put("h1", "s1", "c1"), w.put("h2", "s2", "c2"))
        w.engine.sync_until_stable()
        w.save("view", "r1", "conversations.json")
        return w

    case("replicas: hosts on both + engine + upstream + stale copy after a delete",
         replicas,
         lambda w: [("h1", w.put("h1", "s3", "cA")), ("h3", w.delete("h3", "s1")), ("h2", w.put("h2", "s3", "cB")),
                    ("upstream", w.upstream_start("r2", "s4", "cU")), ("engine", w.sync_pass(2)),
                    ("copy", w.stale_copy("r2", COPY, w.saved["view"]))])
    case("replicas: Stop hooks on both sides + upstream worker + engine",
         lambda: (w := replicas()).do(w.cursor("h1", "s5", 10)),
         lambda w: [("h1", w.cursor("h1", "s5", 11)), ("h2", w.cursor("h2", "s5", 12)), ("h3", w.cursor("h3", "s5", 13)),
                    ("upstream", w.upstream_worker("r2", "s5", 14)), ("engine", w.sync_pass(2))])
    return c


def all_cases() -> dict[str, list[Case]]:
    return {"hosts": hosts_cases(), "upstream": upstream_cases(), "sync": sync_cases(),
            "deletes": deletes_cases(), "mixed": mixed_cases()}
