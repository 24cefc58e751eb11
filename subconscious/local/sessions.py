"""Machine-local facts about one session (never synced): the agent's name, when messages were last
fetched (the PreToolUse TTL), and the worker's job — the transcript path, a start message to send,
the range of the last delivery attempt. Kept in ``<state dir>/sessions/<id>.json``.

Hooks and the worker write this file at the same time, each from a copy it loaded earlier. ``save``
therefore writes only the fields this copy changed since it was loaded (or last saved) over what is on
disk now, under a lock on the directory: a hook that loaded the file before the worker delivered the
start message does not bring the message back (it would be sent twice)."""

from __future__ import annotations

import json
import logging
import os
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ..state.files import atomic_write, ensure_dir
from ..state.ids import check_session_id


@dataclass
class LocalSession:
    session_id: str
    agent_name: str = "Subconscious"
    last_fetch_ms: int = 0
    transcript_path: str | None = None
    cwd: str | None = None  # Claude Code's current directory at the last hook (informational)
    project_root: str | None = None  # the directory the agent's tools see, fixed at SessionStart (agent_tools/confine.py)
    home: str | None = None  # the session's LETTA_HOME (absolute), fixed at SessionStart: every hook and the worker use it
    start_for: str | None = None  # the conversation a start message was queued for (never queued twice)
    pending_start: str | None = None  # the session-start message, until delivered
    start_attempted: bool = False  # a send of pending_start began; its outcome may be unknown
    pending_update: str | None = None  # the last payload the Stop hook built (fallback if the transcript goes)
    pending_cursor: list[int] | None = None  # [cursor before, cursor after] of pending_update
    attempt: list[int] | None = None  # [first line, last line] of a delivery whose outcome is unknown
    attempt_key: str | None = None  # its delivery key (the marker looked for in the conversation)
    attempt_after: str | None = None  # the conversation's newest message before it was sent (where to look from)
    attempt_inserts: list[str] | None = None  # keys of the notices (notices.py) that attempt carries
    attempt_skipped: list[str] | None = None  # digests of the answers it leaves out (delivered before)
    running_since: float | None = None  # when that attempt's run was first found still running (epoch s)
    stuck_key: str | None = None  # the attempt's key once it was re-delivered for a stuck run (a 2nd: given up)
    reinject: str | None = None  # compact/clear: Claude's context was replaced; what it knew is shown again once
    start_after: str | None = None  # the same for the start message
    anchor: list | None = None  # [cursor, uuid, back]: the last delivered line with a uuid, back lines before
    offset: int = 0  # cursor minus the line's index in the current file (a rewritten, shorter transcript)
    context_window: int | None = None  # the agent's context window in tokens (bounds each update)
    size_cap: int | None = None  # the server refused an update this long for its size: updates stay shorter
    size_cap_at: float | None = None  # when (epoch s): the cap lapses SIZE_CAP_TTL later (worker.py)
    last_error: str | None = None  # why the last delivery failed (status)
    failures: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    # what this copy held when it was loaded or last saved: save() writes only what differs from it
    _base: dict[str, Any] | None = field(default=None, init=False, repr=False, compare=False)


def _public(state: LocalSession) -> dict[str, Any]:
    return {f.name: getattr(state, f.name) for f in fields(state) if not f.name.startswith("_")}


