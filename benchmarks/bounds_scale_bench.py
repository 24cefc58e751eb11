"""Figures for issue 24 item 5 (scale): reading every session, ``status`` and ``doctor`` on a home with
1,000 and 10,000 sessions across 3 hosts (wall and CPU), and a hook's read of one session with 10 vs
100,000 session files: the first read after the directory changed (it lists the directory), the
cached one, and the read after a Stop once the worker has refreshed the machine's listing cache.

    python benchmarks/bounds_scale_bench.py [--quick] [--against /path/to/other/checkout] [--runs 5]

Each figure is a median of ``--runs`` runs, measured in a child process whose ``subconscious`` comes from
this checkout (``ours``) and, with ``--against``, from another one (e.g. main before the fix), the two
run in turns on the same homes so that a busy machine slows both alike. The homes are built once, in the
store's own format: a view per session in the home and one version per host in ``hosts/<host>/``. The
home's directories are dated a minute back (a directory that changed within the last 3 s is listed
again, see subconscious/state/sessions/listcache.py). Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HOSTS = ("host0", "host1", "host2")

CHILD = r"""
import json, statistics, sys, time
from pathlib import Path
from subconscious.state.store.core import Store
what, home, local, runs = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
store = Store(home, "host0", local / "locks", local / "clocks", read_only=True)
times, cpu = [], []
if what == "all":
    for _ in range(runs):
        t, c = time.perf_counter(), time.process_time()
        n = sum(1 for _ in store.sessions())
        times.append(time.perf_counter() - t); cpu.append(time.process_time() - c)
elif what == "stop":  # a Stop's write (the worker's cursor, published into the home), then the worker's refresh
    sid = sys.argv[5]
    Store(home, "host0", local / "locks", local / "clocks").update_session(
        sid, lambda cur: cur.evolve(last_processed_index=cur.last_processed_index + 1))
    try:
        from subconscious.delivery.worker import settle_listings
    except ImportError:  # a checkout without it (--against main before the fix)
        settle_listings = None
    t = time.perf_counter()
    large = {} if len(sys.argv) < 7 else {"large": int(sys.argv[6])}  # 0: wait for a directory of any size
    settled = settle_listings(store, **large) if settle_listings else None
    print(json.dumps({"settled": settled, "waited": time.perf_counter() - t}))
    sys.exit()
else:  # one session, read the way a hook reads it (the first read fills the machine's listing cache)
    sid = sys.argv[5]
    t, c = time.perf_counter(), time.process_time(); store.session(sid)
    first, cpu = time.perf_counter() - t, [time.process_time() - c]
    for _ in range(runs):
        t = time.perf_counter(); store.session(sid); times.append(time.perf_counter() - t)
print(json.dumps({"median": statistics.median(times), "cpu": statistics.median(cpu) if cpu else 0.0,
                  "first": times[0] if what == "all" else first, "first_cpu": cpu[0] if cpu else 0.0,
                  "warm": statistics.median(times[1:]) if len(times) > 1 else times[0],
                  "warm_cpu": statistics.median(cpu[1:]) if len(cpu) > 1 else (cpu[0] if cpu else 0.0)}))
