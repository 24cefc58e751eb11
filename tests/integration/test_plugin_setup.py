"""A new user's path with the real Claude Code CLI: `claude plugin marketplace add` + `claude plugin install`
on a clean HOME and a PATH without `subconscious`, then sessions. The plugin sets up its own install
(hooks/setup: the machine's python3 -m venv + pip) in the background, and a later session talks to the
real Letta server through it.

pip installs the dependencies from a wheelhouse (PIP_FIND_LINKS + PIP_NO_INDEX, the variables reach the
detached set-up through Claude Code's environment), downloaded once into the test cache: the test stays
fast and works offline once the cache is there.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from tests.harness.claude_code import REPO_ROOT, ClaudeRun, cache_root
from tests.harness.hooks import conversation_messages, times_said, user_texts
from tests.integration.test_e2e_claude_letta import Machine, agent_said_memory_insert, context_after, is_prompt  # noqa: F401

pytestmark = [pytest.mark.claude, pytest.mark.letta]


def wheelhouse() -> Path:
    """Wheels of the package's dependencies and build backend, for this interpreter's Python version."""
    key = hashlib.sha256((REPO_ROOT / "pyproject.toml").read_bytes() + sys.version.encode()).hexdigest()[:12]
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    wh = root / ("plugin-wheelhouse-" + key)
    with open(root / (".plugin-wheelhouse-%s.lock" % key), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (wh / ".complete").exists():
            shutil.rmtree(wh, ignore_errors=True)
            p = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "-d", str(wh), "setuptools>=68",
                                str(REPO_ROOT)], capture_output=True, text=True, timeout=600)
            assert p.returncode == 0, "pip download failed:\n" + p.stderr[-3000:]
            (wh / ".complete").write_text("")
    return wh


def marketplace_copy(dest: Path) -> Path:
    """This repo as a user would get it: its tracked files, as they are in the working tree."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split("\0")):
        src = REPO_ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def hook_response(run: ClaudeRun, event: str) -> dict:
    (r,) = [e for e in run.output if isinstance(e, dict) and e.get("subtype") == "hook_response"
            and e.get("hook_event") == event]
    return r


