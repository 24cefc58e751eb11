"""``subconscious gc``'s imperative shell: read what the home and this machine say, let the pure plan
(:mod:`subconscious.state.store.retention`) decide, and apply it through the Store API.

Order of the steps, and why:

1. sessions still in use (here, or written by any machine within the last minutes: retention.py) and those
   whose entry is newer than the floor are re-stamped, so that they sit above the new floor before it exists;
2. the session floor rises (this host's ``hosts/<host>/floor.json``): from now on every version below it,
   wherever it comes from, counts for nothing — the retirement is done, on every machine, as soon as
   the file has synced;
3. the retired sessions' conversation entries are tombstoned (one write);
4. their files are removed (moved aside, checked, then removed: a file written meanwhile is kept), and
   this machine's local files of them;
5. ``backups/<date>/`` and ``quarantine/`` files older than the age go.

A crash between any two steps leaves a home that reads correctly; the next gc finishes the work.
"""

from __future__ import annotations

import calendar
import json
import logging
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..state.clock import ZERO, Stamp
from ..state.store.plan import is_legacy_adoption
from ..state.records import LEGACY_HOST
from ..state.store.retention import GcPlan, LocalFacts, SessionFacts, plan_gc
from ..state.sessions.core import session_file_name
from ..state.store.core import BACKUPS, Store
from ..state.sources import QUARANTINE

log = logging.getLogger("subconscious")
_DATE_DIR = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")


@dataclass
class GcResult:
    plan: GcPlan
    dry_run: bool
    removed_files: int = 0
    tombstoned: list[str] = field(default_factory=list)
    touched: list[str] = field(default_factory=list)
    pruned: list[str] = field(default_factory=list)
    local_removed: list[str] = field(default_factory=list)
    now_ms: int = 0  # this machine's clock when the plan was made

    def to_json(self) -> dict:
        p = self.plan
        return {
            "dry_run": self.dry_run,
            "floor": p.floor.encode(),
            "reference_ms": p.reference_ms,
            "clock_ahead_ms": max(0, self.now_ms - p.reference_ms) if self.now_ms else 0,
            "retire": [{"session": sid, "why": why} for sid, why in sorted(p.retire.items())],
            "keep": [{"session": sid, "why": why} for sid, why in sorted(p.keep.items())],
            "entries_tombstoned": self.tombstoned if not self.dry_run else sorted(p.entries),
            "touched": self.touched if not self.dry_run else list(p.touch),
            "session_files_removed": self.removed_files,
            "local_sessions_removed": self.local_removed if not self.dry_run else list(p.local),
            "pruned": [{"path": path, "why": why} for path, why in sorted(p.prune.items())],
        }


# ---------------------------------------------------------------------------- reading


def session_facts(store: Store, problems: list | None = None) -> tuple[Stamp, dict[str, SessionFacts]]:
    """Every session with files in the home, read under the current floor (``problems``: what the reads
    found is appended to it, for doctor)."""
    files = store.session_files
    names = store.fs.listdir(store.home)
    listings = {h: store.fs.listdir(store.home / "hosts" / h) for h in files._host_dirs()}
    floor = files.floor(listings)
    out: dict[str, SessionFacts] = {}
    from ..state.sessions.reading import Listing

    # indexed once: each session's own names are a bisection away (a scan per session was quadratic)
    root, indexed = Listing(names), {h: Listing(listing) for h, listing in listings.items()}
    for sid, state, found, reads in files.read_each(files.ids_listed(names, listings), root, indexed, floor):
        if problems is not None:
            problems += found
        if state is None:
            if reads["retired"]:
                out[sid] = SessionFacts(None)  # below the floor already: only its files are left
            continue  # nothing readable (unparseable files are doctor's to report, never ours to drop)
        if state.stamp == ZERO and state.host == LEGACY_HOST:  # upstream's, never stamped: its file's age
            mtime = store.fs.mtime(store.home / session_file_name(sid))
            out[sid] = SessionFacts(None, unstamped_mtime_ms=int((mtime or time.time()) * 1000))
            continue
        ended_at, reason = getattr(state, "ended_at", None), getattr(state, "end_reason", None)
        ended = None if ended_at is None else f"ended {ended_at}" + (f", {reason}" if reason else "")
        cursor = state.last_processed_index if isinstance(state.last_processed_index, int) else -1
        out[sid] = SessionFacts(state.stamp, ended=ended, host=state.host, cursor=cursor)
    return floor, out


