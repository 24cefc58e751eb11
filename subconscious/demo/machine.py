"""One simulated Claude Code window on one machine: ``python -m subconscious.demo.machine``.

Runs sessions through the real store as host ``SUBCONSCIOUS_HOST`` (machine-local state in
``SUBCONSCIOUS_STATE_DIR``, shared state in ``LETTA_HOME``): each session maps to a conversation and
advances its transcript cursor a few times, as the hooks do. Prints one JSON line with what it wrote.
"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--sessions", type=int, default=4)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--agent", default="agent-demo")
    ap.add_argument("--resume", action="append", default=[], help="advance this existing session's cursor too")
    ap.add_argument("--cursor-base", type=int, default=0)
    args = ap.parse_args(argv)

    from ..local.runtime import runtime
    from ..state.records import SessionState

    rt = runtime()
    store = rt.store()
    host = rt.host.id
    written, cursors = [], {}

    def advance(sid: str, conv: str | None, to: int) -> None:
        def change(cur: SessionState | None) -> SessionState:
            state = cur or SessionState(sid, conversation_id=conv)
            return state.evolve(last_processed_index=max(state.last_processed_index, to),
                                last_seen_message_id=f"msg-{host}-{to}")
        cursors[sid] = store.update_session(sid, change).last_processed_index

    for i in range(args.sessions):
        sid = f"{args.prefix}-{i:02d}"
        conv = f"conv-{sid}"
        store.put_conversation(sid, conv, args.agent)  # SessionStart: a conversation for the session
        written.append(sid)
        for step in range(args.steps):
            advance(sid, conv, step * 5 + 4)  # Stop: transcript lines delivered
    for sid in args.resume:  # the same session continued on this machine
        current = store.session(sid)
        for step in range(args.steps):
            advance(sid, current.conversation_id if current else None, args.cursor_base + step * 7 + 3)
    print(json.dumps({"host": host, "written": written, "cursors": cursors}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
