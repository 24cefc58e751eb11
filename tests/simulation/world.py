"""A simulated world: replicas of the home on one simulated file system, hosts with their own local
dirs, the store under test, the actors (our operations, upstream's in-place writes, a sync engine,
stale copies) and the oracles that judge a finished run.

Oracles (see :meth:`World.check`):

1. *lost update* — at the end (everything delivered, one ``fold_all`` per host), the value every host
   reads for a key is the value of a write of it that no later write superseded. On one directory "later"
   is real time: a write that started after another finished must win over it. Across replicas the
   store's clock decides among ours (the winner is the greatest stamp among unsuperseded writes).
   Reads during the run on a shared directory are checked the same way against the writes finished
   before they started (an acknowledged write stays visible).
2. *cursor* — every reader's successive ``session(sid).last_processed_index`` never decreases, is never
   below a cursor acknowledged before the read began, and the final one is the max acknowledged
   (ours and upstream's completed writes).
3. *upstream* — upstream's completed writes are writes like any other (its new keys must be there, its
   rewrite of a key must beat the version it replaced).
4. *resurrection* — a key whose winning write is a delete must read as deleted whatever stale copy
   appeared (counted apart from lost updates).
5. *convergence* — every host's ``read().raw``, settings and ``session()`` agree; the views of every
   replica are byte-identical.
"""

from __future__ import annotations

import inspect
import json
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from subconscious.state.store import core as store_module
from subconscious.state.fs import TEMP_PREFIX
from subconscious.state.records import SessionState

from . import legacy, views
from .sched import Scheduler
from .simfs import Inode, SimFS, _Dir

DELETED = None  # the value of a delete
UPSTREAM_PARTS = 3  # upstream's in-place write: truncate, then this many partial writes (torn in between)
SEAM = "fs" in inspect.signature(store_module.Store.__init__).parameters


@dataclass
class Read:
    """What one operation saw of a key, between steps ``t0`` and ``t1``, on directory ``group``."""

    key: tuple
    value: Any
    t0: int
    t1: int
    group: str
    who: str


@dataclass
class Write(Read):
    stamp: Any = None  # (stamp, host) the store returned, for ours


@dataclass
class Verdict:
    lost: list[str] = field(default_factory=list)
    resurrected: list[str] = field(default_factory=list)
    regressions: list[str] = field(default_factory=list)
    diverged: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.resurrected or self.regressions or self.diverged or self.errors)

    def summary(self) -> str:
        parts = []
        for name in ("lost", "resurrected", "regressions", "diverged", "errors"):
            items = getattr(self, name)
            if items:
                parts.append(f"{name}: " + "; ".join(items[:3]) + (f" (+{len(items) - 3})" if len(items) > 3 else ""))
        return " | ".join(parts) or "ok"


class StoreKind:
    """How to build the store under test: through ``fs=`` (the seam) or patched (a store without it)."""

    def __init__(self, module=None, force_legacy: bool = False):
        self.module = module or store_module
        self.seam = (not force_legacy) and "fs" in inspect.signature(self.module.Store.__init__).parameters
        self.cls = self.module.Store if self.seam else legacy.legacy_store_class(self.module)

    @property
    def name(self) -> str:
        return ("seam" if self.seam else "patched") + ("" if self.module is store_module else f":{self.module.__name__}")

    def make(self, fs: SimFS, home: Path, host: str, local: Path, now: Callable[[], int]):
        kw = dict(now=now, lock_timeout=3600.0, retention_ms=10 ** 12)
        if self.seam:
            kw["fs"] = fs
        return self.cls(home, host, local / "locks", local / "clocks", **kw)

    def context(self, fs: SimFS):
        return nullcontext() if self.seam else legacy.patched(fs, self.module)


DEFAULT_KIND: StoreKind | None = None
FS_OPTIONS: dict[str, bool] = {}  # e.g. {"exchange_ok": False, "link_ok": False}: every world's file system


def default_kind() -> StoreKind:
    global DEFAULT_KIND
    if DEFAULT_KIND is None:
        DEFAULT_KIND = StoreKind()
    return DEFAULT_KIND


