"""Our hooks and upstream's (the TypeScript plugin) side by side, against one real Letta server.

    python benchmarks/hooks_bench.py --upstream /path/to/claude-subconscious [--runs 20]

Each hook is started the way its plugin's hooks/hooks.json starts it, read from the file each run (the
exec form ``command`` + ``args`` as a process, a string ``command`` through ``/bin/sh -c``), with
``CLAUDE_PLUGIN_ROOT`` set; the hooks one event lists run together, as Claude Code runs them. Ours runs
from a virtual environment like a user's install (``pipx install``): our dependencies, this checkout on
its path, the console script pip writes; that venv is built once under the test cache.

Runs are paired: each iteration runs ours and upstream's back to back, alternating which goes first, so
a busy machine slows both alike; medians and p90 over the iterations, the ratio of the medians. Peak
memory is ``ru_maxrss`` from ``wait4`` (the largest process of the hook's tree: the launcher, the
interpreter and whatever they waited for), taken by GNU time (``/usr/bin/time``) as the hook's parent:
a child forked from this large benchmark process would count its pages until the exec. Requests are counted at the proxy between the hooks and the
server, while the hook's processes run. Prints numbers; asserts nothing.
"""

from __future__ import annotations

import hashlib
import json
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

# The peak RSS of a process started from this (large) benchmark process counts this process's pages too: a
# forked child's memory before its exec is counted by ru_maxrss. GNU time, a small process, starts the hook.
TIME = shutil.which("time", path="/usr/bin:/bin")
EVENTS = {"session-start": "SessionStart", "user-prompt-submit": "UserPromptSubmit", "pre-tool-use": "PreToolUse",
          "stop": "Stop"}
SCRIPT = """#!{python}
# -*- coding: utf-8 -*-
import re
import sys
from subconscious.cli import main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(main())
"""  # what pip writes for [project.scripts] subconscious = "subconscious.cli:main"


# ---------------------------------------------------------------- our install


def dependencies() -> list[str]:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]


def ensure_venv() -> Path:
    """A venv with our dependencies, this checkout on its path (a .pth line, so edits count at once) and
    pip's console script; returns its bin directory."""
    from tests.harness.letta_server import cache_root

    deps = dependencies()
    key = hashlib.sha256(json.dumps([sys.version, deps]).encode()).hexdigest()[:12]
    venv = cache_root() / f"bench-venv-{key}"
    python = venv / "bin" / "python"
    if not (venv / ".ready").exists():
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *deps], check=True)
        (venv / ".ready").write_text("\n".join(deps) + "\n")
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    Path(purelib, "subconscious-checkout.pth").write_text(str(ROOT) + "\n")
    script = venv / "bin" / "subconscious"
    script.write_text(SCRIPT.format(python=python))
    script.chmod(0o755)
    return venv / "bin"


# ---------------------------------------------------------------- starting hooks as hooks.json says


def hook_argvs(plugin_root: Path, event: str) -> list[list[str]]:
    """The processes Claude Code starts for ``event`` (every command hook of every matching group)."""
    groups = json.loads((plugin_root / "hooks" / "hooks.json").read_text())["hooks"].get(EVENTS[event], [])
    out = []
    for group in groups:
        if group.get("matcher", "*") not in ("*", "", "Read"):
            continue
        for hook in group.get("hooks", []):
            if hook.get("type") != "command":
                continue
            if "args" in hook:  # exec form: no shell; Claude Code expands ${CLAUDE_PLUGIN_ROOT} itself
                expand = lambda s: s.replace("${CLAUDE_PLUGIN_ROOT}", str(plugin_root))  # noqa: E731
                out.append([expand(hook["command"]), *map(expand, hook["args"])])
            else:
                out.append(["/bin/sh", "-c", hook["command"]])
    if not out:
        raise SystemExit(f"{plugin_root}/hooks/hooks.json has no command hook for {EVENTS[event]}")
    return out


@dataclass
class Run:
    seconds: float
    maxrss_kb: int
    requests: list
    stdout: str
    stderr: str


