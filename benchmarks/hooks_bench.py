"""Figures for the hooks' hot path against the real Letta server: whole-process latency of each hook
(median and p90 of N runs), the HTTP requests each makes, Stop's return vs its worker's finish, the same
in a large home (thousands of sessions), and each hook's import time.

    python benchmarks/hooks_bench.py [--runs 20] [--burst 10] [--sessions 3000] [--conversations 5000]
    python benchmarks/hooks_bench.py --upstream PATH [--runs 20]   # side by side with upstream (sidebyside.py)

Uses the server of SUBCONSCIOUS_LETTA_STATE (see tests/harness/letta_server.py) or starts one (and stops
it). Requests are counted at a pass-through proxy (tests/harness/fault_proxy.py) between the hooks and the
server: a hook's requests are those that arrive while its process runs (a detached worker's come after,
and are counted apart). Each hook runs as Claude Code runs it: a new process, JSON on stdin
(``python -m subconscious hook <event>``). Prints numbers; asserts nothing (speed goals are shown, not tested).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from subconscious.state.locks import probe  # noqa: E402
from subconscious.state.store.core import Store  # noqa: E402
from tests.harness.fault_proxy import FaultProxy  # noqa: E402
from tests.harness.letta_fixtures import FAKE_MODEL_HANDLE, delete_agent, import_agent  # noqa: E402
from tests.harness.transcripts import Transcript  # noqa: E402
from largehome import write_large_home  # noqa: E402  (benchmarks/ is on sys.path when run as a script)

HOST = "bench"
PYCACHE = Path(tempfile.mkdtemp(prefix="hooks-bench-pyc-"))
NOTABLE = {"httpx", "httpcore", "pydantic", "anyio", "portalocker", "cryptography", "platformdirs", "urllib.request",
           "ssl", "subconscious.letta.client", "subconscious.letta.lite", "subconscious.delivery.transcript"}


_IDS = re.compile(r"(agent|conv|message)-[0-9a-f-]+")


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]


@dataclass
class Row:
    label: str
    seconds: list[float] = field(default_factory=list)
    requests: list[int] = field(default_factory=list)
    calls: set[str] = field(default_factory=set)  # the kinds of request seen ("GET agents/{id}")

    def add(self, seconds: float, seen: list) -> None:
        self.seconds.append(seconds)
        self.requests.append(len(seen))
        self.calls.update(r.method + " " + _IDS.sub(r"{\1}", r.path) for r in seen)

    def cells(self) -> tuple[str, str, str]:
        if not self.seconds:
            return "-", "-", "-"
        med, p90 = statistics.median(self.seconds) * 1000, pct(self.seconds, 90) * 1000
        req = f"{statistics.mean(self.requests):.2f}" if self.requests else "-"
        return f"{med:7.0f}", f"{p90:7.0f}", req


class Bench:
    """One machine's hooks against the server, in one home."""

    def __init__(self, base: Path, proxy: FaultProxy, agent_id: str, home: Path, mode: str = "whisper"):
        self.base, self.proxy, self.home = base, proxy, home
        self.local = base / "local"
        self.project = base / "project"
        self.project.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "CLAUDE")) and k != "PYTHONDONTWRITEBYTECODE"}
        env.update(LETTA_BASE_URL=proxy.url, LETTA_API_KEY="bench-key-not-checked", LETTA_MODEL=FAKE_MODEL_HANDLE,
                   LETTA_AGENT_ID=agent_id, LETTA_HOME=str(home), SUBCONSCIOUS_STATE_DIR=str(self.local),
                   SUBCONSCIOUS_HOST=HOST, HOME=str(base / "user"), LETTA_MODE=mode,
                   PYTHONPYCACHEPREFIX=str(PYCACHE))
        self.env = env
        self.sid = ""
        self.transcript: Transcript | None = None

    def data(self, event: str, sid: str | None = None) -> dict:
        sid = sid or self.sid
        tp = str(self.base / "transcripts" / f"{sid}.jsonl")
        extra = {"session-start": {"hook_event_name": "SessionStart", "source": "startup"},
                 "user-prompt-submit": {"hook_event_name": "UserPromptSubmit", "prompt": "go on"},
                 "pre-tool-use": {"hook_event_name": "PreToolUse", "tool_name": "Read",
                                  "tool_input": {"file_path": "/etc/hostname"}, "tool_use_id": "toolu_1"},
                 "stop": {"hook_event_name": "Stop", "stop_hook_active": False}}[event]
        return {"session_id": sid, "transcript_path": tp, "cwd": str(self.project), **extra}

    def run(self, event: str, sid: str | None = None, env: dict | None = None,
            argv_prefix: tuple[str, ...] = ()) -> tuple[float, list, subprocess.CompletedProcess]:
        """(seconds, the requests that arrived while the process ran, process)."""
        raw = json.dumps(self.data(event, sid))
        before = len(self.proxy.requests)
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, *argv_prefix, "-m", "subconscious", "hook", event], input=raw,
                              capture_output=True, text=True, env=env or self.env, cwd=str(self.project))
        seconds = time.perf_counter() - t0
        requests = self.proxy.requests[before:]
        if proc.returncode != 0 or "Traceback" in proc.stdout + proc.stderr:
            raise SystemExit(f"hook {event} failed ({proc.returncode}): {proc.stdout}{proc.stderr}")
        return seconds, requests, proc

    def cursor(self, sid: str | None = None) -> int:
        s = Store(self.home / ".letta" / "claude", "reader", self.base / "r" / "locks", self.base / "r" / "clocks",
                  read_only=True).session(sid or self.sid)
        return -2 if s is None else s.last_processed_index

    def worker_idle(self, sid: str | None = None, timeout: float = 120) -> None:
        """Until the session's worker delivered its start message and holds no lock."""
        sid = sid or self.sid
        local = self.local / "sessions" / f"{sid}.json"
        lock = self.local / "locks" / f"{HOST}.deliver.{sid}.lock"
        deadline = time.monotonic() + timeout
        free = 0
        while time.monotonic() < deadline:
            started = local.exists() and json.loads(local.read_text() or "{}").get("pending_start") is None
            free = free + 1 if started and probe(lock) is None else 0
            if free >= 3:
                return
            time.sleep(0.05)
        raise SystemExit(f"the worker of {sid} did not finish; see {self.local / 'logs'}")

    def log_tail(self) -> str:
        p = self.local / "logs" / "subconscious.log"
        return p.read_text()[-2000:] if p.exists() else ""

    # ------------------------------------------------------------ the measurements

    def session_start(self, runs: int) -> Row:
        row = Row("SessionStart (new session)")
        for _ in range(runs):
            sid = str(uuid.uuid4())
            s, seen, _ = self.run("session-start", sid)
            row.add(s, seen)
            self.worker_idle(sid)
            self.sid = sid
        self.transcript = Transcript(self.base / "transcripts" / f"{self.sid}.jsonl", self.sid, str(self.project))
        return row

    def prompt(self, runs: int, label: str, env: dict | None = None) -> Row:
        row = Row(label)
        for _ in range(runs):
            s, seen, _ = self.run("user-prompt-submit", env=env)
            row.add(s, seen)
        return row

    def pre_tool(self, runs: int, label: str, ttl: str | None, burst: int, gap: float) -> Row:
        env = dict(self.env)
        env.pop("SUBCONSCIOUS_FETCH_TTL", None)
        if ttl is not None:
            env["SUBCONSCIOUS_FETCH_TTL"] = ttl
        row = Row(label)
        done = 0
        while done < runs:
            for _ in range(min(burst, runs - done)):
                s, seen, _ = self.run("pre-tool-use", env=env)
                row.add(s, seen)
                done += 1
            if done < runs and gap:
                time.sleep(gap)  # the next burst starts after the TTL ran out
        return row

    def stop(self, runs: int) -> tuple[Row, Row]:
        hook, worker = Row("Stop: the hook returns"), Row("Stop: its worker has delivered")
        assert self.transcript is not None
        for i in range(runs):
            self.transcript.user(f"benchmark turn {i}: please look at the parser").assistant("Looking.").bookkeeping()
            end = self.transcript.line_count() - 1
            t0 = time.perf_counter()
            s, seen, _ = self.run("stop")
            hook.add(s, seen)
            after_hook = len(self.proxy.requests)
            deadline = time.monotonic() + 120
            while self.cursor() < end:
                if time.monotonic() > deadline:
                    raise SystemExit(f"Stop's worker never delivered:\n{self.log_tail()}")
                time.sleep(0.01)
            took = time.perf_counter() - t0
            self.worker_idle()
            worker.add(took, self.proxy.requests[after_hook:])
        return hook, worker