class World:
    def __init__(self, hosts: dict[str, str], replicas: tuple[str, ...] = ("r1",), *, kind: StoreKind | None = None,
                 exchange_ok: bool | None = None, link_ok: bool | None = None, skew: dict[str, int] | None = None):
        self.kind = kind or default_kind()
        self.sched = Scheduler()
        self.fs = SimFS(self.sched, exchange_ok=FS_OPTIONS.get("exchange_ok", True) if exchange_ok is None else exchange_ok,
                        link_ok=FS_OPTIONS.get("link_ok", True) if link_ok is None else link_ok)
        self.replicas = replicas
        self.homes = {r: Path(f"/{r}/.letta/claude") for r in replicas}
        self.hosts = dict(hosts)  # host -> replica
        self.skew = dict(skew or {})
        self.writes: list[Write] = []
        self.clobbered: list[str] = []  # upstream writes a sync engine's rename sent into an unnamed inode
        self.reads: list[Read] = []
        self.cursor_reads: dict[str, list[Read]] = {}
        self.saved: dict[str, bytes | None] = {}  # bytes kept at set-up (for stale copies)
        self.engine = SyncEngine(self, replicas[0], replicas[1]) if len(replicas) > 1 else None
        for home in self.homes.values():
            self.fs._dir(str(home), create=True)
        self.stores = {h: self._make_store(h) for h in hosts}
        self.retired: set[str] = set()  # sessions a gc retired: no host may read them afterwards

    def ctx(self):
        return self.kind.context(self.fs)

    def do(self, *fns: Callable[[], None]) -> "World":
        """Setup: run operations one after another, outside any schedule."""
        with self.ctx():
            for fn in fns:
                fn()
        return self

    def _make_store(self, host: str):
        # processes of one host share its machine-local dir; "h1.b" is a second process of host h1
        name = host.split(".")[0]
        skew = self.skew.get(name, 0)
        return self.kind.make(self.fs, self.homes[self.hosts[host]], name, Path(f"/local-{name}"),
                              lambda: int(self.fs.now() * 1000) + skew)

    # ------------------------------------------------------------------ cloning (one setup, many runs)

    def clone(self) -> "World":
        new = object.__new__(World)
        new.kind, new.replicas, new.homes, new.hosts, new.skew = self.kind, self.replicas, self.homes, self.hosts, self.skew
        new.sched = Scheduler()
        new.sched.step = self.sched.step
        fs = SimFS(new.sched, exchange_ok=self.fs.exchange_ok, link_ok=self.fs.link_ok, start_time=self.fs.start_time)
        memo: dict[int, Inode] = {}
        for path, d in self.fs.dirs.items():
            nd = fs.dirs[path] = _Dir()
            nd.subdirs = set(d.subdirs)
            for n, ino in d.files.items():
                got = memo.get(id(ino))
                if got is None:
                    got = memo[id(ino)] = Inode(ino.data, ino.mtime, ino.ino, ino.origin)
                nd.files[n] = got
        fs._ino, fs._tmp = self.fs._ino, self.fs._tmp
        new.fs = fs
        new.writes = list(self.writes)
        new.clobbered = []
        new.reads, new.cursor_reads = [], {}
        new.saved = self.saved
        new.engine = None
        if self.engine is not None:
            new.engine = SyncEngine(new, self.engine.a, self.engine.b)
            new.engine.base = dict(self.engine.base)
            new.engine.copies = self.engine.copies
        new.stores = {h: new._make_store(h) for h in new.hosts}
        new.retired = set(getattr(self, "retired", ()))
        return new

    # ------------------------------------------------------------------ time

    def _t(self) -> int:
        if not self.sched.active():  # setup: serial operations still happen one after another
            self.sched.step += 1
        return self.sched.step

    def group(self, host: str) -> str:
        return self.hosts[host]

    # ------------------------------------------------------------------ our operations (actor bodies)

    def put(self, host: str, sid: str, conv: str) -> Callable[[], None]:
        def fn():
            t0 = self._t()
            made = self.stores[host].put_conversation(sid, conv, f"agent-{host}")
            self.writes.append(Write(("conv", sid), conv, t0, self._t(), self.group(host), host, (made.stamp, made.host)))
        return fn

    def delete(self, host: str, sid: str) -> Callable[[], None]:
        def fn():
            t0 = self._t()
            self.stores[host].delete_conversation(sid)
            self.writes.append(Write(("conv", sid), DELETED, t0, self._t(), self.group(host), host))
        return fn

    def setting(self, host: str, key: str, value: Any) -> Callable[[], None]:
        def fn():
            t0 = self._t()
            self.stores[host].put_setting(key, value)
            self.writes.append(Write(("set", key), value, t0, self._t(), self.group(host), host))
        return fn

    def cursor(self, host: str, sid: str, index: int, msg: str | None = None) -> Callable[[], None]:
        """A Stop hook: the cursor goes to ``index`` (and the message id changes with it)."""
        def fn():
            t0 = self._t()
            self.stores[host].update_session(sid, lambda cur: (cur or SessionState(sid)).evolve(
                last_processed_index=index, last_seen_message_id=msg or f"m-{host}-{index}"))
            self.writes.append(Write(("cursor", sid), index, t0, self._t(), self.group(host), host))
        return fn

    def gc(self, host: str, age_ms: int) -> Callable[[], None]:
        """``subconscious gc --older-than age`` on ``host`` (its machine-local dirs are not simulated: nothing
        of this machine is in use)."""
        def fn():
            from subconscious.sync.gc import run_gc

            st = self.stores[host]
            # every host idle for the whole age (the scenarios' "40 days pass"): the clock is trusted, as
            # `gc --trust-clock` does (by default ages count from the others' newest write: retention.py)
            run_gc(st, Path(f"/local-{host.split('.')[0]}"), age_ms=age_ms, now_ms=st.now(), trust_clock=True)
        return fn

    def refresh(self, host: str) -> Callable[[], None]:
        return lambda: (self.stores[host].refresh(), None)[1]

    def fold_all(self, host: str) -> Callable[[], None]:
        return lambda: (self.stores[host].fold_all(), None)[1]

    def reader(self, host: str, sid: str, times: int = 2, *, cursor: bool = False) -> Callable[[], None]:
        name = f"reader-{host}-{sid}-{len(self.cursor_reads)}"
        self.cursor_reads[name] = []

        def fn():
            st = self.stores[host]
            for _ in range(times):
                t0 = self._t()
                if cursor:
                    s = st.session(sid)
                    r = Read(("cursor", sid), -1 if s is None else s.last_processed_index, t0, self._t(), self.group(host), name)
                    self.cursor_reads[name].append(r)
                else:
                    c = st.read().get(sid)
                    self.reads.append(Read(("conv", sid), None if c is None else c.conversation_id, t0, self._t(),
                                           self.group(host), name))
        return fn

    # ------------------------------------------------------------------ upstream's plugin (Node, in place)

    def _upstream_write(self, path: Path, change: Callable[[dict], dict]) -> None:
        got = self.fs.read(path)
        try:
            value = json.loads(got.data) if got.ok else {}
        except ValueError:
            value = {}  # a torn file reads as nothing to upstream
        if not isinstance(value, dict):
            value = {}
        data = json.dumps(change(value), indent=2).encode()
        handle = self.fs.upstream_open_trunc(path)
        named = self.fs.upstream_write_parts(handle, data, UPSTREAM_PARTS)
        if not named and self.engine is None:
            return True  # no engine to blame: a write ours sent into a nameless inode is a write ours lost
        if not named:
            # a sync engine renamed a newer version over the file between upstream's open and its write:
            # the bytes went into an inode nobody can see — lost by the engine and upstream's in-place
            # write, before any of our code could read them; not a write the store could keep
            self.clobbered.append(str(path))
            return False
        return True

    def upstream_start(self, replica: str, sid: str, conv: str, *, keep_fields: bool = False) -> Callable[[], None]:
        """Upstream's SessionStart: read the whole map, set one key ``{conversationId, agentId}``, write
        the whole file in place. ``keep_fields``: an object spread that keeps the fields it found."""
        def fn():
            t0 = self._t()

            def change(m):
                old = m.get(sid)
                entry = {"conversationId": conv, "agentId": "agent-upstream"}
                m[sid] = {**old, **entry} if keep_fields and isinstance(old, dict) else entry
                return m
            if self._upstream_write(self.homes[replica] / "conversations.json", change):
                self.writes.append(Write(("conv", sid), conv, t0, self._t(), replica, "upstream"))
        return fn

    def upstream_worker(self, replica: str, sid: str, index: int) -> Callable[[], None]:
        """Upstream's worker: read session-<sid>.json, set lastProcessedIndex, write it in place."""
        def fn():
            t0 = self._t()

            def change(m):
                if m.get("sessionId") != sid:
                    m = {"sessionId": sid, "conversationId": None, "startedAt": "2026-12-01T10:00:00.000Z"}
                m["lastProcessedIndex"] = index
                return m
            if self._upstream_write(self.homes[replica] / f"session-{sid}.json", change):
                self.writes.append(Write(("cursor", sid), index, t0, self._t(), replica, "upstream"))
        return fn

    # ------------------------------------------------------------------ stale copies, sync

    def stale_copy(self, replica: str, rel: str, data: bytes) -> Callable[[], None]:
        """An old conflict copy or a restored backup appears (``rel`` relative to the home)."""
        return lambda: self.fs.conflict_copy(self.homes[replica] / rel, data)

    def sync_pass(self, passes: int = 1) -> Callable[[], None]:
        def fn():
            for _ in range(passes):
                self.engine.sync_pass()
        return fn

    def note(self, key: tuple, value: Any, replica: str, who: str = "upstream") -> None:
        """Set-up: a write made outside our operations (a legacy entry, a copy's entry) counts too."""
        t = self._t()
        self.writes.append(Write(key, value, t, t, replica, who))

    def save(self, name: str, replica: str, rel: str) -> None:
        self.saved[name] = self.fs.peek(self.homes[replica] / rel)

    def spawn(self, name: str, fn: Callable[[], None]) -> None:
        self.sched.spawn(name, fn)

    # ------------------------------------------------------------------ running and judging

    def run(self, policy) -> Verdict:
        v = Verdict()
        views.watch(self)
        with self.ctx():
            try:
                self.sched.run(policy)
            except Exception as exc:  # deadlock or livelock
                v.errors.append(f"scheduler: {exc!r}")
                return v
            for a in self.sched.actors:
                if a.error is not None:
                    v.errors.append(f"{a.name} raised {a.error!r}")
            self.settle(v)
            self.check(v)
            views.check(self, v)
        return v

    def settle(self, v: Verdict) -> None:
        """Quiescence: deliver everything, one ``fold_all`` per host, deliver again (outside the schedule)."""
        try:
            for _ in range(4):
                if self.engine:
                    self.engine.sync_until_stable()
                for h in sorted(self.hosts):
                    self.stores[h].fold_all()
                if self.engine:
                    self.engine.sync_until_stable()
                if not self.engine or self._views_identical():
                    break
        except Exception as exc:
            v.errors.append(f"settle raised {exc!r}")

    def _views_identical(self) -> bool:
        views = {self.fs.peek(h / "conversations.json") for h in self.homes.values()}
        return len(views) == 1

    def _candidates(self, key: tuple, group: str | None, before: int | None = None) -> list[Write]:
        """Writes of ``key`` that no later write superseded (on the same directory: started after it ended).
        ``before``: only writes that could be visible at that time (started before it)."""
        ws = [w for w in self.writes if w.key == key and (before is None or w.t0 <= before)]
        out = []
        for w in ws:
            superseded = any(o is not w and o.group == w.group and o.t0 > w.t1
                             and (before is None or o.t1 < before) for o in ws)
            if not superseded:
                out.append(w)
        return out

    def check(self, v: Verdict) -> None:
        if v.errors:
            return
        snaps = {h: self.stores[h].read() for h in sorted(self.hosts)}
        keys = sorted({w.key for w in self.writes}, key=repr)
        # 1, 3, 4: final values
        for key in keys:
            kind, name = key
            if kind == "cursor":
                continue
            cands = self._candidates(key, None)
            allowed = {c.value for c in cands}
            stamped = [c for c in cands if c.stamp is not None]
            if stamped and len(stamped) == len(cands):  # only ours: the store's clock picks among them
                allowed = {max(stamped, key=lambda c: c.stamp).value}
            for h, snap in snaps.items():
                if kind == "conv":
                    c = snap.get(name)
                    got = None if c is None else c.conversation_id
                else:
                    s = snap.settings.get(name)
                    got = None if s is None else s.value
                if got not in allowed:
                    where = f"{key} on {h}: read {got!r}, allowed {sorted(map(repr, allowed))}"
                    if got is not None and DELETED in allowed:
                        v.resurrected.append(where)
                    else:
                        v.lost.append(where)
        # reads during the run (one directory): an acknowledged write stays visible
        for r in self.reads:
            cands = [c for c in self._candidates(r.key, r.group, before=r.t0) if c.group == r.group]
            started = [w for w in self.writes if w.key == r.key and w.t0 <= r.t1 and w.group == r.group]
            allowed = {c.value for c in cands} | {w.value for w in started if w.t1 >= r.t0}
            if not any(w.t1 < r.t0 for w in started):
                allowed.add(None)
            if r.value not in allowed and all(w.group == r.group for w in self.writes if w.key == r.key):
                v.lost.append(f"{r.who} read {r.key} = {r.value!r} at {r.t0}-{r.t1}, allowed {sorted(map(repr, allowed))}")
        # 2: cursors
        for name, rs in self.cursor_reads.items():
            for a, b in zip(rs, rs[1:]):
                if b.value < a.value:
                    v.regressions.append(f"{name}: {a.value} -> {b.value} (steps {a.t0}..{b.t1})")
            for r in rs:
                acked = [w.value for w in self.writes if w.key == r.key and w.t1 < r.t0 and w.group == r.group]
                if acked and r.value < max(acked):
                    v.regressions.append(f"{name}: read {r.value} at {r.t0}, below {max(acked)} acknowledged before")
        for key in keys:
            if key[0] != "cursor":
                continue
            top = max(w.value for w in self.writes if w.key == key)
            for h in sorted(self.hosts):
                s = self.stores[h].session(key[1])
                got = -1 if s is None else s.last_processed_index
                if got != top:
                    (v.regressions if got < top else v.lost).append(f"{key} on {h}: final cursor {got}, max acknowledged {top}")
        # a session retired by a gc stays retired on every host (no stale version brings it back)
        for sid in sorted(getattr(self, "retired", ())):
            for h in sorted(self.hosts):
                if self.stores[h].session(sid) is not None:
                    v.resurrected.append(f"retired session {sid} reads back on {h}")
        # 5: convergence
        first = next(iter(snaps))
        for h, snap in snaps.items():
            if snap.raw != snaps[first].raw:
                v.diverged.append(f"read().raw of {h} differs from {first}")
            if {k: s.value for k, s in snap.settings.items()} != {k: s.value for k, s in snaps[first].settings.items()}:
                v.diverged.append(f"settings of {h} differ from {first}")
        for key in keys:
            if key[0] == "cursor":
                states = {h: self.stores[h].session(key[1]) for h in sorted(self.hosts)}
                forms = {json.dumps(None if s is None else s.to_json(), sort_keys=True) for s in states.values()}
                if len(forms) > 1:
                    v.diverged.append(f"session {key[1]} differs between hosts")
        if not self._views_identical():
            v.diverged.append("conversations.json differs between replicas")


