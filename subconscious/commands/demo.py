"""``subconscious demo``: several simulated machines share one state dir; sync is cut and restored so
conflict copies appear as Syncthing and Dropbox name them; a real git clone trio merges with and
without the driver; doctor reports before and after ``--fix``. Everything happens in a temporary
directory that is removed at the end; no server or account is needed."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sessions", type=int, default=4, help="sessions per Claude Code window (default 4)")
    parser.add_argument("--keep", metavar="DIR", help="work in DIR and keep it (it must not exist yet)")
    parser.add_argument("--no-git", action="store_true", help="skip the git scene")


def run(args: argparse.Namespace) -> int:
    from ..demo.scenes import git_scene, sync_scene

    if args.sessions < 1 or args.sessions > 200:
        print("subconscious demo: --sessions must be between 1 and 200", file=sys.stderr)
        return 2
    if args.keep and Path(args.keep).exists():
        print(f"subconscious demo: {args.keep} exists already; give a new directory", file=sys.stderr)
        return 2

    def say(line: str) -> None:
        print(line, flush=True)

    t0 = time.monotonic()
    ws = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="subconscious-demo-"))
    ws.mkdir(parents=True, exist_ok=True, mode=0o700)
    say("subconscious demo: simulated machines sharing one state dir, through the real state code "
        "(no server or account needed)")
    say(f"workspace: {ws}{' (kept)' if args.keep else ' (removed at the end)'}\n")
    try:
        results = [sync_scene(ws, say, sessions=args.sessions)]
        if not args.no_git:
            say("")
            g = git_scene(ws, say, sessions=max(1, args.sessions // 2 + 1))
            if g is not None:
                results.append(g)
    finally:
        if not args.keep:
            shutil.rmtree(ws, ignore_errors=True)
    written = sum(len(r.written) for r in results)
    lost = sum(len(r.lost) for r in results)
    present = sum(min((len(k) for k in r.present.values()), default=0) for r in results)
    same = all(r.identical for r in results)
    say(f"\nResult: entries written {written}, entries present {present}, lost {lost}; "
        f"every machine converged: {'yes' if same else 'NO'} ({time.monotonic() - t0:.1f} s)")
    return 0 if lost == 0 and same else 1