# ---------------------------------------------------------------- a large home


def build_large_home(home: Path, conversations: int, sessions: int, hosts: int) -> None:
    """Thousands of other sessions, written directly in the store's own format (what years of use on
    several machines leave behind): the view, one shard per host, a session file per session."""
    write_large_home(home, conversations=conversations, sessions=sessions, hosts=hosts)


# ---------------------------------------------------------------- import time


def import_profile(bench: Bench, event: str, env: dict | None = None, runs: int = 5) -> tuple[float, int, list[str]]:
    """(median total import ms, modules imported, heavy packages among them) of one hook run."""
    totals, count, heavy = [], 0, []
    for _ in range(runs):
        _, _, proc = bench.run(event, env=env, argv_prefix=("-X", "importtime"))
        total, mods = 0, set()
        for line in proc.stderr.splitlines():
            m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)", line)
            if m:
                total += int(m.group(1))
                mods.add(m.group(4))
        totals.append(total / 1000)
        count = len(mods)
        heavy = sorted(m for m in mods if m in NOTABLE)
    return statistics.median(totals), count, heavy


def interpreter_ms(runs: int = 20) -> float:
    out = []
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True, env=env)
        out.append(time.perf_counter() - t)
    return statistics.median(out) * 1000


def proxy_overhead_ms(server_url: str, proxy: FaultProxy, runs: int = 50) -> float:
    import urllib.request

    def median_get(url: str) -> float:
        out = []
        for _ in range(runs):
            t = time.perf_counter()
            with urllib.request.urlopen(url + "/v1/health/", timeout=10) as r:
                r.read()
            out.append(time.perf_counter() - t)
        return statistics.median(out) * 1000

    return median_get(proxy.url) - median_get(server_url)


