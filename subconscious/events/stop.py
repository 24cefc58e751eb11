"""Stop: take the transcript lines not yet delivered, format them, hand them to a detached worker and
return at once. Honours ``stop_hook_active`` (a Stop re-run by another hook's block)."""

from __future__ import annotations

from pathlib import Path

from .. import localsession
from ..hookrun import HookEvent
from ..pipeline import Skip, open_session


def handle(event: HookEvent) -> str | None:
    if event.data.get("stop_hook_active") is True:
        raise Skip("stop_hook_active: this turn was already handed over")
    ctx = open_session(event)
    session = ctx.store.session(ctx.session_id)
    if session is None or not session.conversation_id:
        # SessionStart failed (server down, slow…) or the session file was damaged: do its work now (the
        # conversation is reused if recorded), so the session's lines are not lost
        from .session_start import begin

        begin(ctx, event)
        session = ctx.store.session(ctx.session_id)
    if session is None or not session.conversation_id:
        raise Skip("no conversation for this session (SessionStart has not run or failed)")
    path = event.data.get("transcript_path")
    if not isinstance(path, str) or not Path(path).is_file():
        raise Skip(f"no transcript file at {path!r}")
    from ..transcript import build_update, complete_lines

    lines = complete_lines(Path(path).read_text(encoding="utf-8", errors="replace"))
    update = build_update(lines, session.last_processed_index, ctx.session_id)
    local = localsession.load(ctx.sessions_dir, ctx.session_id)
    local.transcript_path, local.cwd = path, event.cwd or local.cwd
    if update.payload is None:
        if update.cursor > session.last_processed_index:  # only lines with nothing to say: just move on
            ctx.store.update_session(ctx.session_id, lambda cur: cur.evolve(last_processed_index=update.cursor))
        localsession.save(ctx.sessions_dir, local)
        if not local.pending_start:
            return None
    else:
        local.pending_update = update.payload
        local.pending_cursor = [session.last_processed_index, update.cursor]
        localsession.save(ctx.sessions_dir, local)
    from ..spawn import spawn_worker

    spawn_worker(ctx.session_id, local.cwd)
    return None
