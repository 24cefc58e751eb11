"""Served mode vs command hooks, measured through the real Claude Code CLI: how long Claude Code waits for
our UserPromptSubmit and PreToolUse hooks, per mode, paired run by run.

    python benchmarks/served_bench.py [--runs 15]

Starts (or reuses, with SUBCONSCIOUS_LETTA_STATE) the real Letta server of the test harness, the real CLI
(tests/harness/claude_code.py) against the fake Anthropic API, and the pip-installed ``subconscious``. One
session is made by a real SessionStart; then each run resumes it with one prompt and one Read tool call, in
four settings files written by ``subconscious install``: **none** (neither hook: the floor), **command**
(``install``: the shell-form command hooks), **client** (``install --served``: the bash client, a command
hook, talking to ``subconscious serve``) and **http** (``install --served --http``: Claude Code's http hooks to
the same server).
Modes take turns within each run, so drift hits them alike. Only the two hooks are kept in the settings
(no Stop: no worker competes for the CPU).

Figures, medians (p90) in ms:
- *hook wait*: Claude Code's own timing from its debug log (``--debug hooks``): a command hook's
  "finished ... (N ms)", an http hook's POST → response lines;
- *tool gap*: the fake API's clock from the request answered with the tool_use to the next request (the
  model's stream, the PreToolUse hook, the Read, the next request), minus the same gap without our hooks.
PreToolUse is measured inside the fetch TTL (UserPromptSubmit fetched just before: no request) and with
SUBCONSCIOUS_FETCH_TTL=0 (one request to Letta each).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.harness.claude_code import BASE_PATH, ClaudeSandbox, ensure_claude_code  # noqa: E402
from tests.harness.fake_anthropic import FakeAnthropic  # noqa: E402

EXE = Path(sysconfig.get_path("scripts")) / "subconscious"
CMD_LINE = re.compile(r"Hooks: (UserPromptSubmit|PreToolUse)(?::\w+)? \[.*\] finished with status \d+ \((\d+)ms\)")
HTTP_POST = re.compile(r"^(\S+) .*HTTP hook POST to \S+/subconscious/hook/(user-prompt-submit|pre-tool-use)")
HTTP_DONE = re.compile(r"^(\S+) .*HTTP hook response status")
EVENT = {"user-prompt-submit": "UserPromptSubmit", "pre-tool-use": "PreToolUse"}
MODES = ("none", "command", "client", "http")


def stamp(text: str) -> float:
    return time.mktime(time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S")) + float("0" + text[19:23])


def hook_waits(debug_log: Path) -> dict[str, float]:
    """{event: ms Claude Code waited} from one run's debug log."""
    out: dict[str, float] = {}
    pending: tuple[str, float] | None = None
    for line in debug_log.read_text(errors="replace").splitlines():
        m = CMD_LINE.search(line)
        if m:
            out[m.group(1)] = float(m.group(2))
            continue
        m = HTTP_POST.search(line)
        if m:
            pending = (EVENT[m.group(2)], stamp(m.group(1)))
            continue
        m = HTTP_DONE.search(line)
        if m and pending:
            out[pending[0]] = (stamp(m.group(1)) - pending[1]) * 1000
            pending = None
    return out


def subconscious(env: dict, *args: str) -> str:
    p = subprocess.run([str(EXE), *args], capture_output=True, text=True, timeout=60, env=env)
    if p.returncode != 0:
        raise SystemExit(f"subconscious {' '.join(args)} failed: {p.stdout}{p.stderr}")
    return p.stdout


