"""``subconscious preview [--session ID] [--json]``: exactly what the next delivery of a session would send
to Letta — the start message, then each update the backlog drains in (private text hidden, secrets
redacted, or a budget summary instead) — built by the worker's own planning code (delivery/plan.py).
It sends nothing and writes nothing: no request to the server, no state file touched (read-only store, no
log file opened)."""

from __future__ import annotations

import argparse
import os

from ..privacy.private import LINES_NOTE, MARKER, PATH_NOTE
from ..privacy.redact import REDACTED

ROUNDS = 50  # as many updates as one worker run sends at most (worker.MAX_ROUNDS)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--session", help="this session only (default: every session of this machine with "
                                          "something to send)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def removals(text: str) -> dict[str, int]:
    """What the markers in ``text`` say was removed."""
    return {"secrets": text.count(REDACTED), "private_text": text.count(MARKER),
            "private_paths": text.count(PATH_NOTE.split("%s", 1)[1]) + text.count(LINES_NOTE.split("%d", 1)[1])}


def plan_session(sid: str, env=os.environ) -> dict:
    """The messages the next worker run for ``sid`` would send, in order, with what each covers."""
    from ..delivery import budget as budgets
    from ..delivery.plan import Budget, locate, plan_update, update_limit
    from ..hooks.pipeline import session_runtime
    from ..privacy.private import private_globs
    from ..delivery.worker import _delivered_uuids, _files, _read_lines, _start_key, private_lines

    rt, local = session_runtime(sid, env)
    sessions_dir = rt.local.root / "sessions"
    store = rt.store(read_only=True)
    store.keep_caches = False  # preview changes nothing on this machine either
    session = store.session(sid)
    out: dict = {"session": sid, "home": str(rt.settings.state_home), "messages": [], "notes": []}
    if rt.settings.mode == "off":
        out["notes"].append("LETTA_MODE=off: nothing is delivered")
        return out
    if session is None or not session.conversation_id:
        out["notes"].append("no conversation recorded for this session yet: the worker sends nothing until "
                            "SessionStart has made one")
        return out
    out["conversation"] = session.conversation_id
    caps = budgets.caps_from_env(env)
    today = budgets.read_usage(store, rt.host.id, caps)
    plan_budget = Budget(caps, today.mine, today.everyone)
    out["budget"] = budgets.report(store.read().settings, rt.host.id, env, home=store.home)
    overflow = budgets.overflow_from_env(env)
    if local.pending_start:
        text = local.pending_start
        out["messages"].append({"kind": "start", "delivery": _start_key(text), "chars": len(text),
                                "removed": removals(text), "text": text})
        plan_budget = plan_budget.after(len(text))
    lines = _read_lines(local.transcript_path)
    if lines is None:
        if not local.pending_start:
            out["notes"].append("no transcript recorded for this session on this machine")
        return out
    cursor = session.last_processed_index
    where = locate(lines, cursor, local.offset, local.anchor, lambda: _delivered_uuids(sessions_dir, sid))
    if where.rewritten:
        out["notes"].append(f"the transcript changed under the cursor: delivery goes on after line {where.position}"
                            " of the file")
    if local.attempt and local.attempt_key:
        out["notes"].append(f"lines {local.attempt[0]}-{local.attempt[1]} were sent once (delivery "
                            f"{local.attempt_key}) and their outcome is not known: the worker first looks them up in "
                            "the conversation and does not send them again if they arrived")
    limit = update_limit(local.context_window)
    if caps.any:  # as the worker bounds it: one update fits a day's budget
        from ..delivery.worker import BUDGET_BOUND_FLOOR

        limit = min([limit] + [max(c, BUDGET_BOUND_FLOOR) for c in (caps.chars, caps.total_chars) if c])
    globs = private_globs(env)
    index = private_lines(rt, local, globs, write=False)  # the cache read, never written: preview changes nothing
    kw = {**_extra(sessions_dir, sid, lines, local, limit, index), **_files(local, index)}
    pos, project = where.position, _project(rt, local)
    for _ in range(ROUNDS):
        planned = plan_update(lines, pos, sid, max_chars=limit, offset=where.offset, project=project,
                              private_paths=globs, budget=plan_budget, **kw)
        if planned.payload is None:
            break
        if planned.summarised and overflow == "defer":
            out["notes"].append(f"lines {planned.first}-{planned.last} wait for the next UTC day: the daily budget is "
                                f"reached ({planned.summarised}; SUBCONSCIOUS_BUDGET_OVERFLOW=defer)")
            break
        out["messages"].append({"kind": "summary" if planned.summarised else "update", "lines": [planned.first, planned.last],
                                "delivery": planned.update.key, "chars": len(planned.payload),
                                "summarised": planned.summarised, "removed": removals(planned.payload),
                                "text": planned.payload})
        plan_budget = plan_budget.after(len(planned.payload))
        pos = planned.update.cursor
        if kw.get("inserts"):  # a notice sent with this update is gone by the next one (the worker re-reads them)
            kw = {**kw, "inserts": [i for i in kw["inserts"] if i.key not in planned.update.inserted]}
        if not planned.update.more:
            break
    return out