def run_hooks(argvs: list[list[str]], data: dict, env: dict, cwd: Path, proxy) -> Run:
    """Start the hook processes with ``data`` on stdin, wait for all of them (os.wait4: their peak RSS)."""
    with tempfile.TemporaryDirectory(prefix="hookio-") as io_dir:
        src = Path(io_dir, "in.json")
        src.write_text(json.dumps(data))
        procs, files = [], []
        before = len(proxy.requests)
        t0 = time.perf_counter()
        for i, argv in enumerate(argvs):
            fin, fout, ferr = open(src, "rb"), open(Path(io_dir, f"{i}.out"), "wb"), open(Path(io_dir, f"{i}.err"), "wb")
            files += [fin, fout, ferr]
            if TIME:  # GNU time forks the hook from its own small process and reports its wait4 ru_maxrss
                argv = [TIME, "-q", "-f", "%M", "-o", str(Path(io_dir, f"{i}.rss")), *argv]
            procs.append(subprocess.Popen(argv, stdin=fin, stdout=fout, stderr=ferr, env=env, cwd=str(cwd)))
        peak = 0
        for i, p in enumerate(procs):
            _, status, usage = os.wait4(p.pid, 0)
            p.returncode = os.waitstatus_to_exitcode(status)
            peak = max(peak, int(Path(io_dir, f"{i}.rss").read_text().split()[-1]) if TIME else usage.ru_maxrss)
        seconds = time.perf_counter() - t0
        requests = proxy.requests[before:]
        for f in files:
            f.close()
        out = "".join(Path(io_dir, f"{i}.out").read_text(errors="replace") for i in range(len(argvs)))
        err = "".join(Path(io_dir, f"{i}.err").read_text(errors="replace") for i in range(len(argvs)))
    bad = [p.returncode for p in procs if p.returncode != 0]
    if bad:
        raise SystemExit(f"a hook exited {bad}: {argvs}\n{out}\n{err[-3000:]}")
    return Run(seconds, peak, requests, out, err)


# ---------------------------------------------------------------- one plugin's side


class Side:
    def __init__(self, name: str, plugin_root: Path, base: Path, env: dict):
        self.name, self.root, self.base = name, plugin_root, base
        self.project = base / "project"
        self.project.mkdir(parents=True, exist_ok=True)
        self.env = {**env, "CLAUDE_PLUGIN_ROOT": str(plugin_root), "CLAUDE_PROJECT_DIR": str(self.project)}
        self.sid = ""

    def data(self, event: str) -> dict:
        from tests.harness.transcripts import Transcript

        tp = self.base / "transcripts" / f"{self.sid}.jsonl"
        if not tp.exists():
            Transcript(tp, self.sid, str(self.project)).user("hello").assistant("Hi.")
        extra = {"session-start": {"hook_event_name": "SessionStart", "source": "startup"},
                 "user-prompt-submit": {"hook_event_name": "UserPromptSubmit", "prompt": "go on"},
                 "pre-tool-use": {"hook_event_name": "PreToolUse", "tool_name": "Read",
                                  "tool_input": {"file_path": "/etc/hostname"}, "tool_use_id": "toolu_1"},
                 "stop": {"hook_event_name": "Stop", "stop_hook_active": False}}[event]
        return {"session_id": self.sid, "transcript_path": str(tp), "cwd": str(self.project), **extra}

    def grow_transcript(self, i: int) -> None:
        from tests.harness.transcripts import Transcript

        Transcript(self.base / "transcripts" / f"{self.sid}.jsonl", self.sid, str(self.project)).user(
            f"benchmark turn {i}: please look at the parser").assistant("Looking.")

    def run(self, event: str, proxy, env: dict | None = None) -> Run:
        return run_hooks(hook_argvs(self.root, event), self.data(event), {**self.env, **(env or {})}, self.project,
                         proxy)


def settle(proxy, quiet: float = 2.0, limit: float = 60.0) -> None:
    """Until no request is open and none reached the server for ``quiet`` seconds (detached workers done, the
    server idle: upstream's node worker takes over a second to send its first request, and an agent's turn
    streams for seconds; either ran into the next paired hook)."""
    deadline = time.monotonic() + limit
    seen, since = len(proxy.requests), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        busy = any(r.ms == 0.0 for r in proxy.requests[-50:])  # a request still open (an agent's turn streaming)
        if len(proxy.requests) != seen or busy:
            seen, since = len(proxy.requests), time.monotonic()
        elif time.monotonic() - since >= quiet:
            return


