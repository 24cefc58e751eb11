"""The plugin's own install repairs itself when the machine changes under it (a Python upgraded or removed
under its venv, a plugin update whose files keep old mtimes): every hook event of hooks/hooks.json, run
exactly as Claude Code runs it (``/bin/sh <plugin>/hooks/run <event>``), exits 0 with nothing on stderr,
one repair starts in the background, and the hooks work again afterwards (a SessionStart reaches Letta).

Real parts: the shell, hooks/run and hooks/setup, real venvs of this machine's Python (and another Python
version when the machine has one), this checkout's package and its real CLI; the fake Letta server of
tests/harness. Only pip is a stand-in (no index here): it points the new venv at this checkout and at the
test environment's dependencies (a .pth, as an editable install does), and writes the console script as pip
writes it.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import uuid
from pathlib import Path

import pytest

from tests.harness.fake_letta import AGENT, FakeLetta
from tests.unit.test_plugin_launcher import UTILS

REPO = Path(__file__).resolve().parents[2]
EVENTS = [h["args"][1] for groups in json.loads((REPO / "hooks" / "hooks.json").read_text())["hooks"].values()
          for group in groups for h in group["hooks"]]

# pip's console script, as pip writes it
PIP_SCRIPT = """#!{python}
# -*- coding: utf-8 -*-
import re
import sys
from subconscious.cli import main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(main())
"""

FAKE_PIP = """import os, sys, sysconfig, time
assert sys.argv[1] == "install", sys.argv
with open({calls!r}, "a") as f:
    f.write(sys.executable + "\\n")
deadline = time.time() + 60
while not os.path.exists({release!r}) and time.time() < deadline:  # the test says when the install may end
    time.sleep(0.02)
with open(os.path.join(sysconfig.get_paths()["purelib"], "subconscious-checkout.pth"), "w") as f:
    f.write({repo!r} + "\\n" + {deps!r} + "\\n")
script = os.path.join(os.path.dirname(sys.executable), "subconscious")
with open(script, "w") as f:
    f.write({script_text!r}.format(python=sys.executable))
