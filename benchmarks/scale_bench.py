"""Figures for a very large home (issue 9, item 10): folding a 100,000-entry ``conversations.json`` with
three sync engines' conflict copies of it, a read and a write at that size, and the whole-process
latency of the hooks a session runs most as the home grows from 100 to 100,000 entries.

    python benchmarks/scale_bench.py [--quick] [--entries 100000] [--runs 5] [--hook-runs 15]

Part 1 builds a home in the store's own format (the view, one shard per host, as the store writes
them) plus three conflict copies of the view (Syncthing, Dropbox, Nextcloud names), each differing
from the original in a few hundred entries (newer versions from another host, entries only the copy
has, entries the copy lacks), and times ``Store.fold_all()`` in process, the home rebuilt before each
run. Part 2 builds one home per size (the view, the shards, a session file per entry) and times each
hook as Claude Code runs it: a new process, JSON on stdin, no server reachable
(``LETTA_BASE_URL=http://127.0.0.1:9``, so the one request a fetching hook makes fails at once).

Times are medians: wall clock (what a user waits for) and CPU (user + system of this process, or of
the hook's process: less sensitive to a busy machine). Prints numbers; asserts nothing (speed goals are
shown, not tested).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from subconscious.state.copynames import Engine, make_copy_name  # noqa: E402
from subconscious.state.conflicts.filemerge import VIEW, render  # noqa: E402
from subconscious.state.store.core import Store  # noqa: E402
from largehome import write_large_home  # noqa: E402  (benchmarks/ is on sys.path when run as a script)

AGENT = "agent-00000000-0000-4000-8000-000000000000"
HOSTS = 3
COPY_ENGINES = (
    (Engine.SYNCTHING, {"device": "ABCDEFG"}),
    (Engine.DROPBOX, {"user": "alice"}),
    (Engine.NEXTCLOUD, {"user": "bob"}),
)
NO_SERVER = "http://127.0.0.1:9"  # the discard port: nothing listens, a connection is refused at once
HOOKS = ("pre-tool-use", "user-prompt-submit", "stop")


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f}"


# ---------------------------------------------------------------- part 1: fold, read, write


def copy_of_view(view: dict[str, dict], n: int, changed: int, seed: int, now: int) -> dict[str, dict]:
    """What another machine's copy of the view says: ``changed`` entries rewritten there (a newer version
    by a host of its own), ``changed // 4`` entries it created, ``changed // 4`` it never had."""
    out = dict(view)
    stride = max(1, n // changed)
    for j in range(changed):
        key = f"sess-{(seed * 7919 + j * stride) % n:06d}"
        out[key] = {"agentId": AGENT, "conversationId": f"conv-{key[5:]}-c{seed}", "hlc": f"{now + 1000 + j}:0",
                    "host": f"copyhost{seed}"}
    for j in range(changed // 4):
        out[f"new{seed}-{j:05d}"] = {"agentId": AGENT, "conversationId": f"conv-new{seed}-{j}",
                                     "hlc": f"{now + 2000 + j}:0", "host": f"copyhost{seed}"}
    for j in range(changed // 4):
        out.pop(f"sess-{(seed * 104729 + j * stride + stride // 2) % n:06d}", None)
    return out


def build_fold_home(base: Path, entries: int, changed: int) -> Path:
    """The home of part 1 (under ``base``): view + shards, and three conflict copies of the view."""
    state = write_large_home(base, conversations=entries, sessions=0, hosts=HOSTS, agent_id=AGENT)
    view = json.loads((state / "conversations.json").read_text())
    now = int(time.time() * 1000)
    for seed, (engine, kw) in enumerate(COPY_ENGINES, start=1):
        name = make_copy_name(engine, "conversations.json", **kw)
        (state / name).write_text(render(VIEW, copy_of_view(view, entries, changed, seed, now)))
    return state


def cpu_now() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def timed(fn, runs: int, setup=None) -> tuple[float, float, object]:
    """(median wall s, median CPU s, last result) of ``fn()`` over ``runs`` runs, ``setup()`` untimed before each."""
    walls, cpus, result = [], [], None
    for _ in range(runs):
        if setup is not None:
            setup()
        c, t = cpu_now(), time.perf_counter()
        result = fn()
        walls.append(time.perf_counter() - t)
        cpus.append(cpu_now() - c)
    return statistics.median(walls), statistics.median(cpus), result


def bench_fold(args) -> None:
    base = Path(tempfile.mkdtemp(prefix="scale-bench-"))
    try:
        t = time.perf_counter()
        template = build_fold_home(base / "template", args.entries, args.changed)
        built = time.perf_counter() - t
        home = base / "home" / ".letta" / "claude"
        local = base / "local"

        def rebuild() -> None:
            shutil.rmtree(base / "home", ignore_errors=True)
            shutil.rmtree(local, ignore_errors=True)
            shutil.copytree(template.parent, home.parent)

        def store() -> Store:
            return Store(home, "host0", local / "locks", local / "clocks")

        rebuild()
        sizes = {p.name: p.stat().st_size for p in sorted(home.iterdir()) if p.is_file()}
        fold_wall, fold_cpu, folded = timed(lambda: store().fold_all(), args.runs, setup=rebuild)
        left = sorted(p.name for p in home.iterdir() if p.is_file() and p.name != "conversations.json")
        merged = len(json.loads((home / "conversations.json").read_text()))
        read_wall, read_cpu, snap = timed(lambda: store().read(), args.runs)
        counter = iter(range(10**6))
        put_wall, put_cpu, _ = timed(lambda: store().put_conversation(f"bench-{next(counter)}", "conv-bench", AGENT),
                                     args.runs)

        print(f"Part 1: a home of {args.entries:,} entries in conversations.json and {HOSTS} shards, with "
              f"{len(COPY_ENGINES)} conflict copies of the view")
        print(f"  (built in {built:.1f} s; view {sizes['conversations.json'] / 1e6:.1f} MB; each copy differs in "
              f"{args.changed} entries rewritten, {args.changed // 4} added, {args.changed // 4} missing)")
        for name in sizes:
            if name != "conversations.json":
                print(f"    {name}")
        print()
        print(f"  {'operation':<52} {'wall ms':>9} {'CPU ms':>9}")
        print(f"  {'-' * 72}")
        print(f"  {'Store.fold_all() (3 copies folded)':<52} {ms(fold_wall):>9} {ms(fold_cpu):>9}")
        print(f"  {'Store.read() (after the fold)':<52} {ms(read_wall):>9} {ms(read_cpu):>9}")
        print(f"  {'Store.put_conversation() (one new entry)':<52} {ms(put_wall):>9} {ms(put_cpu):>9}")
        print(f"  medians of {args.runs} runs; fold_all returned {folded}; {merged:,} entries merged; "
              f"left in the home: {', '.join(left) or 'nothing else'}")
        print()
    finally:
        shutil.rmtree(base, ignore_errors=True)


# ---------------------------------------------------------------- part 2: hook latency vs home size

SID = "bench-session-0001"


class HookHome:
    """One home of ``entries`` sessions (view + shards + a session file each) and one session of ours
    in it whose hooks are timed: SessionStart has run (a conversation is recorded), the transcript has
    been delivered to its end, the last fetch was just now."""

    def __init__(self, base: Path, entries: int, sessions: int):
        from subconscious.local import sessions as localsession
        from subconscious.state.records import SessionState
        from tests.harness.transcripts import Transcript

        self.base, self.entries = base, entries
        self.home = base / "home"
        write_large_home(self.home, conversations=entries, sessions=sessions, hosts=HOSTS, agent_id=AGENT)
        self.local = base / "local"
        self.project = base / "project"
        self.project.mkdir(parents=True)
        self.transcript = base / "transcripts" / f"{SID}.jsonl"
        t = Transcript(self.transcript, SID, str(self.project))
        for i in range(20):
            t.user(f"turn {i}: look at the parser").assistant("Looking.").bookkeeping()
        lines = t.line_count()
        store = Store(self.home / ".letta" / "claude", "bench", self.local / "locks", self.local / "clocks")
        store.put_conversation(SID, "conv-bench", AGENT)
        store.update_session(SID, lambda cur: SessionState(SID, conversation_id="conv-bench", agent_id=AGENT,
                                                           last_processed_index=lines - 1))
        local = localsession.load(self.local / "sessions", SID)
        local.last_fetch_ms = int(time.time() * 1000)
        localsession.save(self.local / "sessions", local)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "CLAUDE")) and k != "PYTHONDONTWRITEBYTECODE"}
        env.update(LETTA_BASE_URL=NO_SERVER, LETTA_API_KEY="bench-key-not-checked", LETTA_HOME=str(self.home),
                   SUBCONSCIOUS_STATE_DIR=str(self.local), SUBCONSCIOUS_HOST="bench", HOME=str(base / "user"),
                   LETTA_MODE="whisper", PYTHONPYCACHEPREFIX=str(base.parent / "pycache"))
        self.env = env

    def data(self, event: str) -> str:
        extra = {"user-prompt-submit": {"hook_event_name": "UserPromptSubmit", "prompt": "go on"},
                 "pre-tool-use": {"hook_event_name": "PreToolUse", "tool_name": "Read",
                                  "tool_input": {"file_path": "/etc/hostname"}, "tool_use_id": "toolu_1"},
                 "stop": {"hook_event_name": "Stop", "stop_hook_active": False}}[event]
        return json.dumps({"session_id": SID, "transcript_path": str(self.transcript), "cwd": str(self.project),
                           **extra})

    def run(self, event: str, ttl: str) -> tuple[float, float]:
        """(wall s, CPU s) of one hook process."""
        raw = self.data(event)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "subconscious", "hook", event], input=raw, capture_output=True,
                              text=True, env={**self.env, "SUBCONSCIOUS_FETCH_TTL": ttl}, cwd=str(self.project))
        wall = time.perf_counter() - t
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0 or proc.stdout.strip() or "Traceback" in proc.stderr:
            raise SystemExit(f"hook {event} did not run as expected ({proc.returncode}): {proc.stdout}{proc.stderr}")
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return wall, cpu