class SyncEngine:
    """Syncthing between two replicas: a file changed on one side since the last agreement is delivered to
    the other (temp file + rename, each a step); changed on both sides, the older one (by mtime) becomes
    ``<stem>.sync-conflict-YYYYMMDD-HHMMSS-<device>.<ext>`` beside the newer. The rename re-checks the target
    (as Syncthing does) and turns into a conflict if the target changed meanwhile. Temp files are ignored."""

    DEVICES = {0: "AAAAAAA", 1: "BBBBBBB"}

    def __init__(self, world: World, a: str, b: str):
        self.world, self.a, self.b = world, a, b
        self.base: dict[str, bytes] = {}
        self.copies = 0

    def _rels(self, home: Path) -> set[str]:
        fs = self.world.fs
        out = set()
        hosts = fs.dirs.get(str(home / "hosts"))
        # the whole tree, as real engines sync it: the home, hosts/, and each host's session versions
        subs = ["", "hosts", *(f"hosts/{h}" for h in sorted(hosts.subdirs))] if hosts is not None else ["", "hosts"]
        for sub in subs:
            d = home / sub if sub else home
            for n, _ in fs.files(d).items():
                if n.startswith(TEMP_PREFIX) or n.startswith(".syncthing."):
                    continue
                out.add(f"{sub}/{n}" if sub else n)
        return out

    def _copy_name(self, rel: str, side: int) -> str:
        self.copies += 1
        d, _, n = rel.rpartition("/")
        stem, dot, ext = n.rpartition(".")
        name = f"{stem}.sync-conflict-20261201-10{self.copies // 60 % 60:02d}{self.copies % 60:02d}-{self.DEVICES[side]}.{ext}"
        return f"{d}/{name}" if d else name

    def sync_pass(self) -> bool:
        fs, w = self.world.fs, self.world
        ha, hb = w.homes[self.a], w.homes[self.b]
        changed = False
        for rel in sorted(self._rels(ha) | self._rels(hb)):
            a, b = fs.peek(ha / rel), fs.peek(hb / rel)
            base = self.base.get(rel)
            if a == b:
                if a is not None:
                    self.base[rel] = a
                continue
            changed = True
            if b == base:
                self._push(rel, ha, hb, a, b, 0)
            elif a == base:
                self._push(rel, hb, ha, b, a, 1)
            else:  # both changed: the newer by mtime keeps the name, the other becomes a conflict copy
                ia, ib = fs._lookup(ha / rel), fs._lookup(hb / rel)
                ma = ia.mtime if ia else -1
                mb = ib.mtime if ib else -1
                if a is None or (b is not None and mb >= ma):
                    self._push(rel, hb, ha, b, a, 1, conflict=True)
                else:
                    self._push(rel, ha, hb, a, b, 0, conflict=True)
        return changed

    def _push(self, rel: str, src: Path, dst: Path, data: bytes | None, expect: bytes | None, side: int,
              conflict: bool = False) -> None:
        fs = self.world.fs
        target = dst / rel
        if data is None:  # deleted on src (a folded copy): delete on dst if unchanged there
            fs._point("sync-delete", target)
            if fs.peek(target) == expect:
                fs.remove(target)
                self.base.pop(rel, None)
            return
        parent = target.parent
        fs._point("sync-temp", target)
        tmp_name = f".syncthing.{target.name}.tmp"
        fs._dir(str(parent), create=True).files[tmp_name] = fs._new(data, "sync")
        fs._point("sync-rename", target)
        now = fs.peek(target)
        if now is not None and now != data and (conflict or now != expect):
            # the target changed since the scan: keep it as a conflict copy (Syncthing's rule), deliver ours
            copy = self._copy_name(rel, 1 - side)
            fs._move(target, dst / copy)
        fs._move(parent / tmp_name, target)
        self.base[rel] = data

    def sync_until_stable(self, limit: int = 20) -> None:
        for _ in range(limit):
            if not self.sync_pass():
                return
        raise RuntimeError("the sync engine did not settle")


