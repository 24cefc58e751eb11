"""Stop: record the transcript, hand the session to a detached worker and return at once. The worker
reads the lines after the cursor itself (bounded by the agent's context window), so nothing large is
written into the machine-local session file. A Stop with ``stop_hook_active`` (Claude Code continued the
turn because another hook blocked its stop) is handed over too: this hook never blocks, so there is no
loop to prevent, and the continued turn's lines would otherwise wait for a Stop that may never come.
Claude's final answer (``last_assistant_message``) is delivered even when the file has not recorded it yet
(lifecycle.note_lagging_answer), and only once when it does."""

from __future__ import annotations

from pathlib import Path

from ...local import sessions as localsession
from ..event import HookEvent
from ..pipeline import Skip, open_session


def handle(event: HookEvent) -> str | None:
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
    local = localsession.load(ctx.sessions_dir, ctx.session_id)
    local.transcript_path, local.cwd = path, event.cwd or local.cwd
    local.pending_update, local.pending_cursor = None, None  # no payload kept here (issue 10)
    localsession.save(ctx.sessions_dir, local)
    answer = event.data.get("last_assistant_message")
    if isinstance(answer, str) and answer.strip():  # the file may lag the conversation: the answer still goes
        from .lifecycle import note_lagging_answer

        note_lagging_answer(ctx, path, answer)
    from ...delivery.spawn import spawn_worker

    spawn_worker(ctx.session_id, local.cwd)
    return None
