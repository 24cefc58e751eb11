"""hooks/run runs a pip-made console script's interpreter directly (subconscious.hotpath.launch), skipping the
script's own ``import re``: the real shell, a real venv's python, our real package, a console script exactly
as pip writes it (plus one line that leaves a mark when the script itself runs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from subconscious.local import claims
from tests.unit.test_injection_hooks import letta  # noqa: F401 - the fake Letta server fixture

REPO = Path(__file__).resolve().parents[2]
PIP_SCRIPT = """#!{python}
# -*- coding: utf-8 -*-
import re
import sys
open({mark!r}, "a").write("script ran\\n")
from subconscious.cli import main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(main())
"""


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A venv without pip (its own site-packages: no .pth of this machine's Python loads re at start)."""
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    return root


class Machine:
    def __init__(self, tmp: Path, venv: Path, package: Path = REPO):
        self.tmp, self.bin, self.mark = tmp, tmp / "bin", tmp / "script-ran"
        self.bin.mkdir()
        script = self.bin / "subconscious"
        script.write_text(PIP_SCRIPT.format(python=venv / "bin" / "python", mark=str(self.mark)))
        script.chmod(0o755)
        self.local, self.home = tmp / "local", tmp / "shared"
        self.project = tmp / "project"
        self.project.mkdir()
        self.env = {"PATH": f"{self.bin}:/usr/bin:/bin", "HOME": str(tmp / "user"), "PYTHONPATH": str(package),
                    "SUBCONSCIOUS_STATE_DIR": str(self.local), "LETTA_HOME": str(self.home),
                    "SUBCONSCIOUS_HOST": "laptop", "LETTA_BASE_URL": "http://127.0.0.1:9", "LETTA_API_KEY": "k",
                    "CLAUDE_PLUGIN_ROOT": str(REPO)}

    def hook(self, event: str, data: dict, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run(["/bin/sh", str(REPO / "hooks" / "run"), event], input=json.dumps(data),
                              capture_output=True, text=True, timeout=60, cwd=str(self.project),
                              env={**self.env, **env})

    def script_ran(self) -> bool:
        return self.mark.exists()


def imported(stderr: str) -> set[str]:
    return {line.split("|")[-1].strip() for line in stderr.splitlines() if line.startswith("import time:")} - {
        "package"}


def test_in_ttl_pre_tool_use_runs_without_the_script_and_without_json_or_re(tmp_path, venv):
    m = Machine(tmp_path, venv)
    sid = str(uuid.uuid4())
    assert claims.take_fetch(m.local / "shown", sid, 0, int(time.time() * 1000))
    before = claims.state(m.local / "shown", sid)["fetch_ms"]
    baseline = imported(subprocess.run([str(venv / "bin" / "python"), "-P", "-c", "pass"], capture_output=True,
                                       text=True, env={**m.env, "PYTHONPROFILEIMPORTTIME": "1"}).stderr)

    r = m.hook("pre-tool-use", {"session_id": sid, "hook_event_name": "PreToolUse", "cwd": str(m.project),
                                "tool_name": "Read", "tool_input": {"file_path": "/etc/hostname"}},
               SUBCONSCIOUS_FETCH_TTL="3600", PYTHONPROFILEIMPORTTIME="1")

    assert r.returncode == 0 and r.stdout == ""
    assert not m.script_ran()
    extra = imported(r.stderr) - baseline
    assert extra <= {"__future__", "subconscious", "subconscious.hotpath", "subconscious.base", "subconscious.base.fastjson", "_json",
                     "subconscious.hooks", "subconscious.hooks.hotentry", "subconscious.hooks.hotinput"}, sorted(extra)
    assert claims.state(m.local / "shown", sid)["fetch_ms"] == before


def test_stop_hands_over_through_the_entry_and_the_worker_starts(tmp_path, venv):
    """Stop's shortcut through the entry: the session file gets the transcript path, the detached worker runs
    (it logs that it could not reach Letta: nothing listens on port 9), the script never ran."""
    m = Machine(tmp_path, venv)
    sid = str(uuid.uuid4())
    (m.local / "sessions").mkdir(parents=True)
    (m.local / "logs").mkdir()
    (m.home / ".letta" / "claude").mkdir(parents=True)
    (m.local / "sessions" / f"{sid}.json").write_text(json.dumps({"session_id": sid, "home": str(m.home),
                                                                  "start_for": "conv-1"}))
    (m.home / ".letta" / "claude" / f"session-{sid}.json").write_text(json.dumps({"conversationId": "conv-1"}))
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(json.dumps({"type": "user", "uuid": "u1", "message": {"role": "user", "content": "hi"}}) + "\n")

    r = m.hook("stop", {"session_id": sid, "transcript_path": str(transcript), "cwd": str(m.project),
                        "hook_event_name": "Stop", "stop_hook_active": False})

    assert r.returncode == 0 and r.stdout == "" and r.stderr == ""
    assert not m.script_ran()
    assert json.loads((m.local / "sessions" / f"{sid}.json").read_text())["transcript_path"] == str(transcript)
    deadline = time.monotonic() + 30
    log = m.local / "logs"
    while time.monotonic() < deadline and "delivery failed" not in "".join(p.read_text() for p in log.iterdir()):
        time.sleep(0.1)
    assert "delivery failed" in "".join(p.read_text() for p in log.iterdir())


def test_a_projects_json_py_cannot_shadow_the_stdlib(tmp_path, venv):
    """-P: the current directory (Claude Code's project) is not on the path of the hook process."""
    m = Machine(tmp_path, venv)
    (m.project / "json.py").write_text("raise SystemExit('the project json.py was imported')\n")
    (m.project / "_json.py").write_text("raise SystemExit('the project _json.py was imported')\n")
    r = m.hook("pre-tool-use", {"session_id": str(uuid.uuid4()), "hook_event_name": "PreToolUse",
                                "cwd": str(m.project)}, SUBCONSCIOUS_FETCH_TTL="3600")
    assert r.returncode == 0 and "was imported" not in r.stderr + r.stdout


def test_an_install_without_the_entry_runs_its_script(tmp_path, venv):
    """A plugin update meets an older install (no hotpath.launch): the script itself runs the hook."""
    old = tmp_path / "old"
    (old / "subconscious").mkdir(parents=True)
    (old / "subconscious" / "__init__.py").write_text("")
    (old / "subconscious" / "hotpath.py").write_text("")
    (old / "subconscious" / "cli.py").write_text(
        "import sys\ndef main():\n    print('OLD', *sys.argv[1:])\n    return 0\n")
    (tmp_path / "m").mkdir()
    m = Machine(tmp_path / "m", venv, package=old)
    r = m.hook("stop", {"session_id": "x"})
    assert (r.returncode, r.stdout) == (0, "OLD hook stop\n")
    assert m.script_ran()


def test_any_failure_exit_is_non_blocking(tmp_path, venv):
    """Exit 2 would block the prompt or tool call: whatever the entry's process ends with becomes 0 or 1."""
    bad = tmp_path / "bad"
    (bad / "subconscious").mkdir(parents=True)
    (bad / "subconscious" / "__init__.py").write_text("")
    (bad / "subconscious" / "hotpath.py").write_text("def launch(argv):\n    raise SystemExit(2)\n")
    (tmp_path / "m").mkdir()
    m = Machine(tmp_path / "m", venv, package=bad)
    assert m.hook("pre-tool-use", {}).returncode == 1


def test_a_script_whose_first_line_is_not_a_plain_python_runs_as_it_is(tmp_path, venv):
    """``#!/usr/bin/env python3``, a python with arguments: the launcher runs the script itself."""
    m = Machine(tmp_path, venv)
    script = m.bin / "subconscious"
    body = script.read_text().split("\n", 1)[1]
    for first in ("#!/usr/bin/env python3", f"#!{venv / 'bin' / 'python'} -s"):
        m.mark.unlink(missing_ok=True)
        script.write_text(first + "\n" + body)
        r = m.hook("pre-tool-use", {"session_id": str(uuid.uuid4()), "hook_event_name": "PreToolUse"},
                   SUBCONSCIOUS_FETCH_TTL="3600")
        assert r.returncode == 0, (first, r.stderr)
        assert m.script_ran(), first


LONG_FORM = "#!/bin/sh\n'''exec' %s \"$0\" \"$@\"\n' '''\n"


@pytest.mark.parametrize("quoted", [False, True])
def test_pips_long_path_form_runs_the_entry_and_is_passed_over_when_its_python_is_gone(tmp_path, venv, quoted):
    """pip writes LONG_FORM for a python whose path is over 127 bytes (a deep plugin data dir) or has a space
    (then quoted): that python runs the entry; gone, the command is passed over silently (exit 0, nothing on
    stderr) instead of failing with 'not found' on every hook."""
    m = Machine(tmp_path, venv)
    script = m.bin / "subconscious"
    body = script.read_text().split("\n", 1)[1]
    python = venv / "bin" / "python"
    script.write_text(LONG_FORM % (f'"{python}"' if quoted else python) + body)
    data = {"session_id": str(uuid.uuid4()), "hook_event_name": "PreToolUse"}
    r = m.hook("pre-tool-use", data, SUBCONSCIOUS_FETCH_TTL="3600")
    assert (r.returncode, r.stderr) == (0, "") and not m.script_ran()
    script.write_text(LONG_FORM % (tmp_path / "gone" / "python") + body)
    pipx = Path(m.env["HOME"]) / ".local" / "bin" / "subconscious"  # the next command the launcher looks for
    pipx.parent.mkdir(parents=True)
    pipx.write_text('#!/bin/sh\necho "PIPX $*"\n')
    pipx.chmod(0o755)
    r = m.hook("pre-tool-use", data, SUBCONSCIOUS_FETCH_TTL="3600")
    assert (r.returncode, r.stdout, r.stderr) == (0, "PIPX hook pre-tool-use\n", ""), r.stderr


# ---------------------------------------------------------------- the settings-file form (subconscious install)


def settings_hook(m: Machine, shell: str, event: str, data: dict, **env: str) -> subprocess.CompletedProcess:
    """The command install writes into a settings file, run the way Claude Code runs a command string."""
    from subconscious.local.settingsfile import SETTINGS_COMMAND

    return subprocess.run([shell, "-c", SETTINGS_COMMAND.format(event=event)], input=json.dumps(data),
                          capture_output=True, text=True, timeout=60, cwd=str(m.project), env={**m.env, **env})


SHELLS = [s for s in ("/bin/sh", "/bin/bash", "/usr/bin/zsh", "/bin/zsh") if os.path.exists(s)]


@pytest.mark.parametrize("shell", SHELLS)
def test_the_settings_form_runs_the_entry_and_falls_back_to_the_script(tmp_path, venv, shell):
    m = Machine(tmp_path, venv)
    sid = str(uuid.uuid4())
    assert claims.take_fetch(m.local / "shown", sid, 0, int(time.time() * 1000))
    data = {"session_id": sid, "hook_event_name": "PreToolUse", "cwd": str(m.project)}
    r = settings_hook(m, shell, "pre-tool-use", data, SUBCONSCIOUS_FETCH_TTL="3600")
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "") and not m.script_ran()
    # a script whose first line is no plain python (a pyenv shim, env): the script itself
    script = m.bin / "subconscious"
    script.write_text("#!/usr/bin/env python3\n" + script.read_text().split("\n", 1)[1])
    r = settings_hook(m, shell, "pre-tool-use", data, SUBCONSCIOUS_FETCH_TTL="3600")
    assert r.returncode == 0 and m.script_ran(), r.stderr
    # a failing command: never exit 2; no command at all: one line on stderr, exit 0
    script.write_text("#!/bin/sh\nexit 2\n")
    assert settings_hook(m, shell, "pre-tool-use", data).returncode == 1
    script.unlink()
    r = settings_hook(m, shell, "pre-tool-use", data)
    assert r.returncode == 0 and "command not found on PATH" in r.stderr


