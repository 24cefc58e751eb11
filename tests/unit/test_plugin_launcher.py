"""The plugin's launcher (hooks/run) and its own set-up (hooks/setup), run by /bin/sh with fake PATHs.

Only the interpreters are fakes (a ``python3`` that reports a version and "installs" a stub command,
a ``subconscious`` that records its call): the shell, the core utilities and the scripts are the real
ones Claude Code runs. The real set-up (python3 -m venv + pip, the real CLI) is in
tests/integration/test_plugin_setup.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# what hooks/run and hooks/setup call besides shell builtins
UTILS = ("date", "mkdir", "setsid", "nohup", "nice", "sed", "head", "tr", "cut", "cp", "find", "rm", "mv", "tail", "sleep", "chmod")  # chmod: the fake pip

FAKE_PYTHON = r"""#!/bin/sh
# a fake Python {version}: answers hooks/setup's version probes, "creates" a venv, "pip installs" a stub
[ "$1" = -I ] && shift
[ "$1" = -S ] && shift
[ "$1" = -P ] && shift
case "$1" in
  -c) case "$2" in *print*) echo {version} ;; *sys.exit*) [ {ok} = 1 ] ;; esac; exit $? ;;
esac
if [ "$1 $2" = "-m venv" ]; then
  mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && exit 0
fi
if [ "$1 $2 $3" = "-m pip install" ]; then
  echo "$$" >>"{calls}"
  sleep {pip_seconds}
{gate}
  [ {pip_ok} = 1 ] || {{ echo "ERROR: No matching distribution found for httpx>=0.27" >&2; exit 1; }}
  bin=${{0%/python}}
  printf '#!/bin/sh\nif [ "$1" = --version ]; then echo "subconscious 0.1.0"; exit 0; fi\necho "PLUGIN-INSTALL $*"; exit {exit_code}\n' >"$bin/subconscious"
  chmod +x "$bin/subconscious"
  exit 0
fi
exit 3
"""


FAKE_UV = r"""#!/bin/sh
# a fake uv: `uv venv --quiet --python '>=3.11' DIR` and `uv pip install --quiet --python DIR/bin/python SRC`
echo "$*" >>"{calls}"
if [ "$1" = venv ]; then mkdir -p "$5/bin" && printf '#!/bin/sh\necho 3.12\n' >"$5/bin/python" && chmod +x "$5/bin/python" && exit 0; fi
if [ "$1 $2" = "pip install" ]; then
  bin=${{5%/python}}
  printf '#!/bin/sh\nif [ "$1" = --version ]; then echo "subconscious 0.1.0"; exit 0; fi\necho "UV-INSTALL $*"\n' >"$bin/subconscious"
  chmod +x "$bin/subconscious"
  exit 0