def _project(rt, local):
    from ..delivery.worker import _project as project

    return project(rt, local)


def _extra(sessions_dir, sid, lines, local, limit, index=None) -> dict:
    """The session's notices as the worker would insert them (read only: moot ones are not removed here)."""
    from ..delivery import notices
    from ..privacy.private import private_globs
    from ..delivery.worker import _files

    pending = notices.load_all(sessions_dir, sid)
    if not pending:
        return {}
    inserts, _moot, skip = notices.inserts(pending, lines, local.offset, limit, private_globs(os.environ),
                                           **_files(local, index))
    return {"inserts": inserts, "skip_answers": skip}


def _sessions(env) -> list[str]:
    from ..local import sessions as localsession
    from ..local.identity import local_dirs

    return localsession.pending(local_dirs(env).root / "sessions")


def run(args: argparse.Namespace) -> int:
    from ..delivery.budget import BudgetError
    from ..config import ConfigError
    from ..state.ids import InvalidIdentifier, check_session_id
    from ..delivery.transcript import BoundTooSmall

    try:
        sids = [check_session_id(args.session)] if args.session else _sessions(os.environ)
        plans = [plan_session(sid) for sid in sids]
    except (ConfigError, InvalidIdentifier, BudgetError, BoundTooSmall) as exc:
        from .common import fail

        return fail("preview", exc, "config", 2)
    if args.json:
        from ..base.termtext import json_dumps

        print(json_dumps({"sessions": plans}, indent=2, ensure_ascii=False))
        return 0
    from ..base.termtext import clean

    def say(text: str) -> None:  # the transcript's text holds what tools printed: no escape reaches the terminal
        print(clean(text))

    if not plans:
        say("nothing to send: no session on this machine has anything pending")
    for plan in plans:
        msgs = plan["messages"]
        say(f"=== session {plan['session']}: {len(msgs)} message(s) would be sent"
            + (f" to {plan['conversation']}" if plan.get("conversation") else ""))
        for note in plan["notes"]:
            say(f"# {note}")
        for i, m in enumerate(msgs, 1):
            what = {"start": "the session-start message", "update": "an update",
                    "summary": "a budget summary instead of the update"}[m["kind"]]
            span = f", transcript lines {m['lines'][0]}-{m['lines'][1]}" if m.get("lines") else ""
            r = m["removed"]
            removed = (f"; removed: {r['private_text']} private passage(s), {r['secrets']} secret(s), "
                       f"{r['private_paths']} private file result(s)")
            say(f"--- {i}/{len(msgs)}: {what}{span}, {m['chars']:,} chars, delivery {m['delivery']}{removed}")
            if m.get("summarised"):
                say(f"# over the daily budget: {m['summarised']}")
            say(m["text"])
        if not msgs:
            say("(nothing to send)")
    return 0
