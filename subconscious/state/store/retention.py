"""Pure: what ``subconscious gc`` retires, keeps and prunes, and why. Nothing here touches a file.

The rule is one **session floor**, a clock stamp: every session version stamped below it is retired,
wherever it lives — the view, any host's version, a conflict copy, a displaced version, a stale shard
restored by a sync engine or a backup put back by hand. The floor is ``now - AGE`` (it only rises), so
"no activity for longer than AGE on every machine" and "every version below the floor" are the same
set, and a version that comes back from anywhere carries its old stamp and stays retired.

Activity after the floor counts: every write stamps past the floor (a writer's clock moves past it), so
a machine that works on a session after the gc — even one that had not synced the gc yet and brings
its own version when it does — writes a version above the floor, and the session lives again *as that
machine has it*. A version written before the gc never does: it is below the floor, however late it
arrives. (Its conversation entry stays tombstoned unless that machine also writes the entry again, as
a SessionStart does; a session without its entry starts a fresh conversation at its next SessionStart.)

A session in use is never retired: it is re-stamped (touched) before the floor rises, and so is a session
whose conversation entry is newer than the floor while its files are not. In use means a process on this
machine is working on it (a delivery due, a worker delivering, a hook that ran within the last few
minutes) or *any* machine wrote to it within the last :data:`IN_USE_MS` (its newest version's stamp, from
the shared home: what another machine does is known here only by what it writes).

Whose clock: ages are counted back from the *reference*, this machine's clock or the newest write of any
other machine, whichever is earlier. A machine whose clock runs ahead (31 days, say) sees every other
machine's fresh writes as old; counting from their newest write instead, it retires nothing they wrote
recently. The price: while every other machine is idle, ages count from their last write (gc retires
less, never more).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping

from ..clock import ZERO, Stamp

DAY_MS = 86_400_000
DEFAULT_AGE = "30d"
IN_USE_MS = 10 * 60_000  # a machine-local session file written this recently: a hook of the session is live

_AGE = re.compile(r"([0-9]{1,6})([smhdw])")
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": DAY_MS, "w": 7 * DAY_MS}


def parse_age(text: str) -> int:
    """``30d``, ``12h``, ``90m``, ``2w``, ``0d`` → milliseconds. Raises ValueError with a usable message."""
    m = _AGE.fullmatch(text.strip()) if isinstance(text, str) else None
    if m is None:
        raise ValueError(f"age {text!r} is not a number followed by s, m, h, d or w (e.g. 30d, 12h, 0d)")
    return int(m[1]) * _UNIT_MS[m[2]]


@dataclass(frozen=True)
class SessionFacts:
    """What the home says of one session, read under the current floor."""

    stamp: Stamp | None  # the merged version's stamp (None: no live version, e.g. already below the floor)
    entry: Stamp | None = None  # its live conversation entry's stamp, if any
    unstamped_mtime_ms: int | None = None  # upstream's unstamped version only: when its file was written
    ended: str | None = None  # Claude Code ended it (SessionEnd: the session record's ended_at/end_reason)
    host: str | None = None  # the host that wrote its newest version
    cursor: int = -1  # its cursor (kept in the retirement record: a session that comes back goes on from it)


@dataclass(frozen=True)
class LocalFacts:
    """This machine's files of a session."""

    pending: bool = False  # a retry marker: a delivery is due
    delivering: bool = False  # a worker holds the session's delivery lock
    queued: bool = False  # a start message or a delivery attempt of unknown outcome
    hook_claims: bool = False  # a hook holds claims on notes it is printing
    written_ms: int = 0  # when the machine-local session file was last written


@dataclass
class GcPlan:
    floor: Stamp  # the new session floor (never below the old one)
    retire: dict[str, str] = field(default_factory=dict)  # session → why
    keep: dict[str, str] = field(default_factory=dict)  # session older than the floor, kept → why
    touch: list[str] = field(default_factory=list)  # sessions to re-stamp before the floor rises
    entries: list[str] = field(default_factory=list)  # conversation entries to tombstone
    local: list[str] = field(default_factory=list)  # sessions whose machine-local files go
    prune: dict[str, str] = field(default_factory=dict)  # backups/ and quarantine/ paths (home-relative) → why
    reference_ms: int = 0  # what ages were counted back from (this clock, or another machine's newest write)
    cursors: dict[str, int] = field(default_factory=dict)  # retired session → its cursor (the retirement record)


def reference_ms(now_ms: int, others_ms: int | None) -> int:
    """The time ages are counted back from: this machine's clock, or the newest write of another machine
    when that is earlier (a clock ahead cannot make fresh sessions look old)."""
    return now_ms if others_ms is None else min(now_ms, others_ms)