# (label, event, SUBCONSCIOUS_FETCH_TTL): what a session runs most, cheapest first
HOOK_ROWS = (
    ("PreToolUse, within the fetch TTL", "pre-tool-use", "86400"),
    ("PreToolUse, fetching (server down)", "pre-tool-use", "0"),
    ("UserPromptSubmit (server down)", "user-prompt-submit", "0"),
    ("Stop, transcript delivered", "stop", "0"),
)


def bench_hooks(args, files: bool) -> None:
    """``files``: a session file per entry (else 100 session files whatever the size)."""
    sizes = [int(s) for s in args.sizes.split(",")]
    runs = max(args.hook_runs, 15)
    base = Path(tempfile.mkdtemp(prefix="scale-hooks-"))
    try:
        homes = {}
        for n in sizes:
            t = time.perf_counter()
            homes[n] = HookHome(base / f"n{n}", n, n if files else min(n, 100))
            print(f"  built a home of {n:,} entries in {time.perf_counter() - t:.1f} s", file=sys.stderr, flush=True)
        walls = {(n, r): [] for n in sizes for r in range(len(HOOK_ROWS))}
        cpus = {(n, r): [] for n in sizes for r in range(len(HOOK_ROWS))}
        for n in sizes:  # one untimed run each: byte-compile, warm the page cache
            for _, event, ttl in HOOK_ROWS:
                homes[n].run(event, ttl)
        for _ in range(runs):  # interleaved, so a slower minute of a busy machine hits every size alike
            for n in sizes:
                for r, (_, event, ttl) in enumerate(HOOK_ROWS):
                    wall, cpu = homes[n].run(event, ttl)
                    walls[n, r].append(wall)
                    cpus[n, r].append(cpu)
        print(f"Part 2{'b' if files else 'a'}: hook latency vs home size (whole process `python -m subconscious hook "
              f"<event>`, no server reachable; medians of {runs} runs); a home of N entries has N entries in "
              f"conversations.json and {HOSTS} shards, and {'N session files' if files else '100 session files'}")
        print()
        head = f"  {'hook':<38}" + "".join(f"{f'{n:,}':>16}" for n in sizes)
        print(head)
        print(f"  {'':<38}" + "".join(f"{'wall/CPU ms':>16}" for _ in sizes))
        print(f"  {'-' * (len(head) - 2)}")
        for r, (label, _, _) in enumerate(HOOK_ROWS):
            cells = "".join(f"{ms(statistics.median(walls[n, r])) + ' / ' + ms(statistics.median(cpus[n, r])):>16}"
                            for n in sizes)
            print(f"  {label:<38}{cells}")
        print()
        print(f"  ratio to the {sizes[0]:,}-entry home (wall / CPU)")
        for r, (label, _, _) in enumerate(HOOK_ROWS):
            w0, c0 = statistics.median(walls[sizes[0], r]), statistics.median(cpus[sizes[0], r])
            cells = "".join(f"{statistics.median(walls[n, r]) / w0:>9.2f} / {statistics.median(cpus[n, r]) / c0:4.2f}"
                            for n in sizes)
            print(f"  {label:<38}{cells}")
        print()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a smaller run: 10,000 entries, fewer runs")
    ap.add_argument("--entries", type=int, default=100_000, help="entries in part 1's conversations.json")
    ap.add_argument("--changed", type=int, default=300, help="entries each conflict copy rewrote")
    ap.add_argument("--runs", type=int, default=5, help="runs of each part-1 operation")
    ap.add_argument("--hook-runs", type=int, default=15, help="runs of each hook at each size (at least 15)")
    ap.add_argument("--sizes", default="100,1000,10000,100000", help="home sizes for part 2 (entries)")
    ap.add_argument("--skip-fold", action="store_true")
    ap.add_argument("--skip-hooks", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.entries, args.runs, args.sizes = min(args.entries, 10_000), min(args.runs, 3), "100,10000"
    if not args.skip_fold:
        bench_fold(args)
    if not args.skip_hooks:
        bench_hooks(args, files=False)
        bench_hooks(args, files=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