def newest_of_others(host: str, sessions: dict[str, SessionFacts], snap) -> int | None:
    """The newest write of any other machine (wall ms of its stamp): a session version it wrote last, or a
    conversation entry. None when no other machine wrote anything still live."""
    walls = [f.stamp.wall for f in sessions.values() if f.stamp is not None and f.host not in (None, host, LEGACY_HOST)]
    walls += [r.stamp.wall for r in snap.live.values() if not r.legacy and r.host not in (host, LEGACY_HOST)]
    return max(walls, default=None)


def _live_claims(path: Path, now_ms: int) -> bool:
    from ..local.claims import CLAIM_TIMEOUT_MS, _pid_alive

    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return False
    claims = data.get("claims") if isinstance(data, dict) else None
    if not isinstance(claims, dict):
        return False
    for value in claims.values():
        if (isinstance(value, list) and len(value) == 2 and all(isinstance(x, int) for x in value)
                and now_ms - value[1] < CLAIM_TIMEOUT_MS and _pid_alive(value[0])):
            return True
    return False


def local_facts(local_root: Path, host: str, now_ms: int) -> dict[str, LocalFacts]:
    """What this machine's own files say of each session it knows."""
    from ..local import sessions as localsession
    from ..state.ids import is_session_id
    from ..state.locks import probe

    sessions_dir = local_root / "sessions"
    pending = {sid for sid, _ in localsession.pending_marks(sessions_dir)}
    sids = set(pending)
    try:
        sids |= {n[:-5] for n in os.listdir(sessions_dir) if n.endswith(".json")}
    except OSError:
        pass
    out = {}
    for sid in sorted(s for s in sids if is_session_id(s)):
        local = localsession.load(sessions_dir, sid)
        try:
            written = int(os.stat(localsession.path_for(sessions_dir, sid)).st_mtime * 1000)
        except OSError:
            written = 0
        try:
            delivering = probe(local_root / "locks" / f"{host}.deliver.{sid}.lock") is not None
        except OSError:
            delivering = False
        out[sid] = LocalFacts(
            pending=sid in pending, delivering=delivering, queued=bool(local.pending_start or local.attempt),
            hook_claims=_live_claims(local_root / "shown" / f"{sid}.json", now_ms), written_ms=written)
    return out


def set_aside(home: Path, now_ms: int) -> dict[str, int]:
    """backups/<date>/ and budget/<date>/ (dated by name: the end of that day, UTC) and each file of quarantine/
    (its mtime)."""
    out: dict[str, int] = {}
    backups = home / BACKUPS
    if not os.path.islink(backups):
        for name in _listdir(backups):
            m = _DATE_DIR.fullmatch(name)
            if m is None:
                continue
            try:
                day = calendar.timegm(time.strptime(name, "%Y-%m-%d"))  # midnight UTC
            except (ValueError, OverflowError):
                continue
            out[f"{BACKUPS}/{name}"] = int((day + 86_400) * 1000)
    from ..delivery.budget import BUDGET_DIR

    budgets = home / BUDGET_DIR  # budget/<day>/: each host's daily counts (budget.py), dated by name too
    if not os.path.islink(budgets):
        for name in _listdir(budgets):
            if _DATE_DIR.fullmatch(name):
                try:
                    day = calendar.timegm(time.strptime(name, "%Y-%m-%d"))
                except (ValueError, OverflowError):
                    continue
                out[f"{BUDGET_DIR}/{name}"] = int((day + 86_400) * 1000)
    quarantine = home / QUARANTINE
    if not os.path.islink(quarantine):
        for name in _listdir(quarantine):
            try:
                st = os.lstat(quarantine / name)
            except OSError:
                continue
            out[f"{QUARANTINE}/{name}"] = int(st.st_mtime * 1000)
    return out


