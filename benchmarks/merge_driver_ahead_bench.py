"""Figures for the git merge driver on a host's shard whose ``ahead`` record is large (a record that grew
with every key written over a clock that ran ahead, or a crafted side): ``subconscious merge-driver %O %A
%B %P`` where %B carries a record of N keys x 16 entries, wall time of the whole command.

    python benchmarks/merge_driver_ahead_bench.py [--against /path/to/other/checkout] [--runs 3] [--keys 2000,20000]

Each figure is a median of ``--runs`` runs, in a child process whose ``subconscious`` comes from this
checkout (``ours``) and, with ``--against``, from another one, run in turns. Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
T0 = 1_800_000_000_000


def shard(ahead: dict) -> dict:
    return {"format": 2, "host": "right", "name": "right", "clock": f"{T0}:5", "written": T0,
            "conversations": {"k": {"conversationId": "c", "agentId": "a", "hlc": f"{T0}:1", "host": "right"}},
            "settings": {}, **({"ahead": ahead} if ahead else {})}


def run(tree: Path, work: Path, base: bytes, theirs: bytes) -> float:
    for name, data in (("O", base), ("A", base), ("B", theirs)):
        (work / name).write_bytes(data)
    env = dict(os.environ, PYTHONPATH=str(tree))
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "subconscious", "merge-driver", str(work / "O"), str(work / "A"),
                          str(work / "B"), "hosts/right.json"], env=env, capture_output=True, text=True,
                         timeout=3600, cwd=str(tree))
    took = time.perf_counter() - t
    if out.returncode:
        raise SystemExit(out.stderr[-2000:])
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", type=Path)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keys", default="2000,20000")
    args = ap.parse_args()
    trees = {"ours": ROOT, **({"against": args.against.resolve()} if args.against else {})}
    work = Path(tempfile.mkdtemp(prefix="merge-driver-bench-"))
    try:
        base = json.dumps(shard({})).encode()
        for n in (int(k) for k in args.keys.split(",")):
            ahead = {f"key{i}": [f"{T0 + 7_200_000 + j}:{j}@zahead" for j in range(16)] for i in range(n)}
            theirs = json.dumps(shard(ahead)).encode()
            times: dict[str, list[float]] = {name: [] for name in trees}
            for _ in range(args.runs):
                for name, tree in trees.items():
                    times[name].append(run(tree, work, base, theirs))
            figures = ", ".join(f"{name} {statistics.median(t):.2f} s" for name, t in times.items())
            print(f"merge-driver, %B with an ahead record of {n:,} keys x 16 ({len(theirs) / 1e6:.1f} MB): {figures}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
