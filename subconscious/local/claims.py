"""Which hook shows which note: a machine-local, per-session claim file, ``<state dir>/shown/<id>.json``.

Claude Code runs one PreToolUse hook per tool call, in parallel for parallel tool calls, and
UserPromptSubmit besides; each process fetches the agent's new messages. Two processes cannot both print
and then agree, so they agree first: every read-modify-write of this file happens under an exclusive
``flock`` on ``<id>.lock`` (a few hundred microseconds), and

- :func:`take_fetch`: the PreToolUse TTL as a compare-and-set: of the hooks that find the last fetch old,
  one fetches, the others skip (a plain "check, then write" let all of them fetch and print);
- :func:`claim`: a hook takes the notes it will print; a note already printed, or claimed by a live
  hook, is not taken again;
- :func:`mark_printed`: called only after the hook's stdout was written and flushed: the claimed ids
  become printed ids and the claims go.

A claim whose owner died before printing (a deadline, SIGKILL) is released as soon as its process is
gone, or after ``CLAIM_TIMEOUT_MS`` whatever: the note is shown by a later hook. A process killed after
writing stdout but before :func:`mark_printed` leaves a claim that is released the same way, so that
note is shown again: at least once in that one window, exactly once otherwise.

The caller advances the session's watermark (``last_seen_message_id``) over printed notes only. Printed ids
are kept as a ring of the ``KEEP_PRINTED`` newest: never pruned by the watermark, because a slower hook may
still hold a look-back from before it moved (a hook lives 8 s at most; 256 notes are not printed in that time).
Stdlib only, and light enough for the fetching hooks' shortcut (subconscious.hooks.fetch_shortcut): JSON through
:mod:`subconscious.base.fastjson`, paths as strings (``str`` or ``Path`` accepted), no ``json``, ``pathlib``,
``contextlib`` or ``typing`` at run time — each pulls in ``re``, ``enum`` or ``functools``.
"""

from __future__ import annotations

import os

from ..base import fastjson as json
from ..base.atomic import atomic_write, ensure_dir

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~4 ms on a hook)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Callable, Iterable

CLAIM_TIMEOUT_MS = 60_000  # far beyond any printing hook's deadline (hookrun.EVENTS: 8 s at most)
KEEP_PRINTED = 256
BLOCKS = "blocks:"  # a claim on a memory-block change, "blocks:<digest of the values shown>"; only the last one
# printed counts as printed (values can change back and forth: A→B, B→A, A→B are three changes to show)


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # exists (another user's, or cannot tell): keep the claim until it times out
    return True


