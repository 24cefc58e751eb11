"""The entry of ``subconscious hook <event>``: the cheap path first, the full one when it must.

Claude Code runs PreToolUse on every tool call (hundreds in a long session), nearly always within the
fetch TTL of the last fetch: then all there is to do is read stdin, read one small machine-local file
(``<state dir>/shown/<id>.json``: when this session last fetched) and compare a time. This module does
exactly that with what the interpreter has already loaded plus ``_json`` (:mod:`subconscious.base.fastjson`:
json's C parts without ``json``, whose ``re`` import costs more than the rest of the hook) — no store, no
Letta client, no ``logging``, no ``platformdirs``, no dataclasses — and exits 0.

A PreToolUse past the TTL and every UserPromptSubmit fetch; when the fetch finds nothing new (the common
case) :mod:`subconscious.hooks.fetch_shortcut` finishes them with one request and no store.

Stop is the other hook whose work fits here: once its session has begun on this machine, it records the
transcript path in the session's machine-local file and starts the detached worker (``os.posix_spawn``:
no ``subprocess`` import), which reads the transcript itself — unless Claude's final answer
(``last_assistant_message``) is not in the transcript's tail yet (:mod:`subconscious.hooks.answer_tail`, the
rule the full path queues it by): then the full path runs and queues it.

Anything it is not sure about (input that is not a plain JSON object with a valid session id, a setting
it does not recognise, no claims file, the TTL over) goes to :func:`subconscious.hooks.run.run` with the
bytes already read, which decides and logs exactly as before: this path only ever takes the shortcut on
evidence, never a decision of its own. The never-break guarantees hold here too: a deadline (SIGALRM
through the builtin ``_signal``, so ``signal``/``enum`` are not imported) logs its reason and exits 0; a
reason to log imports the real logger only when there is something to write.
"""

from __future__ import annotations

import os
import sys
import time

from .hotinput import (MODES, STDIN_CAP, _debug, _input, _log, _read_json, _read_shared, _text,  # noqa: F401
                       fetch_ttl_ms, last_fetch_ms, plain_session_id, state_dir)



def within_ttl(raw: bytes, env=os.environ, now_ms: int | None = None) -> bool:
    """True when this PreToolUse has nothing to do: another hook of the session began a fetch less than the
    TTL ago (or LETTA_MODE is off). False means "not sure": the full path runs."""
    got = _input(raw, env)
    if got is None:
        return False
    _, sid, mode = got
    if mode == "off":
        return True  # the full path would skip it too
    ttl, directory = fetch_ttl_ms(env), state_dir(env)
    if ttl is None or directory is None:
        return False
    fetched = last_fetch_ms(directory, sid)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    return fetched is not None and 0 <= now - fetched < ttl


# ---------------------------------------------------------------- Stop: the handover to the worker

HANDOVER_FIELDS = ("transcript_path", "cwd", "pending_update", "pending_cursor")


def handed_over(raw: bytes, env=os.environ) -> bool:
    """Stop's whole job when the session began on this machine (its machine-local file records the home
    and the conversation a start message was queued for, and the shared home has its state file): record
    the transcript path in that file (localsession's lock and merge: these fields only) and start the
    detached worker, which reads the transcript itself. False: not sure, the full path runs (it also
    begins a session whose SessionStart failed)."""
    got = _input(raw, env)
    if got is None:
        return False
    data, sid, mode = got
    if mode == "off":
        return True
    path, directory = data.get("transcript_path"), state_dir(env)
    if not isinstance(path, str) or not os.path.isfile(path) or directory is None:
        return False
    if os.path.exists(os.path.join(directory, "serve", "enabled.json")):
        return False  # served mode: hookrun's Stop also (re)starts the server (local.autostart)
    sessions = os.path.join(directory, "sessions")
    if not (os.access(sessions, os.W_OK) and os.access(os.path.join(directory, "logs"), os.W_OK)):
        return False  # the full path says why on stderr (no log to write) — the worker could not write either
    local = _read_json(os.path.join(sessions, sid + ".json"))
    if not local or not _text(local.get("start_for")) or not _text(local.get("home")):
        return False
    view = _read_shared(local["home"], f"session-{sid}.json")
    if not view or not _text(view.get("conversationId")):
        return False  # not readable in the shared home (damaged, moved): the full path sets it aside and begins again
    from .answer_tail import lagging

    if lagging(path, data.get("last_assistant_message")) is not False:
        return False  # Claude's final answer is not in the file yet: the full path queues it (a notice)
    cwd = data.get("cwd") if _text(data.get("cwd")) else local.get("cwd")
    _update_local(sessions, sid, {"transcript_path": path, "cwd": cwd, "pending_update": None,
                                  "pending_cursor": None})
    _spawn_worker(sid, cwd if isinstance(cwd, str) and os.path.isdir(cwd) else None, env)
    _pickup(sessions)
    return True


