"""The served-mode bash client alone, as a process: this checkout's client (listener uid check before and after
the connect, watchdog, bounded stdin, the recorded port) against a baseline revision's, paired run by run,
against the same real ``subconscious serve`` (LETTA_MODE=off per request: the server answers at once, so the
figure is the client's own cost: bash start, the checks, one local round trip).

    python benchmarks/served_client_bench.py [--runs 200] [--baseline 57b0b2c] [--sockets 300] [--body-kb 8]

``--sockets N`` opens N extra loopback connections first (a busy workstation: the client reads /proc/net/tcp,
one line per socket, twice). Prints medians and p90 in ms and the median of the paired ratios new/baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from subconscious.served import CLIENT_STDIN_LIMIT, client_script  # noqa: E402
from subconscious.local.settingsfile import ENV_HEADER, FORWARDED_VARS, TOKEN_HEADER, TOKEN_VAR  # noqa: E402


def baseline_script(rev: str) -> str:
    text = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:subconscious/served/client.bash"],
                          capture_output=True, text=True, check=True).stdout
    text = "".join(line for line in text.splitlines(keepends=True) if not line.lstrip().startswith("#"))
    for name, value in (("TOKEN_HEADER", TOKEN_HEADER), ("TOKEN_VAR", TOKEN_VAR), ("ENV_HEADER", ENV_HEADER),
                        ("FORWARDED_VARS", " ".join(FORWARDED_VARS)), ("STDIN_LIMIT_PLUS_1", str(CLIENT_STDIN_LIMIT + 1)),
                        ("STDIN_LIMIT", str(CLIENT_STDIN_LIMIT))):
        text = text.replace(f"@{name}@", value)
    return text


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--baseline", default="57b0b2c", help="git revision of the baseline client")
    ap.add_argument("--sockets", type=int, default=0, help="extra loopback connections held open during the runs")
    ap.add_argument("--body-kb", type=int, default=0, help="a tool input of about this many KiB (an Edit's strings)")
    args = ap.parse_args(argv)
    scripts = {"baseline": baseline_script(args.baseline), "new": client_script()}
    with tempfile.TemporaryDirectory(prefix="served-client-bench-") as tmp:
        tmp = Path(tmp)
        local, port = tmp / "local", free_port()
        env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp), "SUBCONSCIOUS_STATE_DIR": str(local),
               "PYTHONPATH": str(ROOT)}
        serve = subprocess.Popen([sys.executable, "-m", "subconscious", "serve", "--port", str(port), "--quiet"],
                                 env=env, start_new_session=True)
        held: list[socket.socket] = []
        try:
            end = time.monotonic() + 30
            while not (local / "serve" / "server.json").exists():
                if time.monotonic() > end or serve.poll() is not None:
                    raise SystemExit("subconscious serve did not start")
                time.sleep(0.05)
            if args.sockets:
                sink = socket.socket()
                sink.bind(("127.0.0.1", 0))
                sink.listen(args.sockets + 8)
                held.append(sink)
                for _ in range(args.sockets):
                    held.append(socket.create_connection(sink.getsockname()))
                    held.append(sink.accept()[0])
            body = json.dumps({"session_id": "bench", "hook_event_name": "PreToolUse", "tool_name": "Read",
                               "tool_input": {"file_path": "/etc/hostname", "old_string": "a" * (args.body_kb * 512),
                                              "new_string": "b" * (args.body_kb * 512)}}).encode()
            client_env = {**env, "LETTA_MODE": "off"}
            lines = Path("/proc/net/tcp").read_text().count("\n") if Path("/proc/net/tcp").exists() else 0
            times: dict[str, list[float]] = {k: [] for k in scripts}
            for i in range(args.runs + 5):
                for name in (("baseline", "new") if i % 2 else ("new", "baseline")):
                    t = time.perf_counter()
                    p = subprocess.run(["/bin/bash", "-c", scripts[name], "subconscious-served", "pre-tool-use",
                                        str(port)], input=body, capture_output=True, env=client_env, timeout=30)
                    took = (time.perf_counter() - t) * 1000
                    if p.returncode != 0 or p.stderr:
                        raise SystemExit(f"{name} client failed: {p.returncode} {p.stderr!r}")
                    if i >= 5:  # warm-up
                        times[name].append(took)
        finally:
            serve.terminate()
            serve.wait(timeout=20)
            for s in held:
                s.close()
    print(f"served client, PreToolUse of {len(body)} bytes, {args.runs} paired runs, /proc/net/tcp ~{lines} lines")
    for name, values in times.items():
        values = sorted(values)
        print(f"  {name:9s} median {statistics.median(values):6.2f} ms  p90 {values[int(0.9 * (len(values) - 1))]:6.2f} ms")
    ratios = [n / b for n, b in zip(times["new"], times["baseline"])]
    print(f"  new / baseline: median of paired ratios {statistics.median(ratios):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