class _locked:
    """``with _locked(directory, session_id) as path``: the session's claims file path, under the exclusive
    flock on ``<id>.lock`` (released when the block ends)."""

    def __init__(self, directory: "Path | str", session_id: str):
        self.directory, self.session_id = os.fspath(directory), session_id

    def __enter__(self) -> str:
        ensure_dir(self.directory)
        self.fd = os.open(os.path.join(self.directory, f"{self.session_id}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                import fcntl
            except ImportError:  # pragma: no cover - Windows: no lock (claims still narrow the window)
                fcntl = None
            if fcntl is not None:
                fcntl.flock(self.fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(self.fd)
            raise
        return os.path.join(self.directory, f"{self.session_id}.json")

    def __exit__(self, *exc) -> None:
        os.close(self.fd)  # releases the lock


def _read(path: str) -> dict:
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read())
    except (OSError, ValueError):  # none yet, or torn by a crash: a machine-local cache, rebuilt
        data = {}
    if not isinstance(data, dict):
        data = {}
    printed = data.get("printed")
    claims = data.get("claims")
    fetch_ms = data.get("fetch_ms")
    blocks = data.get("blocks")
    return {
        "blocks": blocks if isinstance(blocks, str) else None,
        "printed": [p for p in printed if isinstance(p, str)] if isinstance(printed, list) else [],
        "claims": {k: v for k, v in claims.items()
                   if isinstance(k, str) and isinstance(v, list) and len(v) == 2
                   and all(isinstance(x, int) for x in v)} if isinstance(claims, dict) else {},
        "fetch_ms": fetch_ms if isinstance(fetch_ms, int) else 0,
    }


def _write(path: str, data: dict) -> None:
    data["printed"] = data["printed"][-KEEP_PRINTED:]
    atomic_write(path, json.dumps(data, separators=(",", ":")), durable=False)


def take_fetch(directory: "Path | str", session_id: str, ttl_ms: int, now_ms: int) -> bool:
    """True (and the fetch time set to ``now_ms``) unless a fetch began less than ``ttl_ms`` ago. A fetch
    time up to ``ttl_ms`` after ``now_ms`` counts too: a hook reads the clock before it waits for the lock,
    so of parallel hooks one that read it earlier can get the lock after one that fetched (seen under load:
    two of five parallel PreToolUse fetched). Further ahead, it is a clock that went back: taken again."""
    with _locked(directory, session_id) as path:
        data = _read(path)
        if -ttl_ms < now_ms - data["fetch_ms"] < ttl_ms:
            return False
        data["fetch_ms"] = now_ms
        _write(path, data)
        return True


def give_back_fetch(directory: "Path | str", session_id: str, taken_ms: int) -> None:
    """Undo :func:`take_fetch` of ``taken_ms`` (a hook that took the TTL and hands its fetch to another path,
    which then takes it again): nothing changes when another hook has taken a fetch since."""
    with _locked(directory, session_id) as path:
        data = _read(path)
        if data["fetch_ms"] == taken_ms:
            data["fetch_ms"] = 0
            _write(path, data)


def claim(directory: "Path | str", session_id: str, ids: "Iterable[str]", *, owner: int, now_ms: int,
          alive: "Callable[[int], bool]" = _pid_alive) -> tuple[list[str], frozenset[str]]:
    """Claim for ``owner`` (a process id) those of ``ids`` nobody printed or holds; returns (the ids
    claimed, every id printed so far). Dead owners' and timed-out claims are released first."""
    ids = list(ids)
    with _locked(directory, session_id) as path:
        data = _read(path)
        claims = data["claims"]
        released = 0
        for note, (since, who) in list(claims.items()):
            if now_ms - since >= CLAIM_TIMEOUT_MS or (who != owner and not alive(who)):
                del claims[note]
                released += 1
        printed = set(data["printed"])
        if data["blocks"]:
            printed.add(data["blocks"])
        mine = []
        for note in ids:
            if note in printed or note in claims or note in mine:
                continue
            claims[note] = [now_ms, owner]
            mine.append(note)
        if mine or released:
            _write(path, data)
        return mine, frozenset(printed)


def mark_printed(directory: "Path | str", session_id: str, ids: "Iterable[str]", *, owner: int) -> frozenset[str]:
    """``ids`` (claimed by ``owner``) were written to stdout: record them as printed and drop their
    claims. Returns every id printed so far. Call it only after the output was flushed."""
    ids = list(ids)
    with _locked(directory, session_id) as path:
        data = _read(path)
        printed = data["printed"]
        have = set(printed)
        for note in ids:
            if note.startswith(BLOCKS):
                data["blocks"] = note
            elif note not in have:
                printed.append(note)
                have.add(note)
            held = data["claims"].get(note)
            if held is not None and held[1] == owner:
                del data["claims"][note]
        _write(path, data)
        return frozenset(have)


def release(directory: "Path | str", session_id: str, ids: "Iterable[str]", *, owner: int) -> None:
    """``owner`` will not print ``ids`` after all (Claude Code's limit left them for a later hook): its
    claims on them go at once, so the next hook shows them (a served process would hold them 60 s)."""
    ids = [i for i in ids]
    if not ids:
        return
    with _locked(directory, session_id) as path:
        data = _read(path)
        dropped = False
        for note in ids:
            held = data["claims"].get(note)
            if held is not None and held[1] == owner:
                del data["claims"][note]
                dropped = True
        if dropped:
            _write(path, data)


def state(directory: "Path | str", session_id: str) -> dict:
    """The file as it is (for tests and ``status``)."""
    with _locked(directory, session_id) as path:
        return _read(path)
