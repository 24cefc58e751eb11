"""Served mode with both real programs: the real Claude Code CLI with hooks written by the real
``subconscious install --served``, the real ``subconscious serve`` answering PreToolUse and UserPromptSubmit
over http, the real Letta server behind it (SessionStart and Stop stay command hooks).

- the agent's message reaches the model through the served UserPromptSubmit, with the server started with
  only the Letta server's URL and key (never taken from a request): Claude Code's other settings (its home,
  mode) reach it in the hook headers;
- without the token in Claude Code's environment the server refuses, and the session goes on;
- server stopped, or wedged (accepts, never answers): the session completes with its answer, nothing on
  stderr, nothing of the failure in what the model sees. Through the bash client (``install --served``)
  Claude Code records every served hook as a success (nothing for its screen to show); as http hooks
  (``--http``) it records the failures its screen shows ("hook failed", "timed out");
- a stopped server is started again by the next SessionStart (a command hook), before its first prompt.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sysconfig
import threading
import time
import uuid
from pathlib import Path

import pytest

from subconscious.local.autostart import answering
from subconscious.state.store.core import Store
from tests.harness.claude_code import BASE_PATH, ClaudeRun
from tests.harness.hooks import conversation_messages
from tests.harness.letta_server import free_port
from tests.integration.test_e2e_claude_letta import context_after, is_prompt

# one xdist worker runs these modules one test at a time: a test here opens 120,000 listening sockets
# machine-wide, and the served client beside it would give up on its walk of /proc/net/tcp (tests/conftest.py)
XDIST_GROUP = "served-client"

pytestmark = [pytest.mark.claude, pytest.mark.letta]

SERVED = {"UserPromptSubmit", "PreToolUse"}
EXE = Path(sysconfig.get_path("scripts")) / "subconscious"


class Served:
    def __init__(self, sandbox, tmp: Path, letta_env: dict):
        assert EXE.exists(), f"no {EXE}: run `pip install -e .` first"
        self.sandbox, self.port = sandbox, free_port()
        self.local = tmp / "local"
        self.shared = tmp / "shared"
        self.server_env = {"PATH": BASE_PATH, "HOME": str(sandbox.home), "SUBCONSCIOUS_STATE_DIR": str(self.local),
                           **{k: v for k, v in letta_env.items() if k in ("LETTA_BASE_URL", "LETTA_API_KEY")}}
        self.token = self.cli("serve", "--print-token").stdout.strip()
        self.claude_env = {**letta_env, "LETTA_HOME": str(self.shared), "SUBCONSCIOUS_STATE_DIR": str(self.local),
                           "SUBCONSCIOUS_HOST": "laptop", "LETTA_MODE": "whisper", "SUBCONSCIOUS_FETCH_TTL": "0",
                           "SUBCONSCIOUS_SERVE_TOKEN": self.token}
        self.proc: subprocess.Popen | None = None

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        env = {**self.server_env, "CLAUDE_CONFIG_DIR": str(self.sandbox.config_dir)}
        p = subprocess.run([str(EXE), *args], capture_output=True, text=True, timeout=60, env=env)
        assert p.returncode == 0 and "Traceback" not in p.stdout + p.stderr, p.stdout + p.stderr
        return p

    def start(self) -> None:
        self.proc = subprocess.Popen([str(EXE), "serve", "--port", str(self.port), "--quiet"], env=self.server_env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                assert self.proc.poll() is None, self.proc.communicate()
                time.sleep(0.05)
        raise AssertionError("subconscious serve did not listen within 30 s")

    def stop(self) -> str:
        if self.proc is None:
            return ""
        self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=20)
        code, self.proc = self.proc.returncode, None
        assert code == 0, err.decode()
        return err.decode()

    def run(self, prompt: str, env: dict | None = None, **kw) -> ClaudeRun:
        run = self.sandbox.run(prompt, env={**self.claude_env, **(env or {})}, plugin_dirs=(),
                               path=self.sandbox.path_with_subconscious(), output_format="stream-json",
                               allowed_tools=("Read",), **kw)
        assert run.returncode == 0, run.describe()
        assert run.stderr.strip() == "" and "Traceback" not in run.stdout, run.describe()
        return run

    def stop_recorded(self) -> None:
        """Stop a server a hook started (by the pid it recorded), if one still runs: none outlives the test."""
        try:
            pid = json.loads((self.local / "serve" / "server.json").read_text())["pid"]
            os.kill(pid, signal.SIGTERM)
        except (OSError, ValueError, KeyError):
            pass

    def log(self) -> str:
        p = self.local / "logs" / "subconscious.log"
        return p.read_text() if p.exists() else ""


def hook_outcomes(run: ClaudeRun) -> dict[str, set]:
    out: dict[str, set] = {}
    for e in run.output:
        if isinstance(e, dict) and e.get("subtype") == "hook_response":
            out.setdefault(e["hook_event"], set()).add((e.get("outcome"), e.get("exit_code")))
    return out


def read_turn(served: Served, prompt: str, answer: str, **kw) -> ClaudeRun:
    target = served.sandbox.project_dir / "notes.txt"
    target.write_text("alpha\n")
    run = served.run(f"[[tool:Read {target}]] [[text:{answer}]] {prompt}", **kw)
    assert run.result == answer, run.describe()
    assert len(run.message_requests()) == 2  # the tool ran and the model got its result
    return run


def wait_for_agent_saying(base_url: str, conv: str, text: str, timeout: float = 90) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if any(m.get("message_type") == "assistant_message" and text in json.dumps(m.get("content"))
               for m in conversation_messages(base_url, conv)):
            return
        time.sleep(0.3)
    raise AssertionError(f"the agent never said {text!r}")


@pytest.mark.parametrize("transport", ["client", "http"])
def test_served_hooks_inject_the_agents_message_the_session_goes_on_without_the_server_and_it_comes_back(
        tmp_path, claude_sandbox, letta_server, letta_env, transport):
    served = Served(claude_sandbox, tmp_path, letta_env)
    try:
        check_served_mode(served, tmp_path, letta_server, http=transport == "http")
    finally:
        served.stop()
        served.stop_recorded()


def failures_shown(run: ClaudeRun) -> list[dict]:
    """What Claude Code records of a served hook that failed (its screen shows these as "hook failed" or
    "timed out" under the prompt or tool call)."""
    return [a for a in run.hook_attachments() if a.get("hookEvent") in SERVED
            and any(w in str(a.get("type")) for w in ("error", "cancelled", "fail"))]


def check_served_mode(served: Served, tmp_path: Path, letta_server, http: bool) -> None:
    claude_sandbox = served.sandbox
    settings = claude_sandbox.config_dir / "settings.json"
    p = served.cli("install", "--served", *(["--http"] if http else []), "--port", str(served.port),
                   "--settings", str(settings))
    assert f"served by http://127.0.0.1:{served.port}" in p.stdout, p.stdout
    hooks = json.loads(settings.read_text())["hooks"]
    kinds = {e for e, gs in hooks.items() for g in gs for h in g["hooks"]
             if (h["type"] == "http" if http else h.get("args", [None] * 3)[2:3] == ["subconscious-served"])}
    assert kinds == SERVED
    assert served.token not in settings.read_text()  # Claude Code's environment or the state dir has it
    ok = ("success", 200) if http else ("success", 0)
    served.start()
    try:
        # ---- turn 1: SessionStart (command) makes the conversation; Stop hands the turn to the agent,
        # whose fake model answers with exactly the SAY text
        note = f"served-note-{uuid.uuid4().hex[:8]}"
        run1 = read_turn(served, f"First turn.\nSAY {note}", "First answer.")
        sid = run1.session_id
        assert hook_outcomes(run1)["PreToolUse"] == {ok}, hook_outcomes(run1)
        store = Store(served.shared / ".letta" / "claude", "reader", tmp_path / "r-locks", tmp_path / "r-clocks",
                      read_only=True)
        conv = store.conversation(sid).conversation_id
        wait_for_agent_saying(letta_server.base_url, conv, note)

        # ---- turn 2: the served UserPromptSubmit brings the agent's message to the model
        run2 = read_turn(served, "Second turn.", "Second answer.", resume=sid)
        # (turn 1's prompt, in the history, holds the note too: look right after this turn's prompt)
        context = context_after(run2.message_requests()[0].body, is_prompt("Second turn."))
        assert note in context and "<letta_message" in context, context[-3000:]
        outcomes = hook_outcomes(run2)
        assert outcomes["UserPromptSubmit"] == {ok} and outcomes["PreToolUse"] == {ok}

        # ---- Claude Code without the right token: refused, the session goes on (the client reads the
        # token from the state dir when Claude Code has none: only a wrong one is refused)
        run3 = read_turn(served, "No token.", "Third answer.", resume=sid,
                         env={"SUBCONSCIOUS_SERVE_TOKEN": "" if http else "0" * 43})
        assert hook_outcomes(run3)["PreToolUse"] == ({("error", 401)} if http else {ok})
        assert "refused a request" in served.log()
    finally:
        served.stop()

    # ---- server stopped (and served mode's restart off): connection refused, a non-blocking error (claude -p
    # keeps it to itself)
    marker = served.local / "serve" / "enabled.json"
    kept = marker.read_bytes()
    marker.unlink()
    run4 = read_turn(served, "Server stopped.", "Fourth answer.", resume=sid)
    assert {o for o, _ in hook_outcomes(run4)["PreToolUse"]} == ({"error"} if http else {"success"})
    assert hook_outcomes(run4)["Stop"] == {("success", 0)}  # the command hooks are unaffected
    for r in (run3, run4):
        assert not any(w in r.bodies_text() for w in ("ECONNREFUSED", "HTTP 401", "hook error")), r.bodies_text()[-2000:]
    # ---- served mode on again: the next SessionStart finds nothing on the port and starts the server, with
    # Claude Code's environment, before the session's first prompt
    marker.write_bytes(kept)
    record = served.local / "serve" / "server.json"
    run5 = read_turn(served, "Served again.", "Fifth answer.", resume=sid)
    restarted = json.loads(record.read_text())["pid"]
    try:
        outcomes = hook_outcomes(run5)
        assert outcomes["UserPromptSubmit"] == outcomes["PreToolUse"] == {ok}, outcomes
    finally:
        os.kill(restarted, signal.SIGTERM)  # the server the Stop hook started (its pid, as it recorded it)
        end = time.monotonic() + 20
        while answering(served.port) and time.monotonic() < end:
            time.sleep(0.05)
    marker.unlink()  # served mode's restart off: the wedge below keeps the port

    # ---- server wedged: it accepts and never answers; Claude Code cancels each hook at its timeout
    held: list[socket.socket] = []
    wedge = socket.socket()
    wedge.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    wedge.bind(("127.0.0.1", served.port))
    wedge.listen(16)
    def hold_every_connection() -> None:
        try:
            while True:
                held.append(wedge.accept()[0])
        except OSError:  # the wedge is closed: the test is done with it
            pass

    threading.Thread(target=hold_every_connection, daemon=True).start()
    try:
        run6 = read_turn(served, "Server wedged.", "Sixth answer.", resume=sid)
    finally:
        wedge.close()
        for s in held:
            s.close()
    outcomes = hook_outcomes(run6)
    assert held, "Claude Code never connected to the wedged server"
    if http:  # Claude Code cancels each at its timeout, and says so
        assert outcomes["UserPromptSubmit"] == {("cancelled", None)} and outcomes["PreToolUse"] == {("cancelled", None)}
        cancelled = [a for a in run6.hook_attachments() if a.get("type") == "hook_cancelled"]
        assert {a["hookEvent"] for a in cancelled} == SERVED and all(a.get("timedOut") for a in cancelled), cancelled
        assert failures_shown(run3) and failures_shown(run4)
    else:  # the client gave up first (4 s, 9 s): a hook with nothing to say, as when it works
        assert outcomes["UserPromptSubmit"] == outcomes["PreToolUse"] == {ok}, outcomes
        for r in (run1, run2, run3, run4, run5, run6):
            assert failures_shown(r) == [], failures_shown(r)
    print(f"\nserved e2e ({'http' if http else 'client'}): wedged turn took {run6.seconds:.1f} s; stopped "
          f"{run4.seconds:.1f} s; served {run2.seconds:.1f} s")
