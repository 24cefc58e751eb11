"""Shared by the lifecycle hooks (PreCompact, PostCompact, SubagentStop, StopFailure, SessionEnd, Stop): hand
the session to the worker, note where in the transcript something happened, queue a notice (notices.py)."""

from __future__ import annotations

import logging
from pathlib import Path

from ...local import sessions as localsession
from ..pipeline import SessionContext, Skip

log = logging.getLogger("subconscious")


def line_count(path: str | None) -> int:
    """Complete lines in the transcript file now (0 when it is not there yet)."""
    if not path:
        return 0
    try:
        with open(path, "rb") as f:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    except OSError:
        return 0


def position(ctx: SessionContext, path: str | None) -> int:
    """Where the transcript stands now, in cursor terms (lines ever delivered count): a notice goes here."""
    local = localsession.load(ctx.sessions_dir, ctx.session_id)
    return line_count(path) + local.offset


def transcript_of(ctx: SessionContext) -> str | None:
    path = ctx.event.data.get("transcript_path")
    return path if isinstance(path, str) and Path(path).is_file() else None


def require_conversation(ctx: SessionContext):
    session = ctx.store.session(ctx.session_id)
    if session is None or not session.conversation_id:
        raise Skip("no conversation for this session (SessionStart has not run or failed)")
    return session


def record_transcript(ctx: SessionContext, **changes) -> localsession.LocalSession:
    """Remember the transcript path (and ``changes``) in the machine-local session file."""
    local = localsession.load(ctx.sessions_dir, ctx.session_id)
    path = transcript_of(ctx)
    if path:
        local.transcript_path = path
    local.cwd = ctx.event.cwd or local.cwd
    for k, v in changes.items():
        setattr(local, k, v)
    localsession.save(ctx.sessions_dir, local)
    return local


def hand_over(ctx: SessionContext, **changes) -> None:
    """Record the transcript and start a detached worker for the session (returns at once)."""
    local = record_transcript(ctx, **changes)
    from ...delivery.spawn import spawn_worker

    spawn_worker(ctx.session_id, local.cwd)


def note_lagging_answer(ctx: SessionContext, path: str, answer: str) -> bool:
    """Stop's ``last_assistant_message`` when the transcript file has not recorded it yet (Claude Code's docs
    say the file can lag): queued as a notice so the answer is delivered now, and its line left out when the
    file catches up. True when it was queued."""
    from ...delivery import notices
    from ..answer_tail import lagging
    from ...delivery.transcript import answer_digest, cut, redact

    if not lagging(path, answer):  # recorded (its line delivers it), or the file unreadable
        return False
    digest = answer_digest(answer)
    notices.add(ctx.sessions_dir, ctx.session_id, "answer", position(ctx, path), key="answer-" + digest,
                digest=digest, text=redact(cut(answer, notices.ANSWER_CUT)))
    log.info("stop: the transcript has not recorded Claude's last answer yet; it is delivered from the hook's input")
    return True
