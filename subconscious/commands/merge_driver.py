"""``subconscious merge-driver %O %A %B [%P]``: git's merge driver for our state files.

git runs it in the worktree root with three temp files (ancestor, ours, theirs) and, with ``%P``, the
path of the file being merged. The merged text goes to %A; exit 0 means merged. A version that cannot
be read is merged around (treated as unchanged since the ancestor) and its bytes are kept in the state
dir's ``quarantine/`` (git history holds them too). Only when neither side can be read does it exit 1,
leaving both versions in %A between conflict markers, so nothing is lost and the store's reader still
recovers whatever parses.

Configured by ``subconscious sync setup-git`` (or by hand, see docs/sync-engines.md).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

EXIT_MERGED, EXIT_CONFLICT, EXIT_USAGE = 0, 1, 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("base", metavar="%O", help="the common ancestor's version (may be empty)")
    parser.add_argument("ours", metavar="%A", help="our version; the merged result is written here")
    parser.add_argument("theirs", metavar="%B", help="their version")
    parser.add_argument("path", metavar="%P", nargs="?", help="the path being merged, relative to the worktree")


def _read(path: str, what: str, optional: bool = False) -> bytes | None:
    """git's temp file: a regular file, read without following links or blocking (see state.fs)."""
    from ..state.fs import REAL

    got = REAL.read(Path(path))
    if got.ok:
        return got.data
    if got.status == "missing":
        if optional:
            return None
        raise SystemExit(_usage(f"{what} file {path!r} does not exist"))
    raise SystemExit(_usage(f"cannot read {what} file {path!r}: {got.detail}"))


def _usage(message: str) -> int:
    print(f"subconscious merge-driver: {message}", file=sys.stderr)
    return EXIT_USAGE


def _quarantine_root(path: str | None, kind: str | None) -> Path | None:
    """The state dir that holds ``path`` (git runs us at the worktree root, %P is relative to it)."""
    if path:
        p = Path(path)
        root = p.parent.parent if kind == "shard" else p.parent
        if root.is_dir():
            return root
    git_dir = Path(os.environ.get("GIT_DIR") or ".git")
    return git_dir / "subconscious" if git_dir.is_dir() else None


def _keep(versions, path: str | None, kind: str | None) -> list[str]:
    from ..state.files import set_aside

    root = _quarantine_root(path, kind)
    if root is None:
        return []
    host = os.environ.get("SUBCONSCIOUS_HOST") or "git-merge"
    name = Path(path).name if path else "merged-file.json"
    kept = []
    for version in versions:
        try:
            kept.append(str(set_aside(root / name, version.raw, f"merge-{version.label}", root, host)))
        except OSError as exc:
            print(f"subconscious merge-driver: could not keep the {version.label} version: {exc}", file=sys.stderr)
    return kept


def _adoption_record(path: str | None) -> dict:
    """The home's adoption record (which of upstream's unstamped versions a writer already adopted), from
    the hosts' shards beside the view in the worktree, so the merge of ``conversations.json`` counts them
    once as the store does. Read like the store reads (no links followed); a shard that does not parse
    adds nothing."""
    from ..state.conflicts.filemerge import VIEW, kind_of_path

    if kind_of_path(path) != VIEW:
        return {}
    from ..state.fs import REAL
    from ..state.jsontext import Unparseable, loads_state
    from ..state.order import adopted_map, union_adopted

    hosts = Path(path).parent / "hosts"  # type: ignore[arg-type]
    records = []
    for name in sorted(REAL.listdir(hosts)) if hosts.is_dir() and not hosts.is_symlink() else []:
        if not name.endswith(".json"):
            continue
        got = REAL.read(hosts / name)
        if not got.ok:
            continue
        try:
            value = loads_state(got.data)
        except Unparseable:
            continue
        if isinstance(value, dict):
            records.append(adopted_map(value.get("adopted")))
    return union_adopted(records)


def run(args: argparse.Namespace) -> int:
    from ..state.conflicts.filemerge import conflict_text, merge_bytes

    base = _read(args.base, "ancestor (%O)", optional=True)
    ours = _read(args.ours, "ours (%A)")
    theirs = _read(args.theirs, "theirs (%B)")
    assert ours is not None and theirs is not None
    where = args.path or Path(args.ours).name
    result = merge_bytes(base, ours, theirs, args.path, _adoption_record(args.path))
    kept = _keep(result.set_aside, args.path, result.kind) if result.set_aside else []
    for note in result.notes:
        print(f"subconscious merge-driver: {where}: {note}", file=sys.stderr)
    for path in kept:
        print(f"subconscious merge-driver: {where}: kept a copy at {path}", file=sys.stderr)
    if result.text is None:
        Path(args.ours).write_bytes(conflict_text(ours, theirs))
        print(f"subconscious merge-driver: {where}: left both versions between conflict markers; "
              "`subconscious doctor --fix` merges whatever parses", file=sys.stderr)
        return EXIT_CONFLICT
    data = result.text.encode("utf-8")
    if data != ours:
        Path(args.ours).write_bytes(data)
    return EXIT_MERGED
