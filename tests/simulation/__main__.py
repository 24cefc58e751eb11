"""``python -m tests.simulation [--full] [--seed N] [--scenario NAME] [--no-publish] [--store-at COMMIT]``

Explores the store's schedules and prints, per scenario, how many interleavings ran and how many lost
an update, resurrected a delete, moved a cursor back or did not converge; exits 1 if any did.

- ``--full``: the >= 100,000-interleaving run (docs/tests.md names it); default: the CI part.
- ``--many N``: N random schedules per case of three or more actors (instead of the budget's).
- ``--no-publish``: a file system that cannot swap (``exchange`` answers False) nor hard-link (``link``
  raises): the store's fallback is what runs (a mutation check).
- ``--legacy-start``: every case starts from an unstamped legacy home (its set-up, as upstream alone
  would have left it: views without stamps, no ``hosts/``).
- ``--store-at COMMIT``: run against the store as it was at COMMIT (its whole package exported to a temp
  dir; a store without the ``fs=`` seam is driven through patched I/O helpers) — a mutation check.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.simulation")
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--scenario", action="append")
    ap.add_argument("--no-publish", action="store_true")
    ap.add_argument("--no-exchange", action="store_true", help="exchange answers False; link still works")
    ap.add_argument("--legacy-start", action="store_true",
                    help="every case starts from its set-up home made unstamped (upstream's legacy home)")
    ap.add_argument("--store-at")
    ap.add_argument("--many", type=int, default=None, help="random schedules per case of three or more actors")
    ap.add_argument("--stop-after", type=int, default=None, help="stop a case after this many bad schedules")
    ap.add_argument("--show", type=int, default=1, help="failing schedules printed per scenario")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)

    if args.store_at:
        root = Path(__file__).resolve().parents[2]
        tmp = Path(tempfile.mkdtemp(prefix="sim-store-"))
        subprocess.run(f"git archive {args.store_at} subconscious | tar -x -C {tmp}", shell=True, cwd=root, check=True)
        rest = [a for a in (argv if argv is not None else sys.argv[1:])]
        i = rest.index("--store-at")
        del rest[i : i + 2]
        env = dict(os.environ, PYTHONPATH=f"{tmp}{os.pathsep}{root}")
        print(f"store at {args.store_at} (exported to {tmp})", flush=True)
        # run from the export, so that its package (not the checkout's) is the one imported
        return subprocess.call([sys.executable, "-m", "tests.simulation", *rest], cwd=tmp, env=env)

    from . import world
    from .runner import CI, FULL, SEED, explore_scenario
    from .scenarios import all_cases

    if args.no_publish:
        world.FS_OPTIONS.update(exchange_ok=False, link_ok=False)
    if args.no_exchange:
        world.FS_OPTIONS.update(exchange_ok=False)
    if args.legacy_start:
        world.LEGACY_START["on"] = True
    budget = FULL if args.full else CI
    if args.many is not None:
        from dataclasses import replace

        budget = replace(budget, random_many=args.many)
    seed = SEED if args.seed is None else args.seed
    import subconscious

    print(f"store: {world.default_kind().name} ({Path(subconscious.__file__).parent}); budget {budget}; seed {seed}"
          + ("; no exchange, no link" if args.no_publish else "; no exchange" if args.no_exchange else ""), flush=True)
    t0 = time.monotonic()
    grand, bad = 0, 0
    for scenario in args.scenario or list(all_cases()):
        tally = explore_scenario(scenario, budget, seed, args.verbose, args.stop_after)
        print(tally.line(scenario), flush=True)
        for f in tally.failures[: args.show]:
            print(f.describe(), flush=True)
        grand += tally.interleavings
        bad += tally.bad
    print(f"total: {grand} interleavings, {bad} bad, {time.monotonic() - t0:.0f} s", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
