"""A writer process for the shared-cursor test: ``python -m tests.harness.cursor_writer``.

Advances ONE session's cursor ``--count`` times as host ``SUBCONSCIOUS_HOST`` (the way a worker does
after each delivery: it sets the cursor to the last line it delivered), with values ``i * writers + slot``
so that every write of every process is a distinct value; prints ``ok <value>`` after each write
returned. ``--slow-ms N`` makes every rename and swap of the home take up to N ms (an NFS/SMB-like
directory under load), through the store's file-system seam.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

from subconscious.state.fs import RealFS
from subconscious.state.records import SessionState
from subconscious.state.store.core import Store


class SlowFS(RealFS):
    def __init__(self, slow_ms: float, seed: int):
        super().__init__()
        self.slow, self.rng = slow_ms / 1000.0, random.Random(seed)

    def _pause(self) -> None:
        time.sleep(self.rng.uniform(0, self.slow))

    def replace(self, src, dst, **kw):
        self._pause()
        return super().replace(src, dst, **kw)

    def exchange(self, a, b):
        self._pause()
        return super().exchange(a, b)

    def link(self, src, dst):
        self._pause()
        return super().link(src, dst)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--home", required=True)
    ap.add_argument("--local", required=True)
    ap.add_argument("--session", required=True)
    ap.add_argument("--count", type=int, default=25)
    ap.add_argument("--slot", type=int, required=True)
    ap.add_argument("--writers", type=int, required=True)
    ap.add_argument("--slow-ms", type=float, default=0.0)
    args = ap.parse_args()
    host = os.environ["SUBCONSCIOUS_HOST"]
    local = Path(args.local)
    store = Store(Path(args.home), host, local / "locks", local / "clocks", lock_timeout=120,
                  fs=SlowFS(args.slow_ms, args.slot))
    sid = args.session
    for i in range(args.count):
        value = i * args.writers + args.slot
        store.update_session(sid, lambda cur, v=value: (cur or SessionState(sid, conversation_id=f"conv-{sid}"))
                             .evolve(last_processed_index=v))
        sys.stdout.write(f"ok {value}\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