def _known(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise TypeError("not a JSON object")
    return {k: v for k, v in data.items() if k in LocalSession.__dataclass_fields__ and not k.startswith("_")}


@contextmanager
def _dir_lock(directory: Path):
    """Serialise read-merge-write of session files on this machine (flock on the directory itself)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: merge without the lock
        yield
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def path_for(sessions_dir: Path, session_id: str) -> Path:
    return sessions_dir / f"{check_session_id(session_id)}.json"


def load(sessions_dir: Path, session_id: str) -> LocalSession:
    try:
        data = json.loads(path_for(sessions_dir, session_id).read_text())
        state = LocalSession(**{**_known(data), "session_id": session_id})
    except FileNotFoundError:
        state = LocalSession(session_id)
    except (OSError, ValueError, TypeError) as exc:
        logging.getLogger("subconscious").warning("session %s: its file in %s is unreadable (%s); starting it afresh",
                                                  session_id, sessions_dir, str(exc)[:200])
        state = LocalSession(session_id)
    state._base = _public(state)
    return state


def save(sessions_dir: Path, state: LocalSession) -> None:
    """Write the fields ``state`` changed since it was loaded (all of them for a fresh copy that differ
    from the defaults) over the file as it is now."""
    path = path_for(sessions_dir, state.session_id)
    mine = _public(state)
    base = state._base if state._base is not None else _public(LocalSession(state.session_id))
    changed = {k: v for k, v in mine.items() if v != base.get(k)}
    ensure_dir(sessions_dir)
    with _dir_lock(sessions_dir):
        try:
            current = {**_public(LocalSession(state.session_id)), **_known(json.loads(path.read_text()))}
        except (OSError, ValueError, TypeError):  # none yet, or unreadable: this machine-local cache is rebuilt
            current = mine
        merged = {**current, **changed, "session_id": state.session_id}
        atomic_write(path, json.dumps(merged) + "\n", durable=False)
    state._base = mine


# ------------------------------------------------------------------ retry markers
# ``<sessions>/pending/<id>``: a delivery is due for this session. The file's mtime is when the next attempt
# may start (backoff); its text says why (status). Hooks find them with one listdir (hot path: no parse).

PENDING = "pending"


def mark_pending(sessions_dir: Path, session_id: str, due: float, reason: str = "", *, keep_earlier: bool = False) -> None:
    """Record that ``session_id`` has a delivery due at ``due`` (epoch seconds). ``keep_earlier``: an existing
    marker due sooner keeps its time (a safety net must not delay a retry). Either way the marker records
    when it was last asked for (``armed``): a worker that began before that never clears it
    (:func:`clear_pending`), so a turn armed while the previous turn's worker runs is still picked up."""
    import time

    d = sessions_dir / PENDING
    path = d / check_session_id(session_id)
    try:
        sooner = path.stat().st_mtime
        if not (keep_earlier and sooner <= due):
            sooner = None
    except FileNotFoundError:
        sooner = None
    ensure_dir(d)
    if sooner is not None:
        reason = pending_reason(sessions_dir, session_id) or reason
    atomic_write(path, json.dumps({"reason": reason[:500], "armed": time.time()}) + "\n", durable=False)
    when = sooner if sooner is not None else due
    os.utime(path, (when, when))


def clear_pending(sessions_dir: Path, session_id: str, *, armed_before: float | None = None) -> bool:
    """Drop the session's retry marker; with ``armed_before`` (when the worker began) only one armed
    before then (what that worker read covers it): a newer one is left for its turn. True when dropped."""
    path = sessions_dir / PENDING / check_session_id(session_id)
    if armed_before is None:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        return True
    import time

    aside = path.with_name(".subconscious-tmp-clear-%s-%d-%d" % (session_id[:40], os.getpid(), time.monotonic_ns()))
    try:
        os.rename(path, aside)  # taken out of the way: a marker armed from now on is a new file
    except FileNotFoundError:
        return True
    try:
        try:
            armed = json.loads(aside.read_text()).get("armed")
        except (OSError, ValueError, AttributeError):
            armed = None
        if isinstance(armed, (int, float)) and armed >= armed_before:
            try:
                os.link(aside, path)  # put back, unless a newer one was armed meanwhile
            except FileExistsError:
                pass
            return False
        return True
    finally:
        try:
            aside.unlink()
        except OSError:
            pass


def pending_marks(sessions_dir: Path) -> list[tuple[str, float]]:
    """(session id, due time) of every retry marker."""
    out = []
    try:
        with os.scandir(sessions_dir / PENDING) as it:
            for e in it:
                if not e.name.startswith("."):
                    try:
                        out.append((e.name, e.stat().st_mtime))
                    except OSError:
                        pass
    except OSError:
        pass
    return sorted(out)


# ``<sessions>/gave-up/<id>``: deliveries the worker gave up on (a run still stuck after its re-delivery), the
# newest GAVE_UP_KEPT as a JSON list of {lines, delivery, why, at}: what ``status`` reports.

GAVE_UP = "gave-up"
GAVE_UP_KEPT = 10


def record_gave_up(sessions_dir: Path, session_id: str, lines: list[int], key: str, why: str) -> None:
    import time

    d = sessions_dir / GAVE_UP
    ensure_dir(d)
    path = d / check_session_id(session_id)
    old = gave_up(sessions_dir).get(session_id, [])
    entry = {"lines": list(lines), "delivery": key, "why": why[:500], "at": time.time()}
    atomic_write(path, json.dumps((old + [entry])[-GAVE_UP_KEPT:]) + "\n", durable=False)


def gave_up(sessions_dir: Path) -> dict[str, list[dict]]:
    """{session id: the deliveries given up on, oldest first} of this machine."""
    out: dict[str, list[dict]] = {}
    try:
        with os.scandir(sessions_dir / GAVE_UP) as it:
            names = sorted(e.name for e in it if not e.name.startswith("."))
    except OSError:
        return out
    for name in names:
        try:
            got = json.loads((sessions_dir / GAVE_UP / name).read_text())
        except (OSError, ValueError):
            continue
        if isinstance(got, list):
            out[name] = [g for g in got if isinstance(g, dict)]
    return out


def pending_reason(sessions_dir: Path, session_id: str) -> str:
    try:
        return str(json.loads((sessions_dir / PENDING / check_session_id(session_id)).read_text()).get("reason", ""))
    except (OSError, ValueError, AttributeError):
        return ""


LOCAL_DIRS = ("", "sessions", "sessions/pending", "sessions/gave-up", "shown", "clocks", "keys", "locks", "payloads", "logs")


def sweep_local_temps(root, max_age_s: float = 600.0, now: float | None = None) -> int:
    """Delete ``.subconscious-tmp-*`` files older than ``max_age_s`` in the machine-local dirs under ``root``
    (the state dir, and each session's ``sessions/notices/<id>/``): what a writer killed mid-write (a hook at its deadline) left. Cheap (one scandir per
    dir); SessionStart and the worker run it, never the per-tool path. Returns how many went."""
    import time

    from ..base.atomic import TEMP_PREFIX

    horizon = (time.time() if now is None else now) - max_age_s
    removed = 0
    dirs = [os.path.join(root, sub) for sub in LOCAL_DIRS]
    notices_dir = os.path.join(root, "sessions", "notices")  # one dir per session (notices.py)
    try:
        with os.scandir(notices_dir) as entries:
            dirs += [notices_dir] + [e.path for e in entries if e.is_dir(follow_symlinks=False)]
    except OSError:
        pass
    for path in dirs:
        try:
            with os.scandir(path) as entries:
                for e in entries:
                    try:
                        if (e.name.startswith(TEMP_PREFIX) and e.is_file(follow_symlinks=False)
                                and e.stat(follow_symlinks=False).st_mtime <= horizon):
                            os.unlink(e.path)
                            removed += 1
                    except OSError:
                        continue
        except OSError:
            continue
    return removed


def pending(sessions_dir: Path) -> list[str]:
    """Sessions with something for the worker to deliver."""
    out = []
    try:
        names = sorted(p.stem for p in sessions_dir.glob("*.json"))
    except OSError:
        return out
    for sid in names:
        s = load(sessions_dir, sid)
        if s.pending_start or s.transcript_path or s.pending_update:
            out.append(sid)
    return out


def pending_deliveries(sessions_dir) -> list[dict]:
    """Deliveries waiting on this machine: which session, what (start message, lines), since how many
    failures, why, and when the next attempt may start (the retry markers of worker.py)."""
    import time

    out = []
    for sid, due in pending_marks(sessions_dir):
        local = load(sessions_dir, sid)
        out.append({
            "session": sid,
            "start_message": bool(local.pending_start),
            "lines": local.attempt,
            "failures": local.failures,
            "why": local.last_error or pending_reason(sessions_dir, sid),
            "next_attempt_in_s": max(0, round(due - time.time())),
        })
    return out


def gave_up_deliveries(sessions_dir) -> list[dict]:
    """Deliveries the worker gave up on on this machine (a run still stuck after its re-delivery), newest
    last: which session, which lines and delivery key, why, when (epoch s)."""
    return [{"session": sid, **g} for sid, got in gave_up(sessions_dir).items() for g in got]