def _listdir(path: Path) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def make_plan(store: Store, local_root: Path, *, age_ms: int, now_ms: int | None = None, snap=None,
              trust_clock: bool = False, problems: list | None = None) -> GcPlan:
    """``snap``: the store's read, when the caller has it already (doctor). ``trust_clock``: count ages from
    this machine's clock even when every other machine's newest write is older (retention.py: the user
    knows the clock is right and the others idle)."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    floor, sessions = session_facts(store, problems)
    snap = store.read() if snap is None else snap
    # an entry nobody stamped yet (upstream's legacy entry), or stamped only as adopted (state/store/plan.py's
    # legacy_adopted: older than every write), has no known age: it is retired once it is written again
    entries = {k: r.stamp for k, r in snap.live.items() if not r.legacy and not is_legacy_adoption(r.stamp)}
    return plan_gc(now_ms=now_ms, age_ms=age_ms, old_floor=floor, sessions=sessions, entries=entries,
                   local=local_facts(local_root, store.host, now_ms), set_aside=set_aside(store.home, now_ms),
                   others_ms=None if trust_clock else newest_of_others(store.host, sessions, snap), host=store.host)


# ---------------------------------------------------------------------------- applying


def _remove_tree(path: Path) -> bool:
    """Remove a set-aside file or directory without following any symbolic link (a link is removed as a
    link)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    import stat

    if not stat.S_ISDIR(st.st_mode):
        os.unlink(path)
        return True
    for name in os.listdir(path):
        _remove_tree(path / name)
    os.rmdir(path)
    return True


def _remove_local(local_root: Path, sid: str) -> bool:
    gone = False
    for path in (local_root / "sessions" / f"{sid}.json", local_root / "sessions" / f"{sid}.uuids",
                 local_root / "sessions" / "gave-up" / sid,
                 local_root / "shown" / f"{sid}.json", local_root / "shown" / f"{sid}.lock"):
        try:
            path.unlink()
            gone = True
        except FileNotFoundError:
            pass
    from ..delivery.notices import NOTICES  # what hooks queued for the agent beside the transcript (notices.py)

    return _remove_tree(local_root / "sessions" / NOTICES / sid) or gone


def run_gc(store: Store, local_root: Path, *, age_ms: int, dry_run: bool = False,
           now_ms: int | None = None, trust_clock: bool = False) -> GcResult:
    if not dry_run:
        store.refresh()  # upstream's legacy entries get their first stamp (their age starts now)
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    plan = make_plan(store, local_root, age_ms=age_ms, now_ms=now_ms, trust_clock=trust_clock)
    result = GcResult(plan, dry_run, now_ms=now_ms)
    if dry_run:
        return result
    files = store.session_files
    for sid in plan.touch:
        if files.touch(sid, plan.floor) is not None:
            result.touched.append(sid)
    if plan.floor > files.floor():
        files.raise_floor(plan.floor)
    result.tombstoned = store.retire_conversations(sorted(plan.entries), plan.floor, plan.cursors)
    unstamped_before = plan.floor.wall / 1000
    for sid in sorted(plan.retire):
        result.removed_files += len(files.remove_retired(sid, plan.floor, unstamped_before))
    for sid in plan.local:
        if _remove_local(local_root, sid):
            result.local_removed.append(sid)
    for rel in sorted(plan.prune):
        path = store.home / rel
        try:
            if not os.path.islink(path.parent) and _remove_tree(path):
                result.pruned.append(rel)
        except OSError as exc:
            log.warning("gc: could not remove %s: %s", path, exc)
    log.info("gc: floor %s; retired %d sessions (%d files), tombstoned %d entries, kept %d in use, pruned %d "
             "set-aside paths", plan.floor, len(plan.retire), result.removed_files, len(result.tombstoned),
             len(plan.keep), len(result.pruned))
    return result


DAILY_S = 86_400.0
MARK = "gc.json"  # <state dir>/gc.json: when this machine last ran the daily gc


def daily(store: Store, local_root: Path, *, age_ms: int, now: float | None = None) -> str | None:
    """``watch``'s daily gc: runs when the machine-local mark says a day has passed since the last run (the
    first call only sets the mark: a freshly started watcher waits a day). Returns a summary when it ran."""
    from ..state.files import atomic_write

    now = time.time() if now is None else now
    mark = Path(local_root) / MARK
    try:
        last = float(json.loads(mark.read_text())["last"])
    except (OSError, ValueError, KeyError, TypeError):
        last = None
    if last is not None and 0 <= now - last < DAILY_S:
        return None
    if last is not None:
        result = run_gc(store, Path(local_root), age_ms=age_ms)
    atomic_write(mark, json.dumps({"last": now}) + "\n", durable=False)
    if last is None:
        return None
    return (f"retired {len(result.plan.retire)} sessions idle for longer than the age, kept "
            f"{len(result.plan.keep)} in use, pruned {len(result.pruned)} set-aside paths")
