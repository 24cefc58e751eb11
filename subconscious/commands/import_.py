"""``subconscious import FILE``: merge an export archive into the home, through the store's merge:
idempotent, never overwriting newer state (see subconscious/sync/archive.py)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="an archive written by `subconscious export`")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def run(args: argparse.Namespace) -> int:
    from .common import load_runtime
    from ..sync.archive import ArchiveError, import_into, read_archive
    from ..local.log import setup
    from ..state.locks import LockTimeout
    from ..state.store.core import StoreError

    rt = load_runtime()
    if rt is None:
        return 2
    setup(rt.local.logs, debug=rt.settings.debug)
    try:
        contents = read_archive(Path(args.file))
    except ArchiveError as exc:
        print(f"subconscious import: refused: {exc}", file=sys.stderr)
        return 1
    try:
        out = import_into(rt.store(), contents)
    except ArchiveError as exc:  # the check before the merge (nothing merged)
        print(f"subconscious import: refused: {exc}", file=sys.stderr)
        return 1
    except (LockTimeout, StoreError, OSError) as exc:
        print(f"subconscious import: {exc}", file=sys.stderr)
        return 1
    out = {"file": str(Path(args.file).absolute()), "home": str(rt.settings.state_home), **out}
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        print(f"subconscious import: {out['conversations_merged']} entries and {out['settings_merged']} settings "
              f"merged ({out['older_than_home']} older than the home's, kept as they were); sessions: "
              f"{out['sessions_merged']} merged, {out['sessions_unchanged']} unchanged, "
              f"{out['sessions_retired_here']} retired here")
        for line in out["invalid"]:
            print(f"  skipped (invalid): {line}")
    return 1 if out["invalid"] else 0