def written_recently(facts: SessionFacts | None, ref_ms: int, host: str | None) -> str | None:
    """Why the shared stamps say another machine is working on the session (its newest version, written by
    a host other than ``host``, this one, lies within IN_USE_MS before the reference), or None. What this
    machine's own processes do, its local facts say (:func:`in_use`)."""
    if facts is None or facts.stamp is None or facts.host in (None, host):
        return None
    ago = ref_ms - facts.stamp.wall
    if ago >= IN_USE_MS:
        return None
    return f"{facts.host} wrote to it {max(ago, 0) // 1000} s ago (in use there)"


def in_use(local: LocalFacts | None, now_ms: int, ended: bool = False) -> str | None:
    """Why a process on this machine is still working on the session, or None. A session Claude Code ended
    (SessionEnd) runs no more hooks: a recent hook no longer means it is in use (a delivery still does)."""
    if local is None:
        return None
    if local.delivering:
        return "a worker is delivering it"
    if local.pending:
        return "a delivery is due (retry marker)"
    if local.queued:
        return "a start message or a delivery is still queued"
    if local.hook_claims:
        return "a hook is printing its notes"
    if not ended and 0 <= now_ms - local.written_ms < IN_USE_MS:
        return "a hook ran within the last 10 minutes"
    return None


def _age(ms: int) -> str:
    days, rest = divmod(max(ms, 0), DAY_MS)
    return f"{days} d" if days else f"{rest // 3_600_000} h"


def plan_gc(*, now_ms: int, age_ms: int, old_floor: Stamp, sessions: Mapping[str, SessionFacts],
            entries: Mapping[str, Stamp], local: Mapping[str, LocalFacts],
            set_aside: Mapping[str, int], others_ms: int | None = None, host: str | None = None) -> GcPlan:
    """``sessions``: every session with files in the home; ``entries``: live conversation entries (session →
    stamp); ``local``: this machine's facts per session; ``set_aside``: files and dated directories under
    backups/ and quarantine/ (home-relative path → when written, ms); ``others_ms``: the newest write of any
    other machine (wall ms of its stamp), None when no other machine wrote; ``host``: this machine's id."""
    ref = reference_ms(now_ms, others_ms)
    floor = max(old_floor, Stamp(max(ref - age_ms, 0), 0))
    plan = GcPlan(floor, reference_ms=ref)
    for sid in sorted(set(sessions) | set(entries)):
        facts = sessions.get(sid, SessionFacts(None))
        entry = entries.get(sid, facts.entry)
        live = facts.stamp is not None or facts.unstamped_mtime_ms is not None  # files that still count
        stamps = [s for s in (facts.stamp, entry) if s is not None]
        if facts.unstamped_mtime_ms is not None:
            stamps.append(Stamp(facts.unstamped_mtime_ms, 0))
        newest = max(stamps, default=ZERO)
        files_fall = live and (facts.stamp or ZERO) < floor  # the new floor would retire its files
        if newest >= floor and not files_fall:
            continue  # active since the floor, files and entry alike
        busy = in_use(local.get(sid), now_ms, facts.ended is not None) or written_recently(facts, ref, host)
        if live and (busy is not None or newest >= floor):
            plan.keep[sid] = busy or "its conversation entry was written after the floor"
            plan.touch.append(sid)  # re-stamped before the floor rises: its files stay above it
            continue
        if not live and newest >= floor:
            continue  # an entry written after the floor, no session files (yet)
        if not live and sid in sessions:
            why = "below the session floor of an earlier gc"
        elif not live:
            why = f"a conversation entry without session files, last written {_age(ref - newest.wall)} ago"
        else:
            why = f"no activity for {_age(ref - newest.wall)}"
            if facts.ended is not None:
                why += f" ({facts.ended})"
        if busy is not None and sid in entries:
            plan.keep[sid] = busy  # its files (if any) are retired already; the entry stays while in use
            continue
        plan.retire[sid] = why
        if facts.cursor >= 0:
            plan.cursors[sid] = facts.cursor
        if sid in entries:
            plan.entries.append(sid)
    for sid, facts in sorted(local.items()):
        ended = sid in sessions and sessions[sid].ended is not None
        if sid in plan.keep or in_use(facts, now_ms, ended) is not None:
            continue
        gone = sid in plan.retire or (sid not in sessions and sid not in entries and facts.written_ms < floor.wall)
        if gone:
            plan.local.append(sid)
    horizon = ref - age_ms
    for path, written in sorted(set_aside.items()):
        if written < horizon:
            plan.prune[path] = f"set aside {_age(ref - written)} ago"
    return plan