fi
exit 3
"""


class Sandbox:
    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.home = tmp / "home"
        self.config = tmp / "config"
        # laid out as Claude Code installs a marketplace plugin
        self.plugin = self.config / "plugins" / "cache" / "market" / "subconscious" / "0.1.0"
        self.data = self.config / "plugins" / "data" / "subconscious-market"
        self.bin = tmp / "bin"
        for d in (self.home, self.plugin / "hooks", self.plugin / ".claude-plugin", self.plugin / "subconscious",
                  self.bin):
            d.mkdir(parents=True, exist_ok=True)
        for name in ("run", "setup"):
            shutil.copy(REPO / "hooks" / name, self.plugin / "hooks" / name)
        shutil.copy(REPO / ".claude-plugin" / "plugin.json", self.plugin / ".claude-plugin" / "plugin.json")
        (self.plugin / "pyproject.toml").write_text("[project]\nname = 'subconscious'\n")
        (self.plugin / "subconscious" / "__init__.py").write_text("")
        for u in UTILS:
            (self.bin / u).symlink_to(shutil.which(u))
        self.pip_calls = tmp / "pip-calls"

    @property
    def gate(self) -> Path:
        """With python(gated=True), the fake pip waits until this file exists (a set-up held open, no clock)."""
        return self.tmp / "pip-gate"

    def python(self, version="3.12", ok=True, pip_ok=True, pip_seconds=0, exit_code=0, name="python3", pip_says=None,
               gated=False):
        p = self.bin / name
        gate = 'while [ ! -e "%s" ]; do sleep 0.05; done' % self.gate if gated else ""
        text = FAKE_PYTHON.format(version=version, ok=int(ok), pip_ok=int(pip_ok), pip_seconds=pip_seconds,
                                  calls=self.pip_calls, exit_code=exit_code, gate=gate)
        if pip_says is not None:  # what pip prints when it fails
            (self.tmp / "pip-says").write_text(pip_says)
            text = text.replace('echo "ERROR: No matching distribution found for httpx>=0.27" >&2',
                                'while IFS= read -r l; do printf "%%s\\n" "$l"; done <"%s" >&2' % (self.tmp / "pip-says"))
        p.write_text(text)
        p.chmod(0o755)

    def command_on(self, directory: Path, exit_code=0):
        directory.mkdir(parents=True, exist_ok=True)
        p = directory / "subconscious"
        p.write_text('#!/bin/sh\necho "FOUND %s $*"\nexit %d\n' % (directory, exit_code))
        p.chmod(0o755)

    def env(self, plugin_env=True):
        env = {"PATH": str(self.bin), "HOME": str(self.home), "CLAUDE_CONFIG_DIR": str(self.config)}
        if plugin_env:
            env.update(CLAUDE_PLUGIN_ROOT=str(self.plugin), CLAUDE_PLUGIN_DATA=str(self.data))
        return env

    def hook(self, event, plugin_env=True, script=None) -> subprocess.CompletedProcess:
        # exactly what hooks.json says: /bin/sh <plugin>/hooks/run <event>
        return subprocess.run(["/bin/sh", str(script or self.plugin / "hooks" / "run"), event], input="{}",
                              env=self.env(plugin_env), capture_output=True, text=True, timeout=30)

    def wait_setup(self, timeout=20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not (self.data / "setup.lock").exists() and (
                    (self.data / "install.stamp").exists() or (self.data / "setup.failed").exists()):
                return
            time.sleep(0.05)
        raise AssertionError("set-up did not finish:\n" + self.log())

    def log(self) -> str:
        f = self.data / "setup.log"
        return f.read_text() if f.exists() else ""

    def setups_run(self) -> int:
        return self.log().count("installing subconscious")


@pytest.fixture
def sb(tmp_path):
    return Sandbox(tmp_path)


def test_command_on_path_runs_and_a_blocking_exit_becomes_non_blocking(sb):
    sb.command_on(sb.bin)
    r = sb.hook("pre-tool-use")
    assert (r.returncode, r.stdout) == (0, "FOUND %s hook pre-tool-use\n" % sb.bin)
    for code, expected in ((2, 1), (1, 1), (7, 1)):
        sb.command_on(sb.bin, exit_code=code)
        assert sb.hook("user-prompt-submit").returncode == expected
    assert not sb.data.exists()  # a found command never starts a set-up


def test_pipx_location_then_the_plugins_own_install(sb):
    sb.command_on(sb.home / ".local" / "bin")
    assert sb.hook("stop").stdout == "FOUND %s hook stop\n" % (sb.home / ".local" / "bin")
    (sb.home / ".local" / "bin" / "subconscious").unlink()
    sb.python()
    first = sb.hook("session-start")
    assert first.returncode == 0
    assert "installing itself in the background" in json.loads(first.stdout)["systemMessage"]
    sb.wait_setup()
    r = sb.hook("pre-tool-use")
    assert (r.returncode, r.stdout) == (0, "PLUGIN-INSTALL hook pre-tool-use\n"), sb.log()
    stamp = (sb.data / "install.stamp").read_text().splitlines()
    assert stamp[0] == str(sb.plugin) and stamp[2] == "0.1.0"
    assert oct((sb.data / "setup.log").stat().st_mode & 0o777) == "0o600"
    assert oct(sb.data.stat().st_mode & 0o777) == "0o700"


def test_uv_is_used_when_it_is_on_the_machine_and_needs_no_python3(sb):
    calls = sb.tmp / "uv-calls"
    (sb.bin / "uv").write_text(FAKE_UV.format(calls=calls))
    (sb.bin / "uv").chmod(0o755)
    assert shutil.which("python3", path=str(sb.bin)) is None
    start = sb.hook("session-start")  # no "needs Python" line: uv finds or fetches one
    assert "installing itself in the background" in json.loads(start.stdout)["systemMessage"]
    sb.wait_setup()
    assert sb.hook("stop").stdout == "UV-INSTALL hook stop\n", sb.log()
    venv, pip = calls.read_text().splitlines()
    assert venv.startswith("venv --quiet --python >=3.11 ") and pip.startswith("pip install --quiet --python ")
    assert pip.endswith(".src")  # from a copy of the plugin dir


def test_empty_plugin_root_is_found_from_the_scripts_own_path(sb):
    # Claude Code sometimes runs plugin hooks with CLAUDE_PLUGIN_ROOT (and DATA) empty
    sb.python()
    assert sb.hook("session-start", plugin_env=False).returncode == 0
    sb.wait_setup()
    assert (sb.data / "install.stamp").exists(), "the data dir derived from the plugin cache layout: " + sb.log()
    r = sb.hook("pre-tool-use", plugin_env=False)
    assert r.stdout == "PLUGIN-INSTALL hook pre-tool-use\n", r.stderr


def test_empty_plugin_data_finds_the_install_made_from_this_plugin_dir(sb):
    # a local marketplace is used in place: its dir says nothing of the data dir; the stamp does
    local = sb.tmp / "my-clone"
    shutil.copytree(sb.plugin, local)
    assert not (sb.config / "plugins" / "data").exists()
    quiet = sb.hook("pre-tool-use", plugin_env=False, script=local / "hooks" / "run")  # no data dirs at all
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")
    inline = sb.config / "plugins" / "data" / "subconscious-inline"
    deadline = time.monotonic() + 20
    while ((inline / "setup.lock").exists() or not (inline / "setup.failed").exists()) and time.monotonic() < deadline:
        time.sleep(0.05)  # the set-up it started (no python3 here) has failed
    shutil.rmtree(sb.config / "plugins" / "data")
    sb.python()
    env = {**sb.env(plugin_env=False), "CLAUDE_PLUGIN_ROOT": str(local),
           "CLAUDE_PLUGIN_DATA": str(sb.config / "plugins" / "data" / "subconscious-mymarket")}
    subprocess.run(["/bin/sh", str(local / "hooks" / "run"), "session-start"], env=env, capture_output=True, timeout=30)
    sb.data = sb.config / "plugins" / "data" / "subconscious-mymarket"
    sb.wait_setup()
    r = sb.hook("pre-tool-use", plugin_env=False, script=local / "hooks" / "run")
    assert r.stdout == "PLUGIN-INSTALL hook pre-tool-use\n", sb.log()
    assert not (sb.config / "plugins" / "data" / "subconscious-inline").exists()  # no second install


def test_concurrent_first_hooks_set_up_once(sb):
    sb.python(pip_seconds=1.5)
    procs = [subprocess.Popen(["/bin/sh", str(sb.plugin / "hooks" / "run"), ev], env=sb.env(),
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for ev in ("session-start", "session-start", "user-prompt-submit", "pre-tool-use", "stop") * 2]
    # and set-ups started at the same instant (two launchers that both saw no set-up running)
    setups = [subprocess.Popen(["/bin/sh", str(sb.plugin / "hooks" / "setup"), str(sb.plugin), str(sb.data)],
                               env=sb.env()) for _ in range(4)]
    assert [p.wait(timeout=30) for p in setups] == [0] * 4
    outs = [p.communicate(timeout=30) for p in procs]
    assert [p.returncode for p in procs] == [0] * len(procs)
    assert [o for o, _ in outs[2:5]] == ["", "", ""]  # only SessionStart speaks
    time.sleep(0.3)
    sb.wait_setup()
    assert sb.pip_calls.read_text().count("\n") == 1, sb.log()
    # hooks started while it runs do not start another one either
    assert sb.setups_run() == 1


def test_unsuitable_python_one_line_at_session_start_silence_elsewhere_and_backoff(sb):
    sb.python(version="3.9", ok=False)
    assert sb.hook("pre-tool-use").stdout == ""
    sb.wait_setup()
    failed = (sb.data / "setup.failed").read_text().splitlines()
    assert failed[1] == "unsuitable" and "Python 3.9 at %s" % (sb.bin / "python3") in failed[2]
    start = sb.hook("session-start")
    assert start.returncode == 0 and start.stderr == ""
    (line,) = start.stdout.splitlines()
    message = json.loads(line)["systemMessage"]
    assert "needs Python 3.11 or newer" in message and "Python 3.9" in message
    for ev in ("user-prompt-submit", "pre-tool-use", "stop"):
        r = sb.hook(ev)
        assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
    time.sleep(0.3)
    assert sb.log().count("FAILED") == 1  # backed off: not tried again on every hook
    retry_after = int(failed[0].split()[0])
    assert 50 <= retry_after - time.time() <= 61


def test_no_python_at_all(sb):
    assert shutil.which("python3", path=str(sb.bin)) is None and shutil.which("uv", path=str(sb.bin)) is None
    # the very first SessionStart already says it, before the set-up has given its verdict
    (line,) = sb.hook("session-start").stdout.splitlines()
    message = json.loads(line)["systemMessage"]
    assert "needs Python 3.11 or newer, or uv" in message and "pipx install subconscious" in message
    sb.wait_setup()
    message = json.loads(sb.hook("session-start").stdout)["systemMessage"]
    assert "no python3 on PATH" in message and "pipx install subconscious" in message


def test_failed_setup_is_logged_with_its_reason_and_retried_after_the_backoff(sb):
    sb.python(pip_ok=False)
    sb.hook("session-start")
    sb.wait_setup()
    assert sb.log().count("No matching distribution found for httpx") == 2  # pip's output, and the reason
    assert "could not install itself" in json.loads(sb.hook("session-start").stdout)["systemMessage"]
    assert not list(sb.data.glob("venv-*")), "a failed set-up leaves no half-made environment"
    # the backoff passes (rewind its clock): the next hook tries again, and this time it works
    failed = sb.data / "setup.failed"
    lines = failed.read_text().splitlines()
    failed.write_text("%d %s\n%s\n" % (time.time() - 1, lines[0].split()[1], "\n".join(lines[1:])))
    sb.python(pip_ok=True)
    assert sb.hook("pre-tool-use").stdout == ""
    deadline = time.monotonic() + 20
    while not (sb.data / "install.stamp").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    sb.wait_setup()
    assert sb.hook("pre-tool-use").stdout == "PLUGIN-INSTALL hook pre-tool-use\n", sb.log()
    assert not failed.exists()


def test_a_plugin_update_reinstalls_once_and_the_old_install_serves_meanwhile(sb):
    sb.python()
    sb.hook("session-start")
    sb.wait_setup()
    first_bin = (sb.data / "install.stamp").read_text().splitlines()[1]
    time.sleep(1.1)  # mtimes: the update is newer than the install
    (sb.plugin / ".claude-plugin" / "plugin.json").write_text(
        (sb.plugin / ".claude-plugin" / "plugin.json").read_text().replace('"0.1.0"', '"0.2.0"'))
    sb.python(pip_seconds=1)
    r = sb.hook("pre-tool-use")  # starts the reinstall, answered by the old install
    assert r.stdout == "PLUGIN-INSTALL hook pre-tool-use\n"
    time.sleep(0.2)
    sb.wait_setup()
    stamp = (sb.data / "install.stamp").read_text().splitlines()
    assert stamp[2] == "0.2.0" and stamp[1] != first_bin
    for _ in range(3):
        assert sb.hook("pre-tool-use").stdout == "PLUGIN-INSTALL hook pre-tool-use\n"
    time.sleep(0.3)
    assert sb.setups_run() == 2  # the first install and one reinstall, not one per hook


def test_a_dead_setups_lock_does_not_stop_the_next_one(sb):
    sb.python()
    (sb.data / "setup.lock").mkdir(parents=True)
    dead = subprocess.Popen(["true"])
    dead.wait()
    (sb.data / "setup.lock" / "pid").write_text("%d\n" % dead.pid)
    sb.hook("session-start")
    time.sleep(0.2)
    sb.wait_setup()
    assert sb.hook("stop").stdout == "PLUGIN-INSTALL hook stop\n", sb.log()
    assert "took over the lock" in sb.log()


def test_a_lock_left_without_a_pid_or_held_for_hours_is_taken_over(sb):
    sb.python()
    lock = sb.data / "setup.lock"
    lock.mkdir(parents=True)  # killed between taking the lock and writing its pid
    sb.hook("session-start")
    time.sleep(0.3)
    assert not (sb.data / "install.stamp").exists()  # a young lock without a pid: a set-up being started
    old = time.time() - 2 * 3600
    os.utime(lock, (old, old))
    sb.hook("session-start")
    time.sleep(0.2)
    sb.wait_setup()
    assert sb.hook("stop").stdout == "PLUGIN-INSTALL hook stop\n", sb.log()
    assert "took over the lock of set-up ?" in sb.log()


def test_the_mcp_server_starts_through_the_same_launcher(sb):
    """plugin.json's mcpServers runs `/bin/sh hooks/run mcp`: `subconscious mcp` from the first command found;
    with none yet, a reason on stderr and a failure exit (Claude Code lists the server as failed), and the
    set-up starts as for a hook."""
    server = json.loads((REPO / ".claude-plugin" / "plugin.json").read_text())["mcpServers"]["subconscious"]
    assert (server["command"], server["args"]) == ("/bin/sh", ["${CLAUDE_PLUGIN_ROOT}/hooks/run", "mcp"])
    sb.python()
    r = sb.hook("mcp")
    assert r.returncode == 1 and "not installed yet" in r.stderr and r.stdout == ""
    sb.wait_setup()
    r = sb.hook("mcp")
    assert (r.returncode, r.stdout, r.stderr) == (0, "PLUGIN-INSTALL mcp\n", "")
    sb.command_on(sb.bin)
    assert sb.hook("mcp").stdout == "FOUND %s mcp\n" % sb.bin


# pip 23's output with no index: the cause in the build-dependency subprocess's lines, the generic ones last
PIP_NO_INDEX = """  error: subprocess-exited-with-error

  × pip subprocess to install build dependencies did not run successfully.
  │ exit code: 1
  ╰─> [3 lines of output]
      Looking in links: /nonexistent
      ERROR: Could not find a version that satisfies the requirement setuptools>=68 (from versions: none)
      ERROR: No matching distribution found for setuptools>=68
      [end of output]

  note: This error originates from a subprocess, and is likely not a problem with pip.