# ---------------------------------------------------------------- main


def measure_home(label: str, base: Path, proxy: FaultProxy, agent_id: str, home: Path, args) -> tuple[dict, Bench]:
    b = Bench(base, proxy, agent_id, home)
    rows: dict[str, Row] = {}
    rows["ss"] = b.session_start(args.runs)
    # let the agent say something, so that the prompt hooks have a message to show the first time
    hook, worker = b.stop(args.runs)
    rows["stop"], rows["worker"] = hook, worker
    rows["ups"] = b.prompt(args.runs, "UserPromptSubmit (whisper)")
    rows["ups_full"] = b.prompt(args.runs, "UserPromptSubmit (full mode)", env={**b.env, "LETTA_MODE": "full"})
    rows["pre0"] = b.pre_tool(args.runs, "PreToolUse, TTL 0 (fetch every call)", "0", args.runs, 0)
    rows["pre"] = b.pre_tool(args.runs, f"PreToolUse, bursts of {args.burst} (TTL 5 s)", None, args.burst, 5.5)
    print(f"  measured: {label}", file=sys.stderr, flush=True)
    return rows, b


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20, help="runs per hook (at least 20)")
    ap.add_argument("--burst", type=int, default=10, help="PreToolUse calls per burst")
    ap.add_argument("--sessions", type=int, default=3000, help="session files in the large home")
    ap.add_argument("--conversations", type=int, default=5000, help="conversation entries in the large home")
    ap.add_argument("--hosts", type=int, default=3, help="hosts (shards) in the large home")
    ap.add_argument("--upstream", type=Path, metavar="PATH",
                    help="an upstream checkout (npm install done): ours and its hooks side by side (sidebyside.py)")
    args = ap.parse_args(argv)
    args.runs = max(args.runs, 20)

    from tests.harness.letta_server import LettaServer, start_server

    state = os.environ.get("SUBCONSCIOUS_LETTA_STATE")
    server = LettaServer.load(Path(state)) if state else start_server()
    proxy = FaultProxy(server.base_url).start()
    agent = import_agent(server.base_url)
    base = Path(tempfile.mkdtemp(prefix="hooks-bench-"))
    try:
        print(f"server {server.base_url} (letta 0.16.8, scripted model), agent {agent['id']}, {args.runs} runs each",
              file=sys.stderr, flush=True)
        if args.upstream is not None:
            from sidebyside import compare

            return compare(args.upstream.resolve(), server.base_url, proxy, agent["id"], args.runs, base, PYCACHE)
        small, b = measure_home("a fresh home", base / "small", proxy, agent["id"], base / "small" / "home", args)
        big_home = base / "big" / "home"
        t = time.perf_counter()
        build_large_home(big_home, args.conversations, args.sessions, args.hosts)
        built = time.perf_counter() - t
        big, _ = measure_home("a large home", base / "big", proxy, agent["id"], big_home, args)

        fresh_ttl = {**b.env, "SUBCONSCIOUS_FETCH_TTL": "3600"}
        b.run("pre-tool-use")
        imports = [
            ("SessionStart", import_profile(b, "session-start")),
            ("UserPromptSubmit (whisper)", import_profile(b, "user-prompt-submit")),
            ("PreToolUse (fetches)", import_profile(b, "pre-tool-use", env={**b.env, "SUBCONSCIOUS_FETCH_TTL": "0"})),
            ("PreToolUse (within the TTL)", import_profile(b, "pre-tool-use", env=fresh_ttl)),
            ("Stop", import_profile(b, "stop")),
        ]
        b.worker_idle()
        interp = interpreter_ms()
        overhead = proxy_overhead_ms(server.base_url, proxy)

        print()
        print(f"Hooks against the real Letta server: whole-process latency ({args.runs} runs, `python -m subconscious "
              f"hook <event>`), HTTP requests per run")
        print(f"large home: {args.conversations} conversations in the view and {args.hosts} shards, "
              f"{args.sessions} session files (built in {built:.1f} s)")
        print()
        head = f"{'hook':<40} {'fresh home ms':>17} {'large home ms':>17} {'requests':>9}"
        print(head)
        print(f"{'':<40} {'median':>8} {'p90':>8} {'median':>8} {'p90':>8} {'per run':>9}")
        print("-" * len(head))
        for key in ("ss", "ups", "ups_full", "pre0", "pre", "stop", "worker"):
            s, g = small[key], big[key]
            sm, sp, sr = s.cells()
            gm, gp, _ = g.cells()
            if key == "worker":
                sr = f"{statistics.mean(s.requests):.1f}*"
            print(f"{s.label:<40} {sm:>8} {sp:>8} {gm:>8} {gp:>8} {sr:>9}")
        print("-" * len(head))
        print("* the detached worker's requests, after the hook returned: the message stream, and on a session's")
        print("  first delivery one look in the conversation for lines already there. Worker time runs from the")
        print("  Stop hook's start until the cursor was saved (the agent's whole turn on the scripted model).")
        print(f"PreToolUse bursts: {args.burst} calls back to back, the next burst after the 5 s TTL ran out.")
        for key in ("ss", "ups", "ups_full", "pre0", "stop", "worker"):
            print(f"  {small[key].label + ':':<40} {', '.join(sorted(small[key].calls)) or 'no request'}")
        print(f"Interpreter alone (`python -c pass`): {interp:.0f} ms. The proxy adds {overhead:.1f} ms per request.")
        print()
        print(f"{'import time of a hook run (-X importtime)':<40} {'ms':>7} {'modules':>8}  notable modules imported")
        print("-" * 88)
        for label, (ms, count, heavy) in imports:
            print(f"{label:<40} {ms:7.0f} {count:8d}  {', '.join(heavy) or '-'}")
        print("(ms = sum of every module's own import time; the interpreter's start-up imports included)")
    finally:
        delete_agent(server.base_url, agent["id"])
        proxy.stop()
        if not state:
            server.stop()
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(PYCACHE, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
