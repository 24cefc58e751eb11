"""What the form of a hooks.json entry costs, measured by the real Claude Code CLI.

    python -m benchmarks.hooks_json_forms [ROUNDS]

Each round runs ``claude -p`` once per form (paired: the forms take turns) with a prompt that makes ten
Read calls, so ten PreToolUse hooks per run, and reads the time Claude Code itself recorded for each hook
run (``durationMs`` of the transcript's hook attachments). Forms:

- ``shell wrapper``: the old entry, a ``-c`` string testing ``command -v subconscious`` on every call;
  Claude Code runs it with the user's ``$SHELL`` (bash, zsh...; /bin/sh when unset): the runs set
  ``SHELL=/bin/bash``, as a typical login has it;
- ``exec launcher``: the entry hooks/hooks.json has now, ``/bin/sh ${CLAUDE_PLUGIN_ROOT}/hooks/run <event>``
  in exec form (no bash, no ``-c`` string);
- ``exec direct``: ``subconscious hook <event>`` in exec form, the floor: not usable (no "not installed"
  line, an exit 2 would block the tool call).

The command is ``/bin/echo`` named ``subconscious``: what the form adds, nothing else (and it prints, which
Claude Code needs to record a hook run's time in the transcript; the real hook is measured by hooks_bench.py).
Prints each form's median and the launcher's difference to the wrapper, paired by round; then the same
forms spawned directly from Python (no Claude Code), paired, 300 times each: what the form itself costs.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.harness.claude_code import BASE_PATH, REPO_ROOT, ClaudeSandbox, ensure_claude_code
from tests.harness.fake_anthropic import FakeAnthropic

EVENTS = {"SessionStart": "session-start", "UserPromptSubmit": "user-prompt-submit", "PreToolUse": "pre-tool-use",
          "Stop": "stop"}
TIMEOUTS = {"SessionStart": 15, "UserPromptSubmit": 10, "PreToolUse": 5, "Stop": 120}
WRAPPER = ("if command -v subconscious >/dev/null 2>&1; then subconscious hook {ev} || exit 1; "
           "elif [ -x \"$HOME/.local/bin/subconscious\" ]; then \"$HOME/.local/bin/subconscious\" hook {ev} || exit 1; "
           "else echo 'subconscious: command not found on PATH or in ~/.local/bin, so this hook did nothing. "
           "Install it with: pip install subconscious (or: pipx install subconscious)' >&2; fi; exit 0")


def handler(form: str, ev: str, event: str) -> dict:
    if form == "shell wrapper":
        h = {"type": "command", "command": WRAPPER.format(ev=ev)}
    elif form == "exec launcher":
        h = {"type": "command", "command": "/bin/sh", "args": ["${CLAUDE_PLUGIN_ROOT}/hooks/run", ev]}
    else:
        h = {"type": "command", "command": "subconscious", "args": ["hook", ev]}
    return {**h, "timeout": TIMEOUTS[event]}


def plugin_dir(root: Path, form: str) -> Path:
    d = root / form.replace(" ", "-")
    (d / "hooks").mkdir(parents=True)
    shutil.copytree(REPO_ROOT / ".claude-plugin", d / ".claude-plugin")
    plugin = json.loads((d / ".claude-plugin" / "plugin.json").read_text())
    plugin.pop("mcpServers", None)  # hooks only
    (d / ".claude-plugin" / "plugin.json").write_text(json.dumps(plugin))
    shutil.copy(REPO_ROOT / "hooks" / "run", d / "hooks" / "run")
    hooks = {event: [{**({"matcher": "*"} if event == "PreToolUse" else {}), "hooks": [handler(form, ev, event)]}]
             for event, ev in EVENTS.items()}
    (d / "hooks" / "hooks.json").write_text(json.dumps({"hooks": hooks}, indent=2))
    return d


def pre_tool_durations(run) -> list[int]:
    return [a["durationMs"] for a in run.hook_attachments()
            if a.get("hookEvent") == "PreToolUse" and "durationMs" in a]


def main(argv: list[str]) -> int:
    rounds = int(next((a for a in argv if a.isdigit()), "5"))
    claude = ensure_claude_code()
    forms = ("shell wrapper", "exec launcher", "exec direct")
    with FakeAnthropic() as fake, tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        bindir = root / "bin"
        bindir.mkdir()
        (bindir / "subconscious").symlink_to(shutil.which("echo"))  # prints, so Claude Code records the run
        dirs = {f: plugin_dir(root / "plugins", f) for f in forms}
        sb = ClaudeSandbox(root / "sb", claude, fake, plugin_dirs=())
        files = []
        for i in range(10):
            f = sb.project_dir / ("f%d.txt" % i)
            f.write_text("x\n")
            files.append(f)
        prompt = " ".join("[[tool:Read %s]]" % f for f in files) + " [[text:done]] read them"
        env = {"SUBCONSCIOUS_STATE_DIR": str(root / "state"), "LETTA_HOME": str(root / "home"), "SHELL": "/bin/bash"}
        per_form: dict[str, list[int]] = {f: [] for f in forms}
        paired: list[float] = []
        for r in range(rounds + 1):
            medians = {}
            for form in forms if r % 2 else reversed(forms):
                run = sb.run(prompt, path="%s:%s" % (bindir, BASE_PATH), plugin_dirs=(dirs[form],),
                             env=env, allowed_tools=("Read",))
                assert run.returncode == 0, run.describe()
                d = pre_tool_durations(run)
                assert len(d) == 10, (form, d, run.describe())
                medians[form] = statistics.median(d)
                if r:  # round 0 warms caches
                    per_form[form].extend(d)
            if r:
                paired.append(medians["shell wrapper"] - medians["exec launcher"])
        print("PreToolUse as Claude Code timed it (durationMs), %d runs x 10 calls per form, command: /bin/echo"
              % rounds)
        for form in forms:
            d = per_form[form]
            print("  %-14s median %5.1f ms   p90 %5.1f ms" % (form, statistics.median(d),
                                                            statistics.quantiles(d, n=10)[-1]))
        print("  shell wrapper - exec launcher, paired by run: median %+.1f ms" % statistics.median(paired))
        spawned(bindir, dirs["exec launcher"])
    return 0


def spawned(bindir: Path, plugin: Path, n: int = 300) -> None:
    env = {"PATH": "%s:%s" % (bindir, BASE_PATH), "HOME": str(plugin), "CLAUDE_PLUGIN_ROOT": str(plugin)}
    argv = {"bash -c wrapper": ["/bin/bash", "-c", WRAPPER.format(ev="pre-tool-use")],
            "sh -c wrapper": ["/bin/sh", "-c", WRAPPER.format(ev="pre-tool-use")],
            "exec launcher": ["/bin/sh", str(plugin / "hooks" / "run"), "pre-tool-use"],
            "exec direct": [str(bindir / "subconscious"), "hook", "pre-tool-use"]}
    times: dict[str, list[float]] = {k: [] for k in argv}
    for _ in range(n):
        for k, a in argv.items():
            t0 = time.perf_counter()
            subprocess.run(a, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
            times[k].append((time.perf_counter() - t0) * 1000)
    print("The same forms spawned from Python, %d times each, paired:" % n)
    for k, v in times.items():
        print("  %-16s median %5.2f ms" % (k, statistics.median(v)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
