"""The real Claude Code CLI as a test client: install it once, run ``claude -p`` isolated.

Install: ``ensure_claude_code()`` puts ``@anthropic-ai/claude-code@<pin>`` from the npm registry
under ``~/.cache/subconscious-tests/claude-code-<version>`` (``$SUBCONSCIOUS_TEST_CACHE`` moves
the cache root), outside the clone, once per pin (a file lock keeps parallel workers from
installing twice). Releases after 2.1.112 ship a native program through an optional npm
package; the package's postinstall (``install.cjs``) swaps the placeholder ``bin/claude.exe``
for it. If npm skipped that script, we run it ourselves; a CLI that still does not start is a
hard failure with the reason, never a skip.

Run: :class:`ClaudeSandbox` gives each test its own HOME, CLAUDE_CONFIG_DIR, TMPDIR and project
directory, starts nothing but the CLI (env -i style: only the variables listed here plus what
the test passes), points ``ANTHROPIC_BASE_URL`` at a :class:`FakeAnthropic`, loads this repo
as a plugin with ``--plugin-dir`` and returns a :class:`ClaudeRun` with the output, the
transcript path and the API requests of that run.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from tests.harness.fake_anthropic import FakeAnthropic, RecordedRequest

__all__ = [
    "CLAUDE_CODE_VERSION", "REPO_ROOT", "ClaudeCode", "ClaudeRun", "ClaudeSandbox",
    "ClaudeCodeUnavailable", "cache_root", "ensure_claude_code", "write_recording_double",
    "read_recordings",
]

#: Pinned CLI release, verified on this machine (Node 20, native binary via optional package).
CLAUDE_CODE_VERSION = os.environ.get("SUBCONSCIOUS_TEST_CLAUDE_VERSION", "2.1.332")
REPO_ROOT = Path(__file__).resolve().parents[2]
#: A PATH without the developer's tool directories (pyenv shims, pipx, ...).
BASE_PATH = "/usr/local/bin:/usr/bin:/bin"


class ClaudeCodeUnavailable(RuntimeError):
    """The CLI could not be installed or does not start; the message says why."""


def cache_root() -> Path:
    root = os.environ.get("SUBCONSCIOUS_TEST_CACHE")
    return Path(root).expanduser() if root else Path.home() / ".cache" / "subconscious-tests"


@dataclass(frozen=True)
class ClaudeCode:
    """An installed CLI."""

    version: str
    prefix: Path          # npm prefix holding node_modules/
    bin: Path             # the ``claude`` executable
    install_seconds: float | None = None  # set when this call installed it

    def run_plain(self, *args: str, env: Mapping[str, str] | None = None,
                  cwd: Path | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
        """Run ``claude ARGS`` (e.g. ``plugin validate DIR``) with a minimal environment."""
        return subprocess.run([str(self.bin), *args], env=dict(env or _minimal_env(Path(cwd or "."))),
                              cwd=cwd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def _minimal_env(home: Path) -> dict[str, str]:
    return {"PATH": BASE_PATH, "HOME": str(home), "LANG": "C.UTF-8",
            "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}


def _version_ok(bin_path: Path, version: str) -> tuple[bool, str]:
    try:
        p = subprocess.run([str(bin_path), "--version"], capture_output=True, text=True, timeout=60,
                           env=_minimal_env(Path("/tmp")), stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, "%s: %s" % (type(e).__name__, e)
    out = (p.stdout + p.stderr).strip()
    return p.returncode == 0 and version in out, out[-500:]


def ensure_claude_code(version: str = CLAUDE_CODE_VERSION) -> ClaudeCode:
    """Install (once) and return the pinned Claude Code CLI; raise ClaudeCodeUnavailable."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    prefix = root / ("claude-code-%s" % version)
    bin_path = prefix / "node_modules" / ".bin" / "claude"
    with open(root / (".claude-code-%s.lock" % version), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (prefix / ".installed").exists() and _version_ok(bin_path, version)[0]:
            return ClaudeCode(version, prefix, bin_path)
        npm = shutil.which("npm")
        if npm is None:
            raise ClaudeCodeUnavailable(
                "npm is not on PATH: install Node.js 20+ and npm (e.g. `apt-get install nodejs npm`) "
                "so the tests can install @anthropic-ai/claude-code@%s" % version)
        t0 = time.monotonic()
        staging = root / ("claude-code-%s.partial-%d" % (version, os.getpid()))
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        (staging / "package.json").write_text('{"name": "claude-code-pin", "private": true}\n')
        p = subprocess.run([npm, "install", "--no-fund", "--no-audit", "--loglevel=error",
                            "@anthropic-ai/claude-code@%s" % version],
                           cwd=staging, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
        if p.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise ClaudeCodeUnavailable("npm install @anthropic-ai/claude-code@%s failed (exit %d):\n%s"
                                        % (version, p.returncode, (p.stdout + p.stderr)[-3000:]))
        staged_bin = staging / "node_modules" / ".bin" / "claude"
        ok, why = _version_ok(staged_bin, version)
        if not ok:
            # Native releases: npm may skip the postinstall that replaces the stub binary.
            pkg = staging / "node_modules" / "@anthropic-ai" / "claude-code"
            if (pkg / "install.cjs").exists():
                q = subprocess.run(["node", "install.cjs"], cwd=pkg, capture_output=True, text=True,
                                   timeout=300, stdin=subprocess.DEVNULL)
                why += "\n[node install.cjs exit %d] %s" % (q.returncode, (q.stdout + q.stderr)[-1500:])
            ok, why2 = _version_ok(staged_bin, version)
            why += "\n" + why2
        if not ok:
            raise ClaudeCodeUnavailable("claude %s installed under %s but `claude --version` fails:\n%s"
                                        % (version, staging, why))
        shutil.rmtree(prefix, ignore_errors=True)
        staging.rename(prefix)
        (prefix / ".installed").write_text(version + "\n")
        return ClaudeCode(version, prefix, bin_path, install_seconds=time.monotonic() - t0)


# --------------------------------------------------------------------------- runs

@dataclass
class ClaudeRun:
    """What one ``claude -p`` run left behind."""

    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    requests: list[RecordedRequest]       # fake API requests made during this run
    output: Any = None                    # parsed --output-format json / stream-json events
    session_id: str | None = None
    transcript_path: Path | None = None

    @property
    def result(self) -> str | None:
        """The final answer text (json output format)."""
        if isinstance(self.output, dict):
            return self.output.get("result")
        for ev in self.output or []:
            if isinstance(ev, dict) and ev.get("type") == "result":
                return ev.get("result")
        return None

    def message_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.is_messages]

    def bodies_text(self) -> str:
        return "\n".join(r.body_text() for r in self.message_requests())

    def seen_by_model(self, needle: str) -> bool:
        return needle in self.bodies_text()

    def transcript_lines(self) -> list[str]:
        if self.transcript_path is None or not self.transcript_path.exists():
            return []
        return self.transcript_path.read_text(encoding="utf-8").splitlines()

    def transcript_entries(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.transcript_lines() if line.strip()]

    def hook_attachments(self) -> list[dict[str, Any]]:
        """The transcript's records of hook runs (hook_success, hook_non_blocking_error, ...)."""
        return [e["attachment"] for e in self.transcript_entries()
                if e.get("type") == "attachment" and str(e.get("attachment", {}).get("type", "")).startswith("hook")]

    def describe(self) -> str:
        """A short dump for assertion messages."""
        return "argv=%s\nexit=%s\nstdout=%s\nstderr=%s" % (self.argv, self.returncode,
                                                           self.stdout[-2000:], self.stderr[-2000:])


@dataclass
class ClaudeSandbox:
    """An isolated place to run the CLI: own HOME, config dir, TMPDIR and project dir."""

    root: Path
    claude: ClaudeCode
    fake: FakeAnthropic
    plugin_dirs: Sequence[Path] = (REPO_ROOT,)
    env: dict[str, str] = field(default_factory=dict)   # extra env for every run

    def __post_init__(self) -> None:
        self.root = Path(self.root)
        for d in (self.home, self.config_dir, self.tmp_dir, self.project_dir, self.bin_dir):
            d.mkdir(parents=True, exist_ok=True)

    home = property(lambda self: self.root / "home")
    config_dir = property(lambda self: self.root / "config")
    tmp_dir = property(lambda self: self.root / "tmp")
    project_dir = property(lambda self: self.root / "project")
    bin_dir = property(lambda self: self.root / "bin")  # first on PATH; put test doubles here

    def base_env(self, path: str | None = None) -> dict[str, str]:
        env = _minimal_env(self.home)
        env.update({
            "PATH": path if path is not None else "%s:%s" % (self.bin_dir, BASE_PATH),
            "CLAUDE_CONFIG_DIR": str(self.config_dir),
            "TMPDIR": str(self.tmp_dir),
            "ANTHROPIC_BASE_URL": self.fake.base_url,
            "ANTHROPIC_API_KEY": "fake-key-for-local-test-server",
        })
        return env

    def path_with_subconscious(self) -> str:
        """A PATH for runs that should reach the real ``subconscious`` installed in this
        interpreter's scripts dir (``pip install -e .``); raises if it is not there."""
        import sysconfig
        scripts = sysconfig.get_path("scripts")
        if not (Path(scripts) / "subconscious").exists():
            raise FileNotFoundError("no `subconscious` in %s: run `pip install -e .` first" % scripts)
        return "%s:%s:%s" % (self.bin_dir, scripts, BASE_PATH)

    def command(self, *args: str, env: Mapping[str, str] | None = None,
                timeout: float = 60) -> subprocess.CompletedProcess:
        """Run another ``claude`` subcommand (``plugin install ...``) in this sandbox."""
        run_env = self.base_env()
        run_env.update(self.env)
        run_env.update(env or {})
        return subprocess.run([str(self.claude.bin), *args], cwd=str(self.project_dir), env=run_env,
                              capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    def transcript_path_for(self, session_id: str, cwd: Path | None = None) -> Path:
        cwd = Path(cwd or self.project_dir)
        return self.config_dir / "projects" / str(cwd).replace("/", "-").replace(".", "-") / (session_id + ".jsonl")

    def run(self, prompt: str, *, resume: str | None = None, continue_session: bool = False,
            env: Mapping[str, str] | None = None, path: str | None = None,
            extra_args: Iterable[str] = (), allowed_tools: Sequence[str] = (),
            skip_permissions: bool = False, output_format: str = "json",
            plugin_dirs: Sequence[Path] | None = None, settings: Mapping[str, Any] | None = None,
            cwd: Path | None = None, timeout: float = 120) -> ClaudeRun:
        """Run ``claude -p PROMPT`` once and wait for it.

        ``env`` adds/overrides variables (LETTA_*, SUBCONSCIOUS_* ...); ``path`` replaces the
        whole PATH (default: the sandbox ``bin/`` then /usr/local/bin:/usr/bin:/bin).
        ``resume`` passes ``--resume ID``; ``settings`` is written to a file for ``--settings``.
        """
        argv = [str(self.claude.bin), "-p", prompt, "--output-format", output_format]
        if output_format == "stream-json":
            argv += ["--verbose", "--include-hook-events"]
        if resume:
            argv += ["--resume", resume]
        if continue_session:
            argv += ["--continue"]
        for d in (self.plugin_dirs if plugin_dirs is None else plugin_dirs):
            argv += ["--plugin-dir", str(d)]
        if allowed_tools:
            argv += ["--allowedTools", ",".join(allowed_tools)]
        if settings is not None:
            sfile = self.root / ("settings-%d.json" % time.monotonic_ns())
            sfile.write_text(json.dumps(settings))
            argv += ["--settings", str(sfile)]
        run_env = self.base_env(path)
        if skip_permissions:
            argv += ["--dangerously-skip-permissions"]
            run_env["IS_SANDBOX"] = "1"  # needed as root
        argv += list(extra_args)
        run_env.update(self.env)
        run_env.update(env or {})

        first = len(self.fake.requests)
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, cwd=str(cwd or self.project_dir), env=run_env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err = proc.communicate()
            err += "\n[harness] claude -p killed after %ss" % timeout
        seconds = time.monotonic() - t0
        run = ClaudeRun(argv=argv, returncode=proc.returncode, stdout=out, stderr=err,
                        seconds=seconds, requests=self.fake.requests[first:])
        run.output = _parse_output(out, output_format)
        if isinstance(run.output, dict):
            run.session_id = run.output.get("session_id")
        elif isinstance(run.output, list):
            run.session_id = next((e.get("session_id") for e in run.output
                                   if isinstance(e, dict) and e.get("session_id")), None)
        if run.session_id:
            tp = self.transcript_path_for(run.session_id, cwd)
            if not tp.exists():  # the CLI's own naming may differ; find it by session id
                tp = next(self.config_dir.glob("projects/*/%s.jsonl" % run.session_id), tp)
            run.transcript_path = tp
        return run


def _kill_group(proc: subprocess.Popen) -> None:
    """Stop the CLI we started (its own process group, by its recorded PID)."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=5)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _parse_output(out: str, fmt: str) -> Any:
    if fmt == "json":
        try:
            return json.loads(out)
        except ValueError:
            return None
    if fmt == "stream-json":
        events = []
        for line in out.splitlines():
            try:
                events.append(json.loads(line))
            except ValueError:
                pass
        return events
    return None


# --------------------------------------------------------------------------- recording double

_DOUBLE = '''#!{python}
# Test double named `subconscious`: records how Claude Code invoked it, then answers.
import json, os, sys, time
rec = {record_dir!r}
data = sys.stdin.read()
try:
    stdin = json.loads(data)
except ValueError:
    stdin = {{"_unparsed": data}}
n = len([f for f in os.listdir(rec) if f.endswith(".json")])
event = sys.argv[2] if len(sys.argv) > 2 else ""
entry = {{"argv": sys.argv[1:], "stdin": stdin, "cwd": os.getcwd(), "ts": time.time(),
          "env": {{k: v for k, v in os.environ.items()
                  if k.startswith(("CLAUDE", "LETTA_", "SUBCONSCIOUS_"))}}}}
tp = stdin.get("transcript_path") if isinstance(stdin, dict) else None
if tp and os.path.exists(tp):
    with open(tp, encoding="utf-8") as f:
        entry["transcript_at_hook"] = f.read()
with open(os.path.join(rec, "%03d-%s.json" % (n, event)), "w") as f:
    json.dump(entry, f, indent=2)
if event == "user-prompt-submit":
    print("RECORDED_DOUBLE_PROMPT_CONTEXT for " + str(stdin.get("session_id")))
elif event == "pre-tool-use":
    print(json.dumps({{"hookSpecificOutput": {{"hookEventName": "PreToolUse",
          "additionalContext": "RECORDED_DOUBLE_TOOL_CONTEXT " + str(stdin.get("tool_name"))}}}}))
'''


def write_recording_double(bin_dir: Path, record_dir: Path) -> Path:
    """Put an executable ``subconscious`` in ``bin_dir`` that records each call in ``record_dir``.

    It prints ``RECORDED_DOUBLE_PROMPT_CONTEXT`` on user-prompt-submit and a PreToolUse
    ``additionalContext`` of ``RECORDED_DOUBLE_TOOL_CONTEXT <tool>``, so tests can see its output
    reach the model.
    """
    bin_dir.mkdir(parents=True, exist_ok=True)
    record_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "subconscious"
    script.write_text(_DOUBLE.format(python=sys.executable, record_dir=str(record_dir)))
    script.chmod(0o755)
    return script


def read_recordings(record_dir: Path) -> list[dict[str, Any]]:
    """The double's records of hook calls (``subconscious hook <event>``), in call order. Claude Code also
    starts the plugin's MCP server (``subconscious mcp``) when it loads the plugin: not a hook, left out."""
    records = [json.loads(p.read_text()) for p in sorted(Path(record_dir).glob("*.json"))]
    return [r for r in records if r.get("argv", [None])[:1] != ["mcp"]]


def main(argv: Sequence[str]) -> int:
    """Benchmark: ``python -m tests.harness.claude_code [RUNS]`` prints install and run times."""
    import statistics
    import tempfile

    runs = int(argv[0]) if argv else 5
    t0 = time.monotonic()
    claude = ensure_claude_code()
    took = claude.install_seconds
    print("claude-code %s: %s" % (claude.version, "installed in %.1f s" % took if took is not None
                                  else "already cached (%.2f s to check)" % (time.monotonic() - t0)))
    with FakeAnthropic() as fake, tempfile.TemporaryDirectory() as d:
        for label, plugins, tool in (("plain prompt, no plugin", (), False),
                                     ("Read tool, plugin, no subconscious on PATH", (REPO_ROOT,), True)):
            sb = ClaudeSandbox(Path(d) / label.replace(" ", "_").replace(",", ""), claude, fake, plugin_dirs=plugins)
            (sb.project_dir / "f.txt").write_text("x\n")
            prompt = ("[[tool:Read %s/f.txt]] read it" % sb.project_dir) if tool else "hello"
            times = []
            for _ in range(runs):
                r = sb.run(prompt, path="/usr/bin:/bin")
                assert r.returncode == 0, r.describe()
                times.append(r.seconds)
            print("claude -p (%s): median %.2f s, min %.2f s, max %.2f s over %d runs"
                  % (label, statistics.median(times), min(times), max(times), runs))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