error: subprocess-exited-with-error

× pip subprocess to install build dependencies did not run successfully.
│ exit code: 1
╰─> See above for output.

note: This error originates from a subprocess, and is likely not a problem with pip.
"""


@pytest.mark.parametrize("says, cause", [
    (PIP_NO_INDEX, "No matching distribution found for setuptools>=68"),
    ("ERROR: Could not install packages due to an OSError: [Errno 28] No space left on device\n\n",
     "ERROR: Could not install packages due to an OSError: [Errno 28] No space left on device"),
    ("Traceback (most recent call last):\n  File x\nKeyboardInterrupt\n", "KeyboardInterrupt"),
])
def test_a_failed_setup_names_its_cause_at_session_start(sb, says, cause):
    sb.python(pip_ok=False, pip_says=says)
    sb.hook("session-start")
    sb.wait_setup()
    message = json.loads(sb.hook("session-start").stdout)["systemMessage"]
    assert cause in message and "See above" not in message and "note:" not in message, message
    assert "tries again in 1 min" in message
    assert cause in (sb.data / "setup.failed").read_text().splitlines()[2]
    # and `subconscious doctor` (run from a shell: no CLAUDE_PLUGIN_DATA) shows the last set-up's result
    import sys

    env = {**os.environ, "CLAUDE_CONFIG_DIR": str(sb.config), "LETTA_HOME": str(sb.tmp / "shared"),
           "SUBCONSCIOUS_STATE_DIR": str(sb.tmp / "local"), "PYTHONPATH": str(REPO)}
    env.pop("CLAUDE_PLUGIN_DATA", None)
    r = subprocess.run([sys.executable, "-m", "subconscious", "doctor", "--json"], env=env, capture_output=True,
                       text=True, timeout=60)
    (found,) = [f for f in json.loads(r.stdout)["findings"] if f["kind"] == "plugin-install"]
    assert found["severity"] == "warning" and cause in found["message"], found
    assert found["details"]["last_setup"]["attempts"] == 1


def test_a_broken_install_at_an_odd_path_still_gives_one_json_line_and_repairs(sb):
    """The stamp's paths reach SessionStart's message: a quote, a backslash, a tab or a control character in them
    must not break the JSON Claude Code reads. The repair the first hook starts is held (the fake pip's gate)
    until SessionStart has spoken: finished first, it answered SessionStart itself (seen in a parallel run)."""
    sb.python(gated=True)
    sb.data.mkdir(parents=True)
    odd = sb.tmp / 'gone "dir"\\\t\x01x'
    (sb.data / "install.stamp").write_text(f"{sb.plugin}\n{odd}/bin/subconscious\n0.1.0\n\n{odd}/python3\n3.12\n")
    for ev in ("pre-tool-use", "stop"):
        assert (lambda r: (r.returncode, r.stdout, r.stderr))(sb.hook(ev)) == (0, "", "")
    r = sb.hook("session-start")
    (line,) = r.stdout.splitlines()
    message = json.loads(line)["systemMessage"]
    assert "stopped working (its install at" in message and "is gone" in message and "reinstalling" in message
    sb.gate.touch()
    sb.wait_setup()
    assert sb.hook("pre-tool-use").stdout == "PLUGIN-INSTALL hook pre-tool-use\n", sb.log()
    assert sb.setups_run() == 1 and "repairing: its install at" in sb.log()


def test_the_launcher_and_the_setup_read_versions_with_the_same_function():
    """hooks/run compares what hooks/setup wrote into the stamp: two readings of plugin.json that differed
    would reinstall on every hook."""
    def function(path: Path) -> str:
        text = path.read_text()
        start = text.index("version_of() {")
        return text[start:text.index("\n}\n", start)]

    assert function(REPO / "hooks" / "run") == function(REPO / "hooks" / "setup")


@pytest.mark.parametrize("text, version", [
    ('{\n  "name": "subconscious",\n  "version": "0.1.0",\n', "0.1.0"),
    ('{"name": "x", "version" : "2.0.0-rc.1", "y": 1}\n', "2.0.0-rc.1"),
    ('[build-system]\nrequires = ["setuptools>=68"]\n[project]\nname = "s"\nversion = "0.3.1"\n', "0.3.1"),
    ('version_scheme = "x"\nversion="4"\n', "4"),
    ('{"name": "x"}\n', ""),
])
def test_versions_are_read_from_plugin_json_and_pyproject(tmp_path, text, version):
    f = tmp_path / "f"
    f.write_text(text)
    run = (REPO / "hooks" / "run").read_text()
    start = run.index("version_of() {")
    script = run[start:run.index("\n}\n", start) + 3] + 'version_of "$1"; printf "%s" "$v"\n'
    out = subprocess.run(["/bin/sh", "-c", script, "sh", str(f)], capture_output=True, text=True, timeout=10)
    assert (out.stdout, out.stderr) == (version, "")