os.chmod(script, 0o755)
"""

PYTHON3 = """#!/bin/sh
# this machine's Python; `-m venv DIR` makes a venv without pip and puts the stand-in pip into it
if [ "$1 $2" = "-m venv" ]; then
  "{python}" -m venv --without-pip "$3" || exit 1
  site=$("$3/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') || exit 1
  mkdir -p "$site/pip" && : >"$site/pip/__init__.py" && cp "{pip}" "$site/pip/__main__.py"
  exit $?
fi
exec "{python}" "$@"
"""


def other_python() -> str | None:
    """A real Python of another minor version than this one (a 'newer Python' under the venv), if any."""
    mine = "%d.%d" % sys.version_info[:2]
    names = [f"python3.{m}" for m in range(15, 9, -1) if f"3.{m}" != mine]  # newer ones first
    found = [shutil.which(n) for n in names] + sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1*/bin/python3")),
                                                      reverse=True)
    for p in filter(None, found):
        out = subprocess.run([p, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True,
                             text=True).stdout.strip()
        if out and out != mine:
            return p
    return None


class Plugin:
    def __init__(self, tmp: Path, letta: FakeLetta):
        self.tmp, self.letta = tmp, letta
        self.config = tmp / "config"
        self.root = self.config / "plugins" / "cache" / "market" / "subconscious" / "0.1.0"
        self.data = self.config / "plugins" / "data" / "subconscious-market"
        self.bin = tmp / "bin"
        for d in (self.root / "hooks", self.root / ".claude-plugin", self.root / "subconscious", self.bin, tmp / "home",
                  tmp / "project"):
            d.mkdir(parents=True, exist_ok=True)
        for name in ("run", "setup"):
            shutil.copy(REPO / "hooks" / name, self.root / "hooks" / name)
        shutil.copy(REPO / ".claude-plugin" / "plugin.json", self.root / ".claude-plugin" / "plugin.json")
        shutil.copy(REPO / "pyproject.toml", self.root / "pyproject.toml")
        (self.root / "subconscious" / "__init__.py").write_text("")
        for u in UTILS:
            (self.bin / u).symlink_to(shutil.which(u))
        self.calls, self.release = tmp / "pip-calls", tmp / "pip-release"
        pip = tmp / "fake_pip.py"
        pip.write_text(FAKE_PIP.format(calls=str(self.calls), release=str(self.release), repo=str(REPO),
                                       deps=sysconfig.get_paths()["purelib"], script_text=PIP_SCRIPT))
        (self.bin / "python3").write_text(PYTHON3.format(python=sys.executable, pip=pip))
        (self.bin / "python3").chmod(0o755)
        self.sid = str(uuid.uuid4())
        self.transcript = tmp / "t.jsonl"
        self.transcript.write_text(json.dumps({"type": "user", "uuid": "u1",
                                               "message": {"role": "user", "content": "hi"}}) + "\n")
        self.env = {"PATH": str(self.bin), "HOME": str(tmp / "home"), "CLAUDE_CONFIG_DIR": str(self.config),
                    "CLAUDE_PLUGIN_ROOT": str(self.root), "CLAUDE_PLUGIN_DATA": str(self.data),
                    "LETTA_BASE_URL": letta.url, "LETTA_AGENT_ID": AGENT, "LETTA_API_KEY": "k",
                    "SUBCONSCIOUS_STATE_DIR": str(tmp / "local"), "LETTA_HOME": str(tmp / "shared"),
                    "SUBCONSCIOUS_HOST": "laptop"}

    def start(self, event: str) -> subprocess.Popen:
        p = subprocess.Popen(["/bin/sh", str(self.root / "hooks" / "run"), event], env=self.env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(self.tmp / "project"))
        try:  # as Claude Code does: a hook may end before it reads its input (the launcher's repair path can)
            p.stdin.write(json.dumps(self.input(event)))
            p.stdin.close()
        except BrokenPipeError:  # what it printed and its exit status are still what the test checks
            with contextlib.suppress(BrokenPipeError):
                p.stdin.close()
        return p

    def input(self, event: str) -> dict:
        return {"session_id": self.sid, "hook_event_name": event, "cwd": str(self.tmp / "project"),
                "transcript_path": str(self.transcript), "tool_name": "Read", "tool_input": {"file_path": "/x"},
                "prompt": "hello", "source": "startup"}

    def hook(self, event: str, **env: str) -> subprocess.CompletedProcess:
        data = self.input(event)
        return subprocess.run(["/bin/sh", str(self.root / "hooks" / "run"), event], input=json.dumps(data),
                              env={**self.env, **env}, capture_output=True, text=True, timeout=60,
                              cwd=str(self.tmp / "project"))

    def log(self) -> str:
        f = self.data / "setup.log"
        return f.read_text() if f.exists() else ""

    def installs(self) -> int:
        return self.log().count("installing subconscious")

    def wait_installed(self, n: int, timeout: float = 60.0) -> None:
        self.release.touch()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.installs() >= n and not (self.data / "setup.lock").exists() and "installed: " in \
                    self.log().rsplit("installing subconscious", 1)[-1]:
                return
            time.sleep(0.05)
        raise AssertionError("set-up did not finish:\n" + self.log())

    def stamp(self) -> list[str]:
        return (self.data / "install.stamp").read_text().splitlines()

    def venv(self) -> Path:
        return Path(self.stamp()[1]).parents[1]

    def set_python(self, target: str) -> None:
        """The venv's interpreter link now leads to ``target`` (a Python upgrade or removal under it)."""
        b = self.venv() / "bin"
        for p in b.glob("python*"):
            p.unlink()
        (b / "python").symlink_to(target)
        (b / "python3").symlink_to("python")

    def works(self) -> bool:
        """A new session's SessionStart reaches Letta through the install (it makes the conversation)."""
        self.sid = str(uuid.uuid4())
        before = self.conversations_made()
        r = self.hook("session-start")
        assert (r.returncode, r.stderr) == (0, ""), r.stderr
        return self.conversations_made() == before + 1

    def conversations_made(self) -> int:
        return sum(r.startswith("POST /v1/conversations") and "messages" not in r for r in self.letta.requests)


def doctor(p: Plugin) -> dict:
    """`subconscious doctor --json`'s plugin-install finding, run by the user from a shell (no CLAUDE_PLUGIN_* set)."""
    env = {k: v for k, v in p.env.items() if not k.startswith("CLAUDE_PLUGIN")}
    env["PATH"] = os.environ.get("PATH", "/usr/bin:/bin")
    r = subprocess.run([sys.executable, "-m", "subconscious", "doctor", "--json"], env={**env, "PYTHONPATH": str(REPO)},
                       capture_output=True, text=True, timeout=60)
    (found,) = [f for f in json.loads(r.stdout)["findings"] if f["kind"] == "plugin-install"]
    return found


def run_every_event(p: Plugin, **env: str) -> list[subprocess.CompletedProcess]:
    """All ten hook events with the install broken: exit 0, nothing on stderr, silent but for SessionStart."""
    assert len(EVENTS) == 10 and EVENTS[0] == "session-start"
    if env.pop("parallel", None):  # all at once, as Claude Code may run them
        procs = [p.start(ev) for ev in EVENTS]
        runs = [subprocess.CompletedProcess(pr.args, pr.wait(timeout=60), pr.stdout.read(), pr.stderr.read())
                for pr in procs]
    else:
        runs = [p.hook(ev, **env) for ev in EVENTS]
    for ev, r in zip(EVENTS, runs):
        assert (r.returncode, r.stderr) == (0, ""), (ev, r.stderr)
        if ev != "session-start":
            assert r.stdout == "", (ev, r.stdout)
    return runs


@pytest.fixture
def plugin(tmp_path):
    fake = FakeLetta()
    try:
        p = Plugin(tmp_path, fake)
        first = p.hook("session-start")
        assert "installing itself in the background" in json.loads(first.stdout)["systemMessage"]
        p.wait_installed(1)
        yield p
    finally:
        fake.close()


def test_a_python_upgraded_or_removed_under_the_install_is_repaired_once_and_works_again(plugin):
    p = plugin
    stamp = p.stamp()
    assert stamp[4] == os.path.realpath(sys.executable) and stamp[5] == "%d.%d" % sys.version_info[:2]
    assert p.works()
    healthy = doctor(p)
    assert healthy["severity"] == "info" and "it starts" in healthy["message"], healthy
    assert healthy["details"]["python"] == stamp[4] and healthy["details"]["python_version"] == stamp[5]
    assert " installed: " in healthy["details"]["last_setup_line"]

    # ---- a newer Python under the venv (a distro / Homebrew upgrade): another real one when the machine
    # has one, else an interpreter outside the venv (the package is not there either)
    newer = other_python()
    if newer is None:
        newer = str(p.tmp / "outside-python")
        Path(newer).write_text("#!/bin/sh\nexec %s \"$@\"\n" % os.path.realpath(sys.executable))
        Path(newer).chmod(0o755)
    p.release.unlink()
    old_venv = p.venv()
    p.set_python(newer)
    broken = doctor(p)
    assert broken["severity"] == "warning" and "does not start" in broken["message"], broken
    runs = run_every_event(p)
    (line,) = runs[0].stdout.splitlines()
    message = json.loads(line)["systemMessage"]
    assert "stopped working" in message and "reinstalling itself" in message and "minute" in message, message
    # the same with the package importable from elsewhere (PYTHONPATH): the Python is still not the one
    run_every_event(p, PYTHONPATH=str(REPO))
    p.wait_installed(2)
    assert p.installs() == 2 and "repairing: its " in p.log(), p.log()
    assert p.venv() != old_venv
    assert p.works(), p.log()

    # ---- its Python removed (the link now leads nowhere)
    p.release.unlink()
    p.set_python(str(p.tmp / "uninstalled" / "python3.11"))
    runs = run_every_event(p, parallel="1")
    message = json.loads(runs[0].stdout)["systemMessage"]
    assert "is gone" in message and "reinstalling itself" in message, message
    p.wait_installed(3)
    assert p.installs() == 3, p.log()
    assert p.works(), p.log()


def test_a_new_plugin_version_with_old_mtimes_reinstalls_once_and_the_old_install_serves_meanwhile(plugin):
    p = plugin
    p.release.unlink()
    first = p.stamp()
    for name in (".claude-plugin/plugin.json", "pyproject.toml"):
        f = p.root / name
        f.write_text(f.read_text().replace('"0.1.0"', '"0.1.7"', 1))
    subprocess.run(["touch", "-d", "1985-10-26 01:21", str(p.root / ".claude-plugin" / "plugin.json"),
                    str(p.root / "pyproject.toml")], check=True)
    assert (p.root / "pyproject.toml").stat().st_mtime < (p.data / "install.stamp").stat().st_mtime
    assert p.works()  # the old install serves meanwhile
    for ev in EVENTS:
        r = p.hook(ev)
        assert (r.returncode, r.stderr) == (0, ""), (ev, r.stderr)
    p.wait_installed(2)
    stamp = p.stamp()
    assert stamp[2:4] == ["0.1.7", "0.1.7"] and stamp[1] != first[1], p.log()
    assert p.works() and p.hook("stop").returncode == 0
    time.sleep(0.3)
    assert p.installs() == 2, p.log()  # one reinstall, not one per hook


def _setups_running(p: Plugin) -> bool:
    """A hooks/setup of this plugin's data dir still runs (the hook starts it detached; it takes the lock only
    once it has started, which on a loaded machine is after the hook has returned)."""
    data = str(p.data).encode()
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if data in argv and any(a.endswith(b"/hooks/setup") for a in argv):
            return True
    return False


def _settle(p: Plugin, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while ((p.data / "setup.lock").exists() or _setups_running(p)) and time.monotonic() < deadline:
        time.sleep(0.05)


def test_two_plugin_versions_side_by_side_each_keep_their_install_and_do_not_reinstall_in_turn(plugin):
    """Red team: a marketplace update while a session still runs the old version: both plugin dirs share the
    data dir. Each hook of one reinstalled for its own dir, the other's next hook reinstalled back (10 pip runs
    for 12 hooks). Now the update installs once and the old session keeps the install made for it."""
    p = plugin
    new = p.root.parent / "0.2.0"
    shutil.copytree(p.root, new)
    manifest = new / ".claude-plugin" / "plugin.json"
    manifest.write_text(manifest.read_text().replace('"version": "', '"version": "9', 1))
    env_new = {"CLAUDE_PLUGIN_ROOT": str(new)}
    old_bin = p.stamp()[1]
    for _ in range(5):
        for env in ({}, env_new):
            r = subprocess.run(["/bin/sh", str(Path(env.get("CLAUDE_PLUGIN_ROOT", p.root)) / "hooks" / "run"),
                                "pre-tool-use"], input=json.dumps(p.input("pre-tool-use")), env={**p.env, **env},
                               capture_output=True, text=True, timeout=60)
            assert (r.returncode, r.stderr, r.stdout) == (0, "", ""), r
            _settle(p)
    assert p.installs() == 2, p.log()
    assert p.stamp()[0] == str(new) and Path(old_bin).exists()
    assert p.works()  # the old session still reaches Letta, through its own install
    p.env.update(env_new)
    assert p.works()


def test_a_stamp_that_is_not_a_file_is_kept_aside_and_repaired_once(plugin):
    """Red team: install.stamp made a directory (a sync engine's conflict, a mistaken mkdir): the set-up
    wrote its new stamp *into* it and every later hook found no stamp and reinstalled again."""
    p = plugin
    (p.data / "install.stamp").unlink()
    (p.data / "install.stamp").mkdir()
    (p.data / "install.stamp" / "keep").write_text("x")
    for _ in range(6):
        r = p.hook("pre-tool-use")
        assert (r.returncode, r.stderr, r.stdout) == (0, "", "")
        _settle(p)
    assert p.installs() == 2, p.log()
    (aside,) = p.data.glob("install.stamp.aside-*")
    assert (aside / "keep").read_text() == "x"  # kept, not deleted
    assert "kept aside" in p.log()
    assert p.works()


FILLING_PIP = """import os, sys
with open({runs!r}, "a") as f:
    f.write("pip\\n")
try:  # a wheel bigger than the disk's free space
    with open(os.path.join(os.path.dirname(sys.executable), "big-wheel"), "wb") as f:
        f.write(bytes(8 << 20))
except OSError as exc:
    print("ERROR: Could not install packages due to an OSError:", exc, file=sys.stderr)
sys.exit(1)
"""

ON_A_FULL_DISK = """set -e
mount -t tmpfs -o size=2m tmpfs "$CLAUDE_PLUGIN_DATA"
i=0
while [ $i -lt 6 ]; do
  echo '{}' | /bin/sh "$ROOT/hooks/run" pre-tool-use || echo "hook exit $?"
  sleep 0.2
  while [ -d "$CLAUDE_PLUGIN_DATA/setup.lock" ]; do sleep 0.05; done
  i=$((i + 1))
done
cat "$CLAUDE_PLUGIN_DATA/setup.failed" 2>/dev/null || echo "no setup.failed"
"""


def test_a_set_up_that_fills_the_disk_still_backs_off(tmp_path):
    """Red team: pip filling the disk (the data dir on a full filesystem, a tmpfs of 2 MiB here, in a mount
    namespace of its own) failed the set-up, whose backoff file then could not be written: every hook ran pip
    again (12 pip runs for 12 hooks; 6 for 6 here). The failed venv is removed first now, so the backoff is written."""
    fake = FakeLetta()
    try:
        p = Plugin(tmp_path, fake)
    finally:
        fake.close()
    runs = tmp_path / "pip-runs"
    (tmp_path / "fake_pip.py").write_text(FILLING_PIP.format(runs=str(runs)))
    p.data.mkdir(parents=True)
    unshare = shutil.which("unshare")
    prefix = [unshare, "--mount"] if os.geteuid() == 0 else [unshare, "--user", "--map-root-user", "--mount"]
    env = {**p.env, "ROOT": str(p.root), "PATH": f"{p.bin}:{os.path.dirname(shutil.which('mount'))}"}
    r = subprocess.run([*prefix, "/bin/sh", "-c", ON_A_FULL_DISK], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "hook exit" not in r.stdout, (r.stdout, r.stderr)
    assert runs.read_text().count("pip") == 1, r.stdout  # then the backoff (a minute) holds
    assert "No space left on device" in r.stdout.splitlines()[-1], r.stdout  # setup.failed names the cause


@pytest.mark.parametrize("path_entry", [".", "", "bin", "./bin"])
def test_a_relative_path_entry_never_runs_the_projects_own_subconscious(plugin, path_entry):
    """Red team: hooks run in the project's directory; with `.` (or an empty entry, or any relative one) in
    PATH the launcher ran an executable `subconscious` planted in a cloned repository on every hook."""
    p = plugin
    proj = p.tmp / "project"
    planted = "#!/bin/sh\necho planted >> %s\n" % (p.tmp / "pwned")
    for where in (proj, proj / "bin"):
        where.mkdir(exist_ok=True)
        (where / "subconscious").write_text(planted)
        (where / "subconscious").chmod(0o755)
    r = p.hook("pre-tool-use", PATH=f"{path_entry}:{p.bin}")
    assert (r.returncode, r.stderr, r.stdout) == (0, "", "")
    assert not (p.tmp / "pwned").exists()
    p.env["PATH"] = f"{path_entry}:{p.bin}"
    assert p.works()  # the plugin's own install served


def test_a_data_dir_that_cannot_be_written_is_said_and_no_set_up_is_started(tmp_path):
    """Red team: the plugin's data dir read-only (here immutable: the tests run as root too): the set-up could
    not open its log and died at once, so SessionStart said "installing itself in the background" on every
    session, forever, and every hook started another set-up."""
    fake = FakeLetta()
    try:
        p = Plugin(tmp_path, fake)
        p.data.mkdir(parents=True)
        if os.geteuid() == 0:
            subprocess.run(["chattr", "+i", str(p.data)], check=True)
        else:
            p.data.chmod(0o500)
        try:
            runs = run_every_event(p)
            message = json.loads(runs[0].stdout)["systemMessage"]
            assert "cannot install itself" in message and "not writable" in message and str(p.data) in message, message
            time.sleep(0.3)
            assert not (p.tmp / "pip-calls").exists() and not any(p.data.iterdir())
        finally:
            if os.geteuid() == 0:
                subprocess.run(["chattr", "-i", str(p.data)], check=True)
            p.data.chmod(0o700)
    finally:
        fake.close()


def test_fifos_where_the_launcher_reads_its_files_never_hang_a_hook(tmp_path):
    """Red team: a FIFO as setup.lock/pid, or as install.stamp of a data dir the launcher searches (no
    CLAUDE_PLUGIN_DATA, a plugin dir used in place): reading it blocked the hook until Claude Code killed it,
    on every hook (and the set-up taking over the lock hung for good)."""
    fake = FakeLetta()
    try:
        p = Plugin(tmp_path, fake)
        p.release.touch()
        (p.data / "setup.lock").mkdir(parents=True)
        os.mkfifo(p.data / "setup.lock" / "pid")
        other = p.config / "plugins" / "data" / "subconscious-other"
        other.mkdir(parents=True)
        os.mkfifo(other / "install.stamp")
        for env in ({}, {"CLAUDE_PLUGIN_DATA": "", "CLAUDE_PLUGIN_ROOT": str(p.tmp / "inplace")}):
            if env:
                shutil.copytree(p.root, p.tmp / "inplace")
            for ev in ("session-start", "pre-tool-use"):
                r = subprocess.run(["/bin/sh", str(p.root / "hooks" / "run"), ev], input="{}", env={**p.env, **env},
                                   capture_output=True, text=True, timeout=15)  # hung for ever before
                assert r.returncode == 0 and r.stderr == "", r
        r = subprocess.run(["/bin/sh", str(p.root / "hooks" / "setup"), str(p.root), str(p.data)], env=p.env,
                           capture_output=True, text=True, timeout=30)
        assert "another set-up is running" in p.log(), p.log()
    finally:
        fake.close()


def test_a_stamp_cut_short_inside_its_command_line_is_repaired_silently(plugin):
    """Red team: install.stamp cut off in its second line, right after the data dir's path (a sync engine
    that copied half of it, a full disk): the command was then the data *directory*, which `-x` accepts, so
    every hook ran a directory: "Permission denied" on stderr and exit 1, on every event until the repair."""
    p = plugin
    p.release.unlink()
    stamp = p.data / "install.stamp"
    text = stamp.read_text()
    stamp.write_text(text[:text.index("/venv-") + 1])
    runs = run_every_event(p)
    message = json.loads(runs[0].stdout)["systemMessage"]
    assert "reinstalling itself" in message or "installing itself" in message, message
    p.wait_installed(2)
    assert p.installs() == 2, p.log()
    assert p.works()
