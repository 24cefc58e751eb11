"""``subconscious gc``: retire sessions with no activity for longer than AGE on every machine, and prune
``backups/`` and ``quarantine/`` by age (see subconscious/sync/gc.py and subconscious/state/store/retention.py)."""

from __future__ import annotations

import argparse
import json
import sys

from ..state.store.retention import DEFAULT_AGE


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--older-than", default=DEFAULT_AGE, metavar="AGE",
                        help=f"retire what has had no activity for longer than AGE: 30d, 12h, 90m, 2w; 0d = every "
                             f"session not in use now (default {DEFAULT_AGE})")
    parser.add_argument("--dry-run", action="store_true", help="say what would go, change nothing")
    parser.add_argument("--trust-clock", action="store_true",
                        help="count ages from this machine's clock even when every other machine's newest write is "
                             "older (by default they count from that write, so a clock running ahead retires nothing "
                             "fresh)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def render(out: dict) -> str:
    verb = "would retire" if out["dry_run"] else "retired"
    lines = [f"subconscious gc: {verb} {len(out['retire'])} session(s) (floor {out['floor']})"]
    ahead = out.get("clock_ahead_ms") or 0
    if ahead >= 60_000:
        lines.append(f"note: ages are counted from the newest write of another machine, {ahead / 86_400_000:.1f} d "
                     "before this machine's clock (a clock running ahead must not retire what others wrote "
                     "recently); --trust-clock counts from this clock")
    lines += [f"  {r['session']}: {r['why']}" for r in out["retire"]]
    if out["keep"]:
        lines.append(f"kept {len(out['keep'])} older session(s):")
        lines += [f"  {k['session']}: {k['why']}" for k in out["keep"]]
    lines.append(f"conversation entries tombstoned: {len(out['entries_tombstoned'])}; session files removed: "
                 f"{out['session_files_removed']}; this machine's session files removed: "
                 f"{len(out['local_sessions_removed'])}")
    if out["pruned"]:
        lines.append(f"{'would prune' if out['dry_run'] else 'pruned'} {len(out['pruned'])} set-aside path(s):")
        lines += [f"  {p['path']}: {p['why']}" for p in out["pruned"]]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from .common import load_runtime
    from ..sync.gc import run_gc
    from ..local.log import setup
    from ..state.locks import LockTimeout
    from ..state.store.retention import parse_age
    from ..state.store.core import StoreError

    try:
        age_ms = parse_age(args.older_than)
    except ValueError as exc:
        print(f"subconscious gc: {exc}", file=sys.stderr)
        return 2
    rt = load_runtime()
    if rt is None:
        return 2
    setup(rt.local.logs, debug=rt.settings.debug)
    if not rt.settings.state_home.is_dir():
        print(f"subconscious gc: no state at {rt.settings.state_home} (nothing to do)", file=sys.stderr)
        return 0
    try:
        result = run_gc(rt.store(read_only=args.dry_run), rt.local.root, age_ms=age_ms, dry_run=args.dry_run,
                        trust_clock=args.trust_clock)
    except (LockTimeout, StoreError, OSError) as exc:
        print(f"subconscious gc: {exc}", file=sys.stderr)
        return 1
    out = result.to_json()
    print(json.dumps(out, indent=1) if args.json else render(out))
    return 0
