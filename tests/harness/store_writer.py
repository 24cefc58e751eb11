"""A writer process for the concurrency and crash tests: ``python -m tests.harness.store_writer``.

Writes ``--count`` conversation entries (session ``<prefix>-<i>``) through the real store, as host
``SUBCONSCIOUS_HOST``, and prints ``ok <session>`` (flushed) after each write returns, so a test that
kills it knows exactly which writes completed.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from subconscious.state.records import SessionState
from subconscious.state.store.core import Store


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--home", required=True)
    ap.add_argument("--local", required=True, help="machine-local state dir (locks, clocks)")
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--sessions", action="store_true", help="also advance a session file per write")
    args = ap.parse_args()
    host = os.environ["SUBCONSCIOUS_HOST"]
    store = Store(Path(args.home), host, Path(args.local) / "locks", Path(args.local) / "clocks", lock_timeout=120)
    out = sys.stdout
    for i in range(args.count):
        sid = f"{args.prefix}-{i}"
        store.put_conversation(sid, f"conv-{sid}", f"agent-{host}")
        if args.sessions:
            sess = f"{args.prefix}-cursor"
            store.update_session(
                sess,
                lambda cur, i=i, sess=sess: (cur or SessionState(sess)).evolve(
                    conversation_id=f"conv-{sess}", last_processed_index=i
                ),
            )
        out.write(f"ok {sid}\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