def test_marketplace_install_sets_itself_up_in_the_background_then_works(tmp_path, claude_sandbox, letta_server,
                                                                          letta_env, agents_to_delete):
    sb = claude_sandbox
    path = sb.base_env()["PATH"]
    assert shutil.which("subconscious", path=path) is None, "precondition: no subconscious on this PATH"
    assert not (sb.home / ".local" / "bin" / "subconscious").exists()
    wh = wheelhouse()
    tag = uuid.uuid4().hex[:8]
    machine = Machine(sb, tmp_path, "laptop", letta_env)
    machine.path = path
    machine.env.update({"PIP_FIND_LINKS": str(wh), "PIP_NO_INDEX": "1"})
    times: dict[str, float] = {}

    def three_at_once(run_one) -> list[ClaudeRun]:
        runs: list[ClaudeRun] = []
        threads = [threading.Thread(target=lambda i=i: runs.append(run_one(i))) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=180)
        assert len(runs) == 3
        return runs

    # what sessions cost with no plugin at all: three at once, as the first sessions below
    baseline = three_at_once(lambda i: sb.run("[[text:ok]] hi %d" % i, path=path, plugin_dirs=()))
    assert [r.returncode for r in baseline] == [0, 0, 0], baseline[0].describe()
    times["sessions without the plugin, 3 at once (slowest)"] = max(r.seconds for r in baseline)

    market = marketplace_copy(tmp_path / "subconscious-repo")
    for argv in (("plugin", "marketplace", "add", str(market)), ("plugin", "install", "subconscious@subconscious")):
        p = sb.command(*argv, timeout=120)
        assert p.returncode == 0, p.stdout + p.stderr
    data = sb.config_dir / "plugins" / "data" / "subconscious-subconscious"

    # ---- three first sessions at once: each returns at once, without the subconscious; one set-up runs
    firsts = three_at_once(lambda i: machine.run(f"[[text:First {i} {tag}.]] first session {i}", plugin_dirs=()))
    times["first sessions with the plugin, 3 at once (slowest)"] = max(r.seconds for r in firsts)
    times["  their SessionStart hook, as Claude Code timed it (slowest)"] = max(
        a["durationMs"] / 1000 for r in firsts for a in r.hook_attachments()
        if a.get("hookEvent") == "SessionStart" and "durationMs" in a)
    for r in firsts:
        message = hook_response(r, "SessionStart")["stdout"]
        assert "installing itself in the background" in message, r.describe()
        assert not r.seen_by_model("installing itself")  # the user's line, not the model's context
    t0 = time.monotonic()
    while not (data / "install.stamp").exists() and time.monotonic() - t0 < 300:
        time.sleep(0.5)
    log = (data / "setup.log").read_text() if (data / "setup.log").exists() else "(no setup.log)"
    assert (data / "install.stamp").exists(), log
    times["first sessions' end -> own install ready"] = time.monotonic() - t0
    assert log.count("installing subconscious") == 1, log  # concurrent first sessions set up once
    (venv,) = data.glob("venv-*")
    assert (venv / "bin" / "subconscious").exists()
    assert not (market / "build").exists() and not list(market.glob("*.egg-info"))  # the build wrote nothing there

    # ---- the next session goes through the plugin's own install to the real Letta server
    fact = f"plugin-setup-{tag}-keep-commits-small"
    run2 = machine.run(f"[[text:Noted {tag}.]] Second session.\nREMEMBER guidance: {fact}", plugin_dirs=())
    times["next session (own install, real server)"] = run2.seconds
    sid = run2.session_id
    entry = machine.store().conversation(sid)
    assert entry is not None and entry.conversation_id.startswith("conv-"), "SessionStart made no conversation"
    agents_to_delete.append(entry.agent_id)
    machine.wait_delivered(sid, run2)
    updates = user_texts(conversation_messages(letta_server.base_url, entry.conversation_id),
                         "<claude_code_session_update>")
    # the prompt holds "Noted {tag}." too (its [[text:]] directive): the answer is counted as Claude's message
    assert sum(fact in u for u in updates) == 1 and times_said(updates, f"Noted {tag}.") == 1, updates
    # ... and the agent's answer comes back with the next prompt
    run3 = machine.run(f"[[text:Third {tag}.]] Third turn.", resume=sid, plugin_dirs=())
    prompt3 = context_after(run3.message_requests()[0].body, is_prompt("Third turn."))
    assert agent_said_memory_insert(prompt3, fact), prompt3[:3000]

    # ---- a plugin update (a new version in plugin.json): reinstalled once, the old install serving meanwhile
    plugin_json = market / ".claude-plugin" / "plugin.json"
    plugin_json.write_text(plugin_json.read_text().replace('"version": "0.1.0"', '"version": "0.1.1"'))
    run4 = machine.run(f"[[text:Fourth {tag}.]] Fourth turn.", resume=sid, plugin_dirs=())
    assert run4.seen_by_model("<letta_")  # the old install still answered
    t0 = time.monotonic()
    while time.monotonic() - t0 < 300:
        stamp = (data / "install.stamp").read_text().splitlines()
        if stamp[2] == "0.1.1" and not (data / "setup.lock").exists():
            break
        time.sleep(0.5)
    times["plugin update -> reinstalled"] = time.monotonic() - t0
    log = (data / "setup.log").read_text()
    assert stamp[2] == "0.1.1" and log.count("installing subconscious") == 2, log
    assert sorted(data.glob("venv-*")) == sorted([venv, Path(stamp[1]).parents[1]])  # the new one and the one before
    run5 = machine.run(f"[[text:Fifth {tag}.]] Fifth turn.", resume=sid, plugin_dirs=())
    assert (data / "setup.log").read_text().count("installing subconscious") == 2  # once, not on every hook
    machine.wait_delivered(sid, run5)

    # ---- its Python goes away under the venv (an upgrade removed it): the hooks stay quiet, SessionStart says
    # so, one repair runs in the background, and the next turn delivers again
    venv_now = Path(stamp[1]).parents[1]
    for link in (venv_now / "bin").glob("python*"):
        link.unlink()
    (venv_now / "bin" / "python").symlink_to(tmp_path / "uninstalled" / "python3")
    (venv_now / "bin" / "python3").symlink_to("python")
    run6 = machine.run(f"[[text:Sixth {tag}.]] Sixth turn.", resume=sid, plugin_dirs=())
    assert run6.returncode == 0, run6.describe()
    message = hook_response(run6, "SessionStart")["stdout"]
    assert "stopped working" in message and "reinstalling itself" in message, message
    t0 = time.monotonic()
    while time.monotonic() - t0 < 300:
        log = (data / "setup.log").read_text()
        if log.count("installing subconscious") == 3 and not (data / "setup.lock").exists() and \
                "installed: " in log.rsplit("installing subconscious", 1)[-1]:
            break
        time.sleep(0.5)
    times["interpreter gone -> repaired"] = time.monotonic() - t0
    assert log.count("installing subconscious") == 3 and "repairing: its Python" in log, log
    run7 = machine.run(f"[[text:Seventh {tag}.]] Seventh turn.", resume=sid, plugin_dirs=())
    machine.wait_delivered(sid, run7)
    assert (data / "setup.log").read_text().count("installing subconscious") == 3

    print("\n".join(f"plugin set-up timing: {k}: {v:.2f} s" for k, v in times.items()))