"""


def sid(i: int) -> str:
    return f"{i:08x}-1111-4222-8333-444444444444"


def build(base: Path, sessions: int, with_hosts: bool = True) -> Path:
    home = base / "lh" / ".letta" / "claude"
    now = int(time.time() * 1000)
    for h in HOSTS:
        (home / "hosts" / h).mkdir(parents=True, exist_ok=True)
    for i in range(sessions):
        s = sid(i)
        body = {"sessionId": s, "conversationId": f"conv-{i}", "lastProcessedIndex": i, "host": HOSTS[i % 3],
                "hlc": f"{now - i}:0"}
        text = json.dumps(body, indent=2) + "\n"
        (home / f"session-{s}.json").write_text(text)
        if with_hosts:
            for h in HOSTS:
                (home / "hosts" / h / f"session-{s}.json").write_text(text.replace(f'"{HOSTS[i % 3]}"', f'"{h}"'))
    shard = {"format": 1, "host": "host0", "name": "host0", "clock": f"{now}:0", "written": now,
             "conversations": {sid(i): {"agentId": "agent-1", "conversationId": f"conv-{i}", "hlc": f"{now - i}:0",
                                        "host": "host0"} for i in range(sessions)}, "settings": {}}
    (home / "hosts" / "host0.json").write_text(json.dumps(shard))
    (home / "conversations.json").write_text(json.dumps(shard["conversations"]))
    past = time.time_ns() - 60 * 10**9
    for d in (home, home / "hosts", *(home / "hosts" / h for h in HOSTS)):
        os.utime(d, ns=(past, past))
    # a file changed within the last 3 s is not trusted to the machine's read cache (racily clean, see
    # subconscious/state/sessions/cache.py): a home a minute old, as a user's is, has none such
    time.sleep(3.1)
    return home


def child(tree: Path, *args: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    # run in the tree: ``-c`` puts the working directory first on sys.path, ahead of PYTHONPATH (run from a
    # checkout, both trees would otherwise import that checkout's subconscious)
    out = subprocess.run([sys.executable, "-c", CHILD, *args], env=env, capture_output=True, text=True, timeout=3600,
                         cwd=str(tree))
    if out.returncode:
        raise SystemExit(out.stderr[-2000:])
    return json.loads(out.stdout)


def cli(tree: Path, home: Path, local: Path, verb: str, runs: int, *flags: str) -> tuple[float, float, float]:
    """(median wall s, median CPU s: user + system of the child, CPU s of the first run) of
    ``subconscious <verb> <flags>``. The first run of a checkout with a machine-local read cache fills it
    (``status``, the first verb run: every cache empty)."""
    import resource

    env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_"))}
    env.update(PYTHONPATH=str(tree), LETTA_HOME=str(home.parents[1]), SUBCONSCIOUS_HOST="host0",
               SUBCONSCIOUS_STATE_DIR=str(local), LETTA_BASE_URL="http://127.0.0.1:9")
    times, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "subconscious", verb, *flags], env=env, capture_output=True,
                       timeout=3600, cwd=str(home.parents[2]))
        times.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(times), statistics.median(cpu), cpu[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller homes (a minute or two)")
    ap.add_argument("--against", type=Path, help="another checkout to compare with (e.g. main before the fix)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--turns", type=int, default=5, help="Stops (each with its worker's refresh) per home and checkout")
    ap.add_argument("--only-one", action="store_true", help="only the hook's read of one session")
    ap.add_argument("--no-all", action="store_true", help="without the table of store.sessions() at 1,000-8,000")
    ap.add_argument("--only-cli", action="store_true", help="only status and doctor")
    args = ap.parse_args()
    trees = [("ours", ROOT)] + ([("against", args.against.resolve())] if args.against else [])
    with tempfile.TemporaryDirectory(prefix="bounds-bench-") as tmp:
        base = Path(tmp)
        sizes = (500, 1000, 2000) if args.quick else (1000, 2000, 4000, 8000)
        if args.only_one or args.no_all or args.only_cli:
            sizes = ()
        print("reading every session (store.sessions(): status, gc, export) in one process: the first read, "
              "then the median of the later ones (a read-only store keeps a machine-local cache), s")
        print(f"{'sessions':>9} {'files':>8} " + " ".join(f"{name + ' first':>12} {'cpu s':>6} {'later':>6} {'cpu s':>6}"
                                                         for name, _ in trees))
        for n in sizes:
            home = build(base / f"all{n}", n)
            row = f"{n:>9,} {n * 4:>8,} "
            for name, tree in trees:
                got = child(tree, "all", str(home), str(base / f"local-{name}-{n}"), str(max(2, args.runs // 2 + 1)))
                row += f"{got['first']:>12.2f} {got['first_cpu']:>6.2f} {got['warm']:>6.2f} {got['warm_cpu']:>6.2f} "
            print(row)
        if not args.only_one:
            print("\nstatus and doctor (whole processes) with N sessions across 3 hosts: median wall s / CPU s")
            print(f"{'':>16} {'sessions':>9} " + " ".join(f"{name + ' wall':>12} {'cpu':>6} {'1st cpu':>7}"
                                                          for name, _ in trees))
            for n in ((500, 2000) if args.quick else (1000, 10_000)):
                home = build(base / f"cli{n}", n)
                for verb, flags in (("status", ()), ("status", ("--json",)), ("doctor", ()), ("doctor", ("--json",))):
                    row = f"{' '.join((verb, *flags)):>16} {n:>9,} "
                    for name, tree in trees:
                        wall, cpu, first = cli(tree, home, base / f"cli-{name}-{n}", verb, args.runs, *flags)
                        row += f"{wall:>12.2f} {cpu:>6.2f} {first:>7.2f} "
                    print(row)
        if args.only_cli:
            return
        big = 10_000 if args.quick else 100_000
        print(f"\na hook's read of one session (store.session), 10 vs {big:,} session files in the home: median ms")
        small_home = build(base / "small", 10, with_hosts=False)
        large_home = build(base / "large", big, with_hosts=False)
        print(f"{'':>9} {'cached: 10 files':>17} {f'{big:,} files':>14} {'ratio':>6}   "
              f"{'first read: 10 files':>20} {f'{big:,} files':>14} {'ratio':>6}   {'its CPU: 10 files':>15} "
              f"{f'{big:,} files':>14}")
        for name, tree in trees:
            figures = {"small": [], "large": [], "first-small": [], "first-large": [], "cpu-small": [], "cpu-large": []}
            for turn in range(3):  # in turns: a busy spell slows both
                for label, home in (("small", small_home), ("large", large_home)):
                    got = child(tree, "one", str(home), str(base / f"one-{name}-{label}-{turn}"), str(args.runs * 40),
                                sid(3))
                    figures[label].append(got["median"])
                    figures["first-" + label].append(got["first"])
                    figures["cpu-" + label].append(got["cpu"])
            small, large, first_small, first_large, cpu_small, cpu_large = (
                statistics.median(figures[k]) * 1000 for k in
                ("small", "large", "first-small", "first-large", "cpu-small", "cpu-large"))
            print(f"{name:>9} {small:>17.3f} {large:>14.3f} {large / small:>6.2f}   {first_small:>20.2f} "
                  f"{first_large:>14.2f} {first_large / first_small:>6.1f}   {cpu_small:>15.2f} {cpu_large:>14.2f}")
        print("\n(first read: the read that lists the directory, as after any change to it; later reads use the "
              "machine's listing cache while the directory is unchanged)")
        print(f"\na hook's read after a Stop with the worker's refresh (a Stop's write, the worker's wait for the racy "
              f"window and its listing, then the read in a new process as a hook's): median ms")
        print(f"{'':>9} {'wall: 10 files':>14} {f'{big:,} files':>14} {'ratio':>6}   {'CPU: 10 files':>13} "
              f"{f'{big:,} files':>14} {'ratio':>6}   {'worker waited s: 10':>20} {f'{big:,}':>9}   "
              f"{'CPU: 10, refreshed too':>22} {'ratio':>6}")
        for name, tree in trees:
            labels = ("small", "large", "refreshed")  # refreshed: the small home, the worker waiting for it too
            figures = {f"{k}{label}": [] for k in ("", "cpu-", "wait-") for label in labels}
            for turn in range(args.turns):
                for label, home in (("small", small_home), ("large", large_home), ("refreshed", small_home)):
                    where = str(base / f"stop-{name}-{label}")
                    stop = child(tree, "stop", str(home), where, "1", sid(3), *(["0"] if label == "refreshed" else []))
                    got = child(tree, "one", str(home), where, "1", sid(3))
                    figures[label].append(got["first"])
                    figures["cpu-" + label].append(got["cpu"])
                    figures["wait-" + label].append(stop["waited"] if stop["settled"] is not None else float("nan"))
            small, large, cpu_small, cpu_large, cpu_refreshed = (statistics.median(figures[k]) * 1000 for k in
                                                                 ("small", "large", "cpu-small", "cpu-large",
                                                                  "cpu-refreshed"))
            waits = [statistics.median(figures[k]) for k in ("wait-small", "wait-large")]
            print(f"{name:>9} {small:>14.2f} {large:>14.2f} {large / small:>6.2f}   {cpu_small:>13.2f} {cpu_large:>14.2f} "
                  f"{cpu_large / cpu_small:>6.2f}   {waits[0]:>20.1f} {waits[1]:>9.1f}   {cpu_refreshed:>22.2f} "
                  f"{cpu_large / cpu_refreshed:>6.2f}")
        print("\n(the worker waits only for a directory of 1,000 names or more: a smaller one costs a hook's read "
              "less to list than anyone to wait for; the last two columns: the 10-file home with the worker waiting "
              "for it too, and the 100,000-file read's CPU against it)")


if __name__ == "__main__":
    main()