def test_a_fetch_that_finds_nothing_new_loads_no_json_re_pathlib_socket_or_typing(tmp_path, venv, letta):  # noqa: F811
    """The fetching hooks' shortcut (subconscious.hooks.fetch_shortcut) through the entry: one request over ``_socket``,
    its claims and safety-net files through fastjson and os.path — each of those modules would cost it
    milliseconds of imports on every prompt."""
    from tests.unit.test_hot_fetch import fetches, started

    s, conv = started(tmp_path, letta)
    (tmp_path / "m").mkdir()
    m = Machine(tmp_path / "m", venv)
    env = {**s.env, "PATH": m.env["PATH"], "PYTHONPATH": str(REPO), "CLAUDE_PLUGIN_ROOT": str(REPO)}
    baseline = imported(subprocess.run([str(venv / "bin" / "python"), "-P", "-c", "pass"], capture_output=True,
                                       text=True, env={**env, "PYTHONPROFILEIMPORTTIME": "1"}).stderr)
    for event, limit in (("user-prompt-submit", 100), ("pre-tool-use", 50)):
        before = fetches(letta, limit)
        r = subprocess.run(["/bin/sh", str(REPO / "hooks" / "run"), event], input=json.dumps(s.data(event)),
                           capture_output=True, text=True, timeout=60, cwd=str(s.project),
                           env={**env, "PYTHONPROFILEIMPORTTIME": "1"})
        assert r.returncode == 0 and r.stdout == "", r.stderr[-2000:]
        assert fetches(letta, limit) == before + 1, event  # it did fetch: one page
        extra = imported(r.stderr) - baseline
        assert "subconscious.hooks.fetch_shortcut" in extra and "subconscious.hooks.run" not in extra, sorted(extra)
        heavy = extra & {"json", "re", "pathlib", "socket", "typing", "contextlib", "secrets", "enum", "selectors",
                         "urllib.parse", "logging", "dataclasses"}
        assert not heavy, (event, sorted(heavy))
    assert not m.script_ran()


