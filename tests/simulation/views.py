"""Oracles on the view files — what upstream's plugin reads: ``conversations.json`` and ``session-<id>.json``
in every replica's home, looked at after EVERY step of every schedule (not only at the end).

Whenever a view holds bytes that one of our stores published (the simulated inode's ``origin`` is
``"store"``; what upstream, a sync engine or a copy put there is theirs, judged by the other oracles), it must

1. parse whole (we never publish a torn file);
2. hold every conversation acknowledged on that directory: for each key with a write of ours finished
   before the step, the view's value (absent = deleted) is the value of a write that no write finished
   before the step superseded, or of a write still in progress (a write of the key on another replica may
   have arrived through the engine too); a value where only a delete is allowed is a resurrection;
3. hold a cursor (``lastProcessedIndex``) no lower than any cursor one of our hosts acknowledged on that
   directory before the step.

After the run (everything delivered and folded) every replica's views that we published last say what the
store reads: each key's conversation, and each session's cursor at the largest one acknowledged by anyone
(upstream too).

Upstream's own writes are left out of 2 and 3 while the run is on: it writes in place without any lock of
ours, so a version of ours published on a read made just before its write can hide that write from the
view until our redo (a few steps; docs/views-and-filesystems.md says so); the final check covers them.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from .world import Verdict, World

SESSION_VIEW = re.compile(r"session-([A-Za-z0-9_-]+)\.json")
VIEW = "conversations.json"


def watch(world: "World") -> None:
    """Register the after-every-step look at the views (records each distinct store-published version)."""
    world.view_seen = []
    last: dict[tuple, tuple] = {}

    def look() -> None:
        step = world.sched.step
        for replica, home in world.homes.items():
            d = world.fs.dirs.get(str(home))
            if d is None:
                continue
            for name, ino in d.files.items():
                if name != VIEW and not SESSION_VIEW.fullmatch(name):
                    continue
                if ino.origin != "store":
                    last.pop((replica, name), None)
                    continue
                seen = (ino.ino, ino.data)
                if last.get((replica, name)) != seen:
                    last[(replica, name)] = seen
                    world.view_seen.append((step, replica, name, ino.data))

    world.sched.observers.append(look)


def _ours(world: "World", who: str) -> bool:
    return who in world.hosts


def check(world: "World", v: "Verdict") -> None:
    if v.errors:
        return
    seen = getattr(world, "view_seen", [])
    conv_keys = sorted({w.key for w in world.writes if w.key[0] == "conv"})
    cursor_keys = {w.key[1] for w in world.writes if w.key[0] == "cursor"}
    for step, replica, name, data in seen:
        try:
            doc = json.loads(data)
        except ValueError:
            v.errors.append(f"a torn {name} published by us on {replica} at step {step}")
            continue
        if not isinstance(doc, dict):
            v.errors.append(f"{name} on {replica} at step {step} is not an object")
            continue
        if name == VIEW:
            _check_conversations(world, v, step, replica, doc, conv_keys)
        else:
            sid = SESSION_VIEW.fullmatch(name).group(1)
            if sid in cursor_keys:
                _check_cursor(world, v, step, replica, sid, doc)
    _check_final(world, v, conv_keys, cursor_keys)


def _conv_value(entry):
    if isinstance(entry, str):
        return entry
    if isinstance(entry, dict):
        return entry.get("conversationId")
    return entry


def _check_conversations(world, v, step, replica, doc, keys) -> None:
    for key in keys:
        ws = [w for w in world.writes if w.key == key]
        acked = [w for w in ws if w.group == replica and w.t1 < step and _ours(world, w.who)]
        if not acked:
            continue
        here = [w for w in ws if w.group == replica and w.t0 <= step]
        # not superseded by a write of ours on this directory finished before the step (upstream's writes
        # are allowed values, never required ones: see the module docstring)
        cands = [w for w in here if not any(o is not w and _ours(world, o.who) and o.t0 > w.t1 and o.t1 < step
                                            for o in here)]
        allowed = {w.value for w in cands} | {w.value for w in here if w.t1 >= step or not _ours(world, w.who)}
        allowed |= {w.value for w in ws if w.group != replica and w.t0 <= step}
        got = _conv_value(doc.get(key[1])) if key[1] in doc else None
        if got in allowed:
            continue
        where = (f"{VIEW} on {replica} after step {step}: {key[1]} = {got!r}, allowed "
                 f"{sorted(map(repr, allowed))} (acknowledged before: {[(w.who, w.value, w.t1) for w in acked]})")
        (v.resurrected if got is not None and None in allowed else v.lost).append("view " + where)


def _check_cursor(world, v, step, replica, sid, doc) -> None:
    acked = [w.value for w in world.writes if w.key == ("cursor", sid) and w.group == replica and w.t1 < step
             and _ours(world, w.who)]
    if not acked:
        return
    got = doc.get("lastProcessedIndex")
    if not isinstance(got, int) or got < max(acked):
        v.regressions.append(f"view session-{sid}.json on {replica} after step {step}: lastProcessedIndex {got!r}, "
                             f"below {max(acked)} acknowledged before")


def _ours_final(fs, path):
    """The bytes at ``path`` if one of our stores published them (upstream's last word is its own; ours
    catches up with the next write of that file)."""
    ino = fs._lookup(path)
    return ino.data if ino is not None and ino.origin == "store" else None


def _check_final(world, v, conv_keys, cursor_keys) -> None:
    fs = world.fs
    for replica, home in world.homes.items():
        raw = _ours_final(fs, home / VIEW)
        if raw is not None and conv_keys:
            try:
                doc = json.loads(raw)
            except ValueError:
                v.errors.append(f"final {VIEW} on {replica} does not parse")
                doc = None
            if isinstance(doc, dict):
                snap = next(iter(world.stores.values())).read()
                for _, sid in conv_keys:
                    c = snap.get(sid)
                    want = None if c is None else c.conversation_id
                    got = _conv_value(doc.get(sid)) if sid in doc else None
                    if got != want:
                        v.lost.append(f"final {VIEW} on {replica}: {sid} = {got!r}, the store reads {want!r}")
        for sid in sorted(cursor_keys):
            raw = _ours_final(fs, home / f"session-{sid}.json")
            if raw is None or sid in getattr(world, "retired", ()):
                continue
            top = max(w.value for w in world.writes if w.key == ("cursor", sid))
            try:
                got = json.loads(raw).get("lastProcessedIndex")
            except (ValueError, AttributeError):
                got = None
            if got != top:
                v.regressions.append(f"final session-{sid}.json on {replica}: lastProcessedIndex {got!r}, "
                                     f"max acknowledged {top}")