# ---------------------------------------------------------------------------------------- legacy starts

LEGACY_START = {"on": False}  # every case's set-up world turned into an unstamped legacy home (see to_legacy)


def to_legacy(w: World) -> World:
    """The set-up world as upstream's plugin alone would have left it: ``conversations.json`` with the same
    entries unstamped (``{conversationId, agentId}``), the session views without ``hlc``/``host``, no
    ``hosts/`` (no shard, no host's session version, no adoption record). The set-up writes become writes of
    upstream (no stamp): our later writes must beat them and upstream's stale rewrites must not."""
    fs = w.fs
    for home in w.homes.values():
        view = fs.peek(home / "conversations.json")
        if view is not None:
            value = json.loads(view)
            entries = {k: {f: e[f] for f in ("conversationId", "agentId") if f in e} if isinstance(e, dict) else e
                       for k, e in value.items() if not (isinstance(e, dict) and e.get("deleted") is True)}
            fs.put(home / "conversations.json", json.dumps(entries, indent=2))
        for name, data in fs.files(home).items():
            if name.startswith("session-") and name.endswith(".json"):
                state = {k: v for k, v in json.loads(data).items() if k not in ("hlc", "host")}
                fs.put(home / name, json.dumps(state, indent=2))
        hosts = str(home / "hosts")
        for path, d in fs.dirs.items():
            if path == hosts or path.startswith(hosts + "/"):
                d.files.clear()
    # upstream never deletes: a legacy history has no deletes (a key deleted in the set-up is simply absent)
    w.writes = [write for write in w.writes if write.value is not DELETED]
    for write in w.writes:
        write.stamp = None
    return w
