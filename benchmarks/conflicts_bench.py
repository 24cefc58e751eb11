"""Figures for conflict handling: doctor on a large home, fold_all, the git merge driver on a large
view, and `subconscious watch`'s fold latency after a copy appears.

    python benchmarks/conflicts_bench.py [--conversations 5000] [--sessions 2000] [--hosts 5]

Prints numbers; asserts nothing (speed goals are shown, not tested).
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
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from subconscious.state.copynames import Engine, make_copy_name  # noqa: E402
from subconscious.state.conflicts.filemerge import VIEW, render  # noqa: E402
from subconscious.state.store.core import Store  # noqa: E402
from largehome import write_large_home  # noqa: E402  (benchmarks/ is on sys.path when run as a script)


def env_for(home: Path, local: Path, host: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "GIT_"))}
    return env | {"LETTA_HOME": str(home), "SUBCONSCIOUS_HOST": host, "SUBCONSCIOUS_STATE_DIR": str(local)}


def build_home(base: Path, hosts: int, conversations: int, sessions: int, copies: int) -> Path:
    """A large home written directly in the store's own format (what years of use leave behind)."""
    state = write_large_home(base / "lh", conversations=conversations, sessions=sessions, hosts=hosts,
                             agent_id="agent-1")
    engines = list(Engine)
    for i in range(copies):
        e = engines[i % len(engines)]
        name = make_copy_name(e, f"session-sess-{i:06d}.json", host=f"PC{i}", user=f"u{i}", number=2 + i)
        (state / name).write_text((state / f"session-sess-{i:06d}.json").read_text())
    return base / "lh"


def timed(fn, runs: int = 3) -> float:
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def bench_doctor(args) -> None:
    base = Path(tempfile.mkdtemp(prefix="conflicts-bench-"))
    try:
        home = build_home(base, args.hosts, args.conversations, args.sessions, args.copies)
        env = env_for(home, base / "local", "host0")
        from subconscious.doctor.checks import diagnose

        t_diag = timed(lambda: diagnose(env, str(base)))
        import subconscious.doctor.checks as checks

        hook = checks._encryption
        checks._encryption = lambda *a, **k: []
        t_own = timed(lambda: diagnose(env, str(base)))
        checks._encryption = hook
        t_cli = timed(lambda: subprocess.run([sys.executable, "-m", "subconscious", "doctor", "--json"], env=env,
                                             capture_output=True, cwd=ROOT, check=False))
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "subconscious", "doctor", "--fix", "--json"], env=env,
                           capture_output=True, text=True, cwd=ROOT)
        t_fix = time.perf_counter() - t0
        left = [f["kind"] for f in json.loads(r.stdout)["findings"] if f["severity"] != "info"]
        print(f"doctor on a home of {args.conversations} conversations, {args.sessions} session files, "
              f"{args.hosts} hosts, {args.copies} conflict copies:")
        print(f"  diagnose (in process)      {t_diag * 1000:8.0f} ms, of which issue 5's encryption_findings "
              f"{(t_diag - t_own) * 1000:.0f} ms")
        print(f"  `subconscious doctor`      {t_cli * 1000:8.0f} ms (whole command)")
        print(f"  `subconscious doctor --fix`{t_fix * 1000:8.0f} ms (diagnose, fold {args.copies} copies, diagnose); "
              f"exit {r.returncode}, left: {left or 'nothing'}")
        store = Store(home / ".letta" / "claude", "host1", base / "l1" / "locks", base / "l1" / "clocks")
        print(f"  Store.fold_all, nothing to fold {timed(store.fold_all) * 1000:8.0f} ms")
    finally:
        shutil.rmtree(base, ignore_errors=True)


def bench_driver(args) -> None:
    base = Path(tempfile.mkdtemp(prefix="driver-bench-"))
    try:
        now = int(time.time() * 1000)
        entry = lambda i, h: {"agentId": "a", "conversationId": f"c{i}", "hlc": f"{now + h}:0", "host": "h"}  # noqa: E731
        o = {f"s{i:06d}": entry(i, 0) for i in range(args.conversations)}
        a = dict(o) | {f"a{i}": entry(i, 5) for i in range(50)}
        b = dict(o) | {f"b{i}": entry(i, 6) for i in range(50)}
        for name, v in (("O", o), ("A", a), ("B", b)):
            (base / name).write_text(render(VIEW, v))

        def run() -> None:
            (base / "A").write_text(render(VIEW, a))
            subprocess.run([sys.executable, "-m", "subconscious", "merge-driver", "O", "A", "B", "conversations.json"],
                           cwd=base, check=True, capture_output=True)

        print(f"merge-driver on a view of {args.conversations} entries (+50 per side): {timed(run) * 1000:.0f} ms "
              "per merge (whole command)")
    finally:
        shutil.rmtree(base, ignore_errors=True)


def bench_watch(args) -> None:
    base = Path(tempfile.mkdtemp(prefix="watch-bench-"))
    proc = None
    try:
        home = base / "lh"
        env = env_for(home, base / "local", "alpha")
        store = Store(home / ".letta" / "claude", "alpha", base / "local" / "locks", base / "local" / "clocks")
        for i in range(200):
            store.put_conversation(f"s{i}", f"c{i}", "agent-1")
        proc = subprocess.Popen([sys.executable, "-m", "subconscious", "watch"], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        ready = threading.Event()
        threading.Thread(target=lambda: [ready.set() for line in proc.stdout if "watching" in line], daemon=True).start()
        ready.wait(30)
        lat = []
        for i in range(args.watch_rounds):
            copy = store.home / make_copy_name(Engine.SYNCTHING, "conversations.json", device=f"ABCDE{chr(65 + i % 26)}{chr(65 + i // 26 % 26)}")
            tmp = store.home / f".syncthing.{copy.name}.tmp"
            tmp.write_bytes(store.view_path.read_bytes())
            t = time.perf_counter()
            os.replace(tmp, copy)
            while copy.exists():
                time.sleep(0.002)
            lat.append(time.perf_counter() - t)
            time.sleep(0.6)  # let the watcher go quiet again (its own writes are events too)
        lat.sort()
        print(f"watch: fold latency after a copy appears (debounce 0.3 s), {len(lat)} copies: median "
              f"{statistics.median(lat) * 1000:.0f} ms, max {lat[-1] * 1000:.0f} ms")
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(15)
        shutil.rmtree(base, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--conversations", type=int, default=5000)
    ap.add_argument("--sessions", type=int, default=2000)
    ap.add_argument("--hosts", type=int, default=5)
    ap.add_argument("--copies", type=int, default=16)
    ap.add_argument("--watch-rounds", type=int, default=10)
    args = ap.parse_args()
    bench_doctor(args)
    bench_driver(args)
    bench_watch(args)


if __name__ == "__main__":
    main()