def only(settings_file: Path, events: set[str]) -> None:
    data = json.loads(settings_file.read_text())
    data["hooks"] = {e: g for e, g in data.get("hooks", {}).items() if e in events}
    settings_file.write_text(json.dumps(data, indent=2))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def summary(values: list[float]) -> str:
    if not values:
        return "—"
    values = sorted(values)
    p90 = values[min(len(values) - 1, int(round(0.9 * (len(values) - 1))))]
    return f"{statistics.median(values):.0f} ({p90:.0f})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=15, help="runs per mode and TTL (paired)")
    args = ap.parse_args(argv)
    if not EXE.exists():
        raise SystemExit(f"no {EXE}: pip install -e . first")
    from tests.harness.letta_server import LettaServer, start_server

    state = os.environ.get("SUBCONSCIOUS_LETTA_STATE")
    letta = LettaServer.load(Path(state)) if state else start_server()
    serve = None
    try:
        with FakeAnthropic() as fake, tempfile.TemporaryDirectory(prefix="served-bench-") as tmp:
            tmp = Path(tmp)
            sandbox = ClaudeSandbox(tmp / "claude", ensure_claude_code(), fake, plugin_dirs=())
            local, port = tmp / "local", free_port()
            server_env = {"PATH": BASE_PATH, "HOME": str(sandbox.home), "SUBCONSCIOUS_STATE_DIR": str(local),
                          "CLAUDE_CONFIG_DIR": str(sandbox.config_dir)}
            token = subconscious(server_env, "serve", "--print-token").strip()
            env = {"LETTA_BASE_URL": letta.base_url, "LETTA_API_KEY": "bench", "LETTA_HOME": str(tmp / "shared"),
                   "SUBCONSCIOUS_STATE_DIR": str(local), "SUBCONSCIOUS_HOST": "bench", "LETTA_MODE": "whisper",
                   "SUBCONSCIOUS_SERVE_TOKEN": token, "LETTA_MODEL": "openai-proxy/fake-model"}
            path = sandbox.path_with_subconscious()
            files = {m: tmp / f"settings-{m}.json" for m in MODES}
            subconscious(server_env, "install", "--settings", str(files["command"]))
            subconscious(server_env, "install", "--served", "--port", str(port), "--settings", str(files["client"]))
            subconscious(server_env, "install", "--served", "--http", "--port", str(port), "--settings",
                         str(files["http"]))
            files["none"].write_text("{}")
            start_file = tmp / "settings-start.json"
            subconscious(server_env, "install", "--settings", str(start_file))
            only(start_file, {"SessionStart"})
            for m in MODES[1:]:
                only(files[m], {"UserPromptSubmit", "PreToolUse"})
            serve = subprocess.Popen([str(EXE), "serve", "--port", str(port), "--quiet"],  # the Letta server and
                                     env={**{k: v for k, v in server_env.items() if k != "CLAUDE_CONFIG_DIR"},  # key:
                                          "LETTA_BASE_URL": letta.base_url, "LETTA_API_KEY": "bench"},  # its own
                                     start_new_session=True)
            target = sandbox.project_dir / "notes.txt"
            target.write_text("alpha\n")
            prompt = f"[[tool:Read {target}]] [[text:ok]] read it"

            def turn(settings: Path, resume: str | None, ttl: str, debug: Path):
                run = sandbox.run(prompt, env={**env, "SUBCONSCIOUS_FETCH_TTL": ttl}, path=path, resume=resume,
                                  allowed_tools=("Read",), plugin_dirs=(),
                                  extra_args=("--settings", str(settings), "--debug", "hooks", "--debug-file",
                                              str(debug)))
                if run.returncode != 0 or run.result != "ok":
                    raise SystemExit("claude -p failed:\n" + run.describe())
                reqs = run.message_requests()
                return run, (reqs[1].ts - reqs[0].ts) * 1000

            first, _ = turn(start_file, None, "5", tmp / "debug-start.log")
            sid = first.session_id
            time.sleep(1.0)  # serve is up
            results: dict[tuple[str, str], dict[str, list[float]]] = {}
            for i in range(args.runs + 1):  # the first round warms caches and is not counted
                for ttl in ("5", "0"):
                    for mode in MODES:
                        debug = tmp / f"debug-{mode}-{ttl}-{i}.log"
                        _, gap = turn(files[mode], sid, ttl, debug)
                        if i == 0:
                            continue
                        r = results.setdefault((mode, ttl), {"UserPromptSubmit": [], "PreToolUse": [], "gap": []})
                        for ev, ms in hook_waits(debug).items():
                            r[ev].append(ms)
                        r["gap"].append(gap)
            print(f"Claude Code {sandbox.claude.version}, {args.runs} paired runs per row, medians (p90) in ms; "
                  "Letta: the test harness's real server on 127.0.0.1")
            print(f"{'mode':<10}{'PreToolUse TTL':<16}{'UserPromptSubmit wait':>24}{'PreToolUse wait':>18}"
                  f"{'tool gap - none':>18}")
            floors = []
            for ttl, label in (("5", "in TTL"), ("0", "fetches")):
                floor = statistics.median(results[("none", ttl)]["gap"])
                floors.append(f"{floor:.0f}")
                for mode in MODES[1:]:
                    r = results[(mode, ttl)]
                    extra = [g - floor for g in r["gap"]]
                    print(f"{mode:<10}{label:<16}{summary(r['UserPromptSubmit']):>24}{summary(r['PreToolUse']):>18}"
                          f"{summary(extra):>18}")
            print(f"(tool gap without our hooks: {' / '.join(floors)} ms median, in TTL / fetches)")
    finally:
        if serve is not None:
            serve.send_signal(signal.SIGTERM)
            serve.wait(timeout=20)
        if not state:
            letta.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