def test_a_wrapper_of_your_own_with_a_python_first_line_runs_as_it_is(tmp_path, venv):
    """Only pip's (and uv's) script is skipped: a script that is something else — a wrapper setting its own
    environment, a test double — runs itself, through the launcher and through the settings-file form."""
    m = Machine(tmp_path, venv)
    (m.bin / "subconscious").write_text(f"#!{venv / 'bin' / 'python'}\nimport sys\nopen({str(m.mark)!r}, 'a')"
                                        ".write('wrapper ran')\nprint('WRAPPER', *sys.argv[1:])\n")
    data = {"session_id": str(uuid.uuid4()), "hook_event_name": "PreToolUse"}
    r = m.hook("pre-tool-use", data)
    assert (r.returncode, r.stdout) == (0, "WRAPPER hook pre-tool-use\n") and m.script_ran()
    m.mark.unlink()
    r = settings_hook(m, "/bin/sh", "pre-tool-use", data)
    assert (r.returncode, r.stdout) == (0, "WRAPPER hook pre-tool-use\n") and m.script_ran()


UV_SCRIPT = """#!{python}
# -*- coding: utf-8 -*-
import sys
open({mark!r}, "a").write("script ran\\n")
from subconscious.cli import main
if __name__ == "__main__":
    if sys.argv[0].endswith("-script.pyw"):
        sys.argv[0] = sys.argv[0][:-11]
    elif sys.argv[0].endswith(".exe"):
        sys.argv[0] = sys.argv[0][:-4]
    sys.exit(main())
"""


def test_uvs_script_is_recognised_too(tmp_path, venv):
    m = Machine(tmp_path, venv)
    (m.bin / "subconscious").write_text(UV_SCRIPT.format(python=venv / "bin" / "python", mark=str(m.mark)))
    sid = str(uuid.uuid4())
    assert claims.take_fetch(m.local / "shown", sid, 0, int(time.time() * 1000))
    r = m.hook("pre-tool-use", {"session_id": sid, "hook_event_name": "PreToolUse"}, SUBCONSCIOUS_FETCH_TTL="3600")
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "") and not m.script_ran()


def test_the_launcher_and_the_settings_form_give_python_the_same_entry():
    """hooks/run is shell, so it spells the entry program out: it must be the one install writes."""
    from subconscious.local.settingsfile import HOOK_ENTRY, SETTINGS_COMMAND

    assert " -c '" + HOOK_ENTRY + "' \"$want\" " in (REPO / "hooks" / "run").read_text()
    assert " -c '" + HOOK_ENTRY + "' '' " in SETTINGS_COMMAND.format(event="stop")
