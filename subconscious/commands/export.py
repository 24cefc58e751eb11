"""``subconscious export FILE``: the home's state as one versioned archive (see subconscious/sync/archive.py)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="the archive to write (a .tar.gz; replaced if it exists)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def run(args: argparse.Namespace) -> int:
    from .common import load_runtime
    from ..sync.archive import collect, write_archive

    rt = load_runtime()
    if rt is None:
        return 2
    if not rt.settings.state_home.is_dir():
        print(f"subconscious export: no state at {rt.settings.state_home}", file=sys.stderr)
        return 1
    contents = collect(rt.store(read_only=True), rt.host.id)
    try:
        write_archive(Path(args.file), contents)
    except OSError as exc:
        print(f"subconscious export: cannot write {args.file}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    out = {"file": str(Path(args.file).absolute()), "home": str(rt.settings.state_home), **contents.manifest}
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        c = contents.manifest["counts"]
        print(f"subconscious export: wrote {out['file']} (format version {out['version']}): {c['sessions']} "
              f"sessions, {c['conversations']} conversations, {c['tombstones']} deleted entries, "
              f"{c['settings']} settings")
    return 0
