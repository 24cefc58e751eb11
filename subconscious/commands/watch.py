"""``subconscious watch``: fold sync engines' conflict copies as they arrive, until SIGTERM/SIGINT.

Run it on every machine that shares the state dir (deploy/ has a systemd user unit and a launchd
agent). Each fold is logged to the per-user log.
"""

from __future__ import annotations

import argparse
import signal
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--debounce", type=float, default=0.3, metavar="SECONDS",
                        help="wait until file events have been quiet this long before folding (default 0.3)")
    parser.add_argument("--interval", type=float, default=60.0, metavar="SECONDS",
                        help="also rescan this often, in case an event was missed (default 60)")
    parser.add_argument("--once", action="store_true", help="fold what is there now and exit")
    parser.add_argument("--quiet", action="store_true", help="log only; print nothing")
    parser.add_argument("--gc-older-than", default="30d", metavar="AGE",
                        help="once a day, run `subconscious gc --older-than AGE` (default 30d)")
    parser.add_argument("--no-gc", action="store_true", help="never run the daily gc")
    parser.add_argument("--rebuild-views", action="store_true",
                        help="also rewrite this machine's conversations.json and session files whenever host "
                             "shards arrive: for a sync whose filter keeps the views out (rclone bisync, "
                             "docs/sync-rclone.md)")


def run(args: argparse.Namespace) -> int:
    from .common import load_runtime
    from ..local.log import setup
    from ..sync.watcher import Watcher

    from ..state.store.retention import parse_age

    try:
        gc_age = parse_age(args.gc_older_than)
    except ValueError as exc:
        print(f"subconscious watch: --gc-older-than: {exc}", file=sys.stderr)
        return 2
    if args.debounce < 0 or args.interval <= 0:
        print("subconscious watch: --debounce must be >= 0 and --interval > 0", file=sys.stderr)
        return 2
    rt = load_runtime()
    if rt is None:
        return 2
    log = setup(rt.local.logs, debug=rt.settings.debug)

    def say(line: str) -> None:
        if not args.quiet:
            print(f"subconscious watch: {line}", flush=True)

    store = rt.store()
    daily_gc = None
    if not args.no_gc:
        from ..sync.gc import daily

        daily_gc = lambda: daily(store, rt.local.root, age_ms=gc_age)  # noqa: E731
    watcher = Watcher(store, log, debounce=args.debounce, interval=args.interval, say=say, gc=daily_gc,
                      rebuild_views=args.rebuild_views)
    if args.once:
        watcher.fold_if_needed(force=True)
        watcher.rebuild_views_if_needed()
        return 0

    def stop(signum, frame) -> None:  # noqa: ANN001
        log.info("watch: got %s", signal.Signals(signum).name)
        watcher.request_stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, stop)
    return watcher.run()