@dataclass
class Pair:
    label: str
    ours: list[Run] = field(default_factory=list)
    theirs: list[Run] = field(default_factory=list)


def median_ms(runs: list[Run]) -> float:
    return statistics.median(r.seconds for r in runs) * 1000


def p90_ms(runs: list[Run]) -> float:
    s = sorted(r.seconds for r in runs)
    return s[max(0, -(-9 * len(s) // 10) - 1)] * 1000


def peak_mib(runs: list[Run]) -> float:
    return statistics.median(r.maxrss_kb for r in runs) / 1024


def mean_requests(runs: list[Run]) -> float:
    return statistics.mean(len(r.requests) for r in runs)


# ---------------------------------------------------------------- import times


_IMPORT = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def import_table(side: Side, proxy, paths: list[tuple[str, str, dict]], runs: int = 5) -> list[tuple]:
    """Per hook path: (label, median ms of all imports, modules, the heaviest top-level imports)."""
    rows = []
    for label, event, env in paths:
        totals, tops = [], {}
        count = 0
        for _ in range(runs):
            r = side.run(event, proxy, env={**env, "PYTHONPROFILEIMPORTTIME": "1"})
            total, mods = 0, set()
            for line in r.stderr.splitlines():
                m = _IMPORT.match(line)
                if not m:
                    continue
                total += int(m.group(1))
                mods.add(m.group(4))
                if len(m.group(3)) == 1 and not m.group(4).startswith(("encodings", "_")):
                    tops.setdefault(m.group(4), []).append(int(m.group(2)))
            totals.append(total / 1000)
            count = len(mods)
        heavy = sorted(((statistics.median(v) / 1000, k) for k, v in tops.items()), reverse=True)[:5]
        rows.append((label, statistics.median(totals), count, heavy))
    return rows


def floor_ms(argv: list[str], env: dict, runs: int = 20) -> float:
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
        out.append(time.perf_counter() - t)
    return statistics.median(out) * 1000


# ---------------------------------------------------------------- the comparison


def compare(upstream: Path, server_url: str, proxy, agent_id: str, runs: int, base: Path, pycache: Path) -> int:
    from tests.harness.letta_fixtures import FAKE_MODEL_HANDLE

    if not (upstream / "node_modules").is_dir():
        raise SystemExit(f"{upstream} has no node_modules: run `npm install` there first")
    bindir = ensure_venv()
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "CLAUDE", "PYTHON", "VIRTUAL_ENV"))}
    common = {**clean, "LETTA_BASE_URL": proxy.url, "LETTA_API_KEY": "bench-key-not-checked",
              "LETTA_MODEL": FAKE_MODEL_HANDLE, "LETTA_AGENT_ID": agent_id, "LETTA_MODE": "whisper"}
    ours_env = {**common, "PATH": f"{bindir}:/usr/local/bin:/usr/bin:/bin", "HOME": str(base / "ours" / "user"),
                "LETTA_HOME": str(base / "ours" / "home"), "SUBCONSCIOUS_STATE_DIR": str(base / "ours" / "local"),
                "SUBCONSCIOUS_HOST": "bench", "PYTHONPYCACHEPREFIX": str(pycache)}
    theirs_env = {**common, "HOME": str(base / "upstream" / "user"), "LETTA_HOME": str(base / "upstream" / "home"),
                  "TMPDIR": str(base / "upstream" / "tmp")}
    for d in ("ours/user", "upstream/user", "upstream/tmp"):
        (base / d).mkdir(parents=True, exist_ok=True)
    ours = Side("ours", ROOT, base / "ours", ours_env)
    theirs = Side("upstream", upstream, base / "upstream", theirs_env)

    def paired(pair: Pair, event: str, i: int, ours_env: dict | None = None, before=None, after=None) -> None:
        for side in ((ours, theirs) if i % 2 == 0 else (theirs, ours)):
            if before:
                before(side)
            r = side.run(event, proxy, env=ours_env if side is ours else None)
            (pair.ours if side is ours else pair.theirs).append(r)
            if after:
                after(side)

    def new_session(side: Side) -> None:
        side.sid = str(uuid.uuid4())

    pairs = {k: Pair(label) for k, label in (
        ("ss", "SessionStart (new session)"), ("stop", "Stop (hands over to its worker)"),
        ("ups", "UserPromptSubmit (whisper)"), ("pre0", "PreToolUse that fetches (TTL 0)"),
        ("pre", "PreToolUse within the fetch TTL"))}
    print(f"side by side: {runs} paired runs per hook against {server_url}", file=sys.stderr, flush=True)
    for i in range(runs):
        paired(pairs["ss"], "session-start", i, before=new_session, after=lambda s: settle(proxy))
        paired(pairs["stop"], "stop", i, before=lambda s: s.grow_transcript(i), after=lambda s: settle(proxy))
    for i in range(runs):
        paired(pairs["ups"], "user-prompt-submit", i)
    for i in range(runs):
        paired(pairs["pre0"], "pre-tool-use", i, ours_env={"SUBCONSCIOUS_FETCH_TTL": "0"})
    ours.run("pre-tool-use", proxy, env={"SUBCONSCIOUS_FETCH_TTL": "0"})  # the fetch the TTL then counts from
    for i in range(runs):
        paired(pairs["pre"], "pre-tool-use", i, ours_env={"SUBCONSCIOUS_FETCH_TTL": "3600"})

    imports = import_table(ours, proxy, [
        ("SessionStart", "session-start", {}), ("UserPromptSubmit (whisper)", "user-prompt-submit", {}),
        ("PreToolUse that fetches (TTL 0)", "pre-tool-use", {"SUBCONSCIOUS_FETCH_TTL": "0"}),
        ("PreToolUse within the TTL", "pre-tool-use", {"SUBCONSCIOUS_FETCH_TTL": "3600"}),
        ("Stop", "stop", {})])
    settle(proxy)
    py_floor = floor_ms([str(bindir / "python"), "-c", "pass"], {**ours_env})
    node_floor = floor_ms(["node", "-e", "0"], theirs_env)

    print()
    print(f"Ours vs upstream ({upstream}), each started as its hooks/hooks.json says; {runs} paired runs, "
          "medians")
    head = (f"{'hook':<34} {'ours ms':>8} {'p90':>6} {'upstream':>9} {'p90':>6} {'ratio':>6} "
            f"{'ours MiB':>9} {'up MiB':>7} {'mem':>5} {'requests ours/up':>17}")
    print(head)
    print("-" * len(head))
    for p in pairs.values():
        mo, mt = median_ms(p.ours), median_ms(p.theirs)
        ro, rt = peak_mib(p.ours), peak_mib(p.theirs)
        print(f"{p.label:<34} {mo:8.0f} {p90_ms(p.ours):6.0f} {mt:9.0f} {p90_ms(p.theirs):6.0f} {mt / mo:5.1f}x "
              f"{ro:9.1f} {rt:7.1f} {ro / rt:5.2f} {mean_requests(p.ours):8.2f}/{mean_requests(p.theirs):.2f}")
    print("-" * len(head))
    print(f"floor: `python -c pass` in our venv {py_floor:.0f} ms, `node -e 0` {node_floor:.0f} ms; ratio = "
          "upstream median / ours; mem = ours / upstream peak RSS (median of the runs)")
    print("upstream has no fetch TTL: its PreToolUse fetches on every call, so both PreToolUse rows compare "
          "against the same upstream hook")
    print()
    print(f"{'our import time per hook path':<34} {'ms':>6} {'modules':>8}  heaviest top-level imports (ms)")
    print("-" * 100)
    for label, ms, count, heavy in imports:
        print(f"{label:<34} {ms:6.1f} {count:8d}  " + ", ".join(f"{k} {v:.1f}" for v, k in heavy))
    print("(PYTHONPROFILEIMPORTTIME=1 on the hook as hooks.json starts it; ms = sum of each module's own time, "
          "the interpreter's start-up imports included; medians of 5)")
    return 0
