"""``subconscious worker``: deliver pending transcripts (the Stop hook starts it detached)."""

from __future__ import annotations

import argparse
import os
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--session", help="deliver this session only (default: every session with pending work)")


def run(args: argparse.Namespace) -> int:
    from ..local import sessions as localsession
    from ..local.log import setup
    from ..local.runtime import runtime
    from ..state.ids import InvalidIdentifier, check_session_id
    from ..delivery.worker import deliver

    rt = runtime(os.environ)
    log = setup(rt.local.logs, debug=rt.settings.debug)
    try:
        sessions = [check_session_id(args.session)] if args.session else localsession.pending(rt.local.root / "sessions")
    except InvalidIdentifier as exc:
        print(f"subconscious worker: {exc}", file=sys.stderr)
        return 2
    from ..hooks.pipeline import session_runtime

    failed = 0
    homes = {}
    for sid in sessions:
        try:
            # each session's own home, as SessionStart recorded it: the worker and the hooks agree
            # whatever the cwd or CLAUDE_PROJECT_DIR say now (one home per session)
            session_rt, _ = session_runtime(sid, os.environ)
            homes.setdefault(str(session_rt.settings.state_home), session_rt)
            result = deliver(session_rt, sid)
        except Exception as exc:  # noqa: BLE001 - a detached worker has nowhere else to report
            log.exception("worker %s: %s", sid, exc)
            failed += 1
            continue
        failed += result.error is not None
    from ..delivery.worker import settle_listings

    for home, home_rt in homes.items():  # after the last write: the next hook's read finds its listing cached
        try:
            settle_listings(home_rt.store(read_only=True))
        except Exception as exc:  # noqa: BLE001 - a cache: the next hook lists the home itself
            log.warning("worker: refreshing the listing cache of %s: %s: %s", home, type(exc).__name__, exc)
    return 1 if failed else 0
