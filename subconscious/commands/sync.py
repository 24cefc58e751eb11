"""``subconscious sync setup-git [REPO]``: make a git repo holding LETTA_HOME merge our files record by
record (attributes, ignore rules, and the merge-driver config in this clone). Idempotent."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = sub.add_parser(
        "setup-git",
        help="write .gitattributes/.gitignore rules and the merge-driver config in a clone",
        description="Write our rules into the repo's .gitattributes and .gitignore (a managed block) and "
        "set merge.subconscious.driver in this clone. Run it in every clone: the driver config is not "
        "versioned. Running it again changes nothing.",
    )
    p.add_argument("repo", nargs="?", help="the git worktree (default: the one holding the state dir)")
    p.add_argument("--command", help="the driver command to configure (default: this installation's "
                   "`subconscious merge-driver %%O %%A %%B %%P`)")


def run(args: argparse.Namespace) -> int:
    from ..config import ConfigError, load_settings
    from ..sync.gitsetup import GitSetupError, existing_ancestor, prefix_for, setup, worktree_of

    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"subconscious: {exc}", file=sys.stderr)
        return 2
    home = settings.state_home
    repo = Path(args.repo) if args.repo else existing_ancestor(home)
    if worktree_of(repo) is None:
        where = f"{repo}" if args.repo else f"the state dir {home}"
        print(f"subconscious: {where} is not inside a git worktree; give the repo as REPO, "
              "or `git init` it first", file=sys.stderr)
        return 2
    try:
        top, rel, changes = setup(repo, home, args.command)
    except GitSetupError as exc:
        print(f"subconscious: {exc}", file=sys.stderr)
        return 1
    print(f"git worktree: {top}")
    if rel is None:
        print(f"note: the state dir {home} is not inside it; rules use the generic {prefix_for(None)} patterns")
    else:
        print(f"state dir in it: {rel or '(the repo root)'}")
    if not changes:
        print("already set up: nothing changed")
        return 0
    for c in changes:
        print(f"  set {c.what}: {c.detail}")
    print("commit .gitattributes and .gitignore, and run `subconscious sync setup-git` in every clone "
          "(the driver config is not versioned).")
    return 0