def _update_local(sessions: str, sid: str, fields: dict) -> None:
    """These fields over the session's machine-local file as it is now, under the lock localsession.save
    takes (flock on the directory), written by rename; nothing written when nothing changes."""
    import fcntl
    from ..base import fastjson as json

    fd = os.open(sessions, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        path = os.path.join(sessions, sid + ".json")
        current = _read_json(path)
        if current is None:
            raise OSError(f"{path} went away or is unreadable")
        if all(current.get(k) == v for k, v in fields.items()):
            return
        text = json.dumps({**current, **fields, "session_id": sid}) + "\n"
        tmp = os.path.join(sessions, f".subconscious-tmp-{os.getpid()}-{time.monotonic_ns() % 10**9}")
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(out, text.encode())
        finally:
            os.close(out)
        os.replace(tmp, path)
    finally:
        os.close(fd)


def _spawn_worker(sid: str, cwd: str | None, env) -> None:
    """``python -m subconscious worker --session <id>`` detached (a session of its own, stdio on /dev/null),
    as spawn.spawn_worker starts it, without importing subprocess."""
    if cwd:
        os.chdir(cwd)  # this process ends right after: the worker inherits it
    null = os.devnull
    os.posix_spawn(sys.executable, [sys.executable, "-m", "subconscious", "worker", "--session", sid], dict(env),
                   setsid=True, file_actions=[(os.POSIX_SPAWN_OPEN, 0, null, os.O_RDONLY, 0),
                                              (os.POSIX_SPAWN_OPEN, 1, null, os.O_WRONLY, 0),
                                              (os.POSIX_SPAWN_OPEN, 2, null, os.O_WRONLY, 0)])


def _pickup(sessions: str) -> None:
    """hookrun's retries without a Stop (spawn.pickup), imported only when a retry marker is due."""
    now = time.time()
    try:
        with os.scandir(os.path.join(sessions, "pending")) as it:
            due = any(not e.name.startswith(".") and e.stat().st_mtime <= now for e in it)
    except OSError:
        return
    if due:
        from pathlib import Path

        from ..delivery.spawn import pickup

        try:
            pickup(Path(sessions))
        except Exception:  # noqa: BLE001 - a retry is never worth breaking a hook for
            pass


def _on_deadline(signum, frame):  # pragma: no cover - exercised by the fault tests in a subprocess
    _log("warning", "hook %s: gave up after %.1f s (deadline) — Claude Code goes on without it"
         % (_running[0], _running[1]))
    os._exit(0)


def pre_tool_done(raw: bytes, env=os.environ) -> bool:
    """PreToolUse: inside the TTL, or (imported only then) a fetch that finds nothing new
    (:mod:`subconscious.hooks.fetch_shortcut`)."""
    if within_ttl(raw, env):
        return True
    from .fetch_shortcut import nothing_new

    return nothing_new(raw, env, pre_tool=True)


def prompt_done(raw: bytes, env=os.environ) -> bool:
    """UserPromptSubmit: a fetch that finds nothing new (:mod:`subconscious.hooks.fetch_shortcut`)."""
    from .fetch_shortcut import nothing_new

    return nothing_new(raw, env, pre_tool=False)


# event → (the shortcut, its deadline: hookrun.EVENTS gives the full path's, below the hooks.json timeouts)
SHORTCUTS = {"pre-tool-use": (pre_tool_done, 4.0), "user-prompt-submit": (prompt_done, 8.0),
             "stop": (handed_over, 10.0)}
_running = ["", 0.0]


def _exit_now() -> None:
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # Claude Code closed the pipe: nothing more to tell it
        pass
    os._exit(0)


def hook_event(argv: list[str]) -> str | None:
    """The event of a ``hook <event>`` command line (the hooks' own form, taken before argparse); None for any
    other (argparse then reads it, and says what is wrong with a malformed ``hook`` line)."""
    if len(argv) == 2 and argv[0] == "hook" and not argv[1].startswith("-"):
        return argv[1]
    return None


def run_hook(event: str, stdin=None, fast_exit: bool = False) -> int:
    """``subconscious hook <event>``: the shortcut where it applies, else hookrun.run. Always 0. With
    ``fast_exit``, a hook the shortcut finished ends the process (:func:`launch`)."""
    if event not in SHORTCUTS:
        from .run import run

        return run(event, stdin=stdin, fast_exit=fast_exit)
    shortcut, deadline = SHORTCUTS[event]
    _running[:] = [event, deadline]
    stdin = sys.stdin if stdin is None else stdin
    try:
        import _signal

        _signal.signal(_signal.SIGALRM, _on_deadline)
        _signal.setitimer(_signal.ITIMER_REAL, deadline)
    except (ImportError, AttributeError, ValueError, OSError):  # no SIGALRM (Windows), not the main thread
        _signal = None
    try:
        raw = stdin.buffer.read(STDIN_CAP + 1) if hasattr(stdin, "buffer") else stdin.read(STDIN_CAP + 1)
    except (OSError, ValueError) as exc:
        _log("warning", "hook %s: malformed input on stdin (%s); did nothing" % (event, str(exc)[:200]))
        return 0
    try:
        if isinstance(raw, str):
            raw = raw.encode("utf-8", "surrogatepass")
        done = len(raw) <= STDIN_CAP and shortcut(raw)
    except Exception as exc:  # noqa: BLE001 - not sure: the full path decides (and logs why)
        if _debug():
            _log("debug", "hook %s: shortcut not taken (%s: %s)" % (event, type(exc).__name__, str(exc)[:200]))
        done = False
    finally:
        if _signal is not None:
            _signal.setitimer(_signal.ITIMER_REAL, 0)
    if done:
        if _debug():
            _log("debug", "hook %s: done by the shortcut" % event)
        if fast_exit:
            _exit_now()
        return 0
    import io

    from .run import run

    return run(event, stdin=io.BytesIO(raw), fast_exit=fast_exit)
