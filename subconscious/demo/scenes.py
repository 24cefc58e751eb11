"""The demo's two scenes: machines behind a (simulated) Syncthing/Dropbox, and real git clones."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from ..state.copynames import Engine
from .replicas import Network

PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])
STATE = Path(".letta") / "claude"


@dataclass
class Counts:
    written: set[str] = field(default_factory=set)
    present: dict[str, set[str]] = field(default_factory=dict)  # machine → live sessions in its view
    identical: bool = True

    @property
    def lost(self) -> set[str]:
        missing: set[str] = set()
        for keys in self.present.values():
            missing |= self.written - keys
        return missing

    def line(self) -> str:
        present = sorted({len(k) for k in self.present.values()})
        shown = "/".join(map(str, present)) if present else "0"
        every = " on every machine" if len(self.present) > 1 and len(present) == 1 else ""
        return f"entries written {len(self.written)}, entries present {shown}{every}, lost {len(self.lost)}"


class Machine:
    def __init__(self, name: str, letta_home: Path, local: Path):
        self.name, self.letta_home, self.local = name, letta_home, local

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_"))}
        env.update(LETTA_HOME=str(self.letta_home), SUBCONSCIOUS_HOST=self.name, SUBCONSCIOUS_STATE_DIR=str(self.local))
        path = env.get("PYTHONPATH")
        env["PYTHONPATH"] = PACKAGE_PARENT + (os.pathsep + path if path else "")
        return env

    @property
    def home(self) -> Path:
        return self.letta_home / STATE

    def start(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "subconscious.demo.machine", *args], env=self.env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=self.letta_home)

    def live_sessions(self) -> set[str]:
        from ..state.store.core import Store

        store = Store(self.home, self.name, self.local / "locks", self.local / "clocks", read_only=True)
        return set(store.read().live)

    def doctor(self, fix: bool = False) -> tuple[int, str]:
        """``subconscious doctor [--fix]`` run on this machine as a user runs it (the verb is reached by its
        name: the demo sits below the commands)."""
        p = subprocess.run([sys.executable, "-m", "subconscious", "doctor", *(["--fix"] if fix else [])],
                           env={**self.env(), "COLUMNS": os.environ.get("COLUMNS", "100")}, cwd=self.letta_home,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
        return p.returncode, p.stdout


def run_all(procs: list[subprocess.Popen], timeout: float = 120.0) -> list[dict]:
    results = []
    deadline = time.monotonic() + timeout
    try:
        for p in procs:
            stdout, stderr = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
            if p.returncode != 0:
                raise RuntimeError(f"a simulated machine failed ({p.returncode}): {stderr.strip()[-800:]}")
            results.append(json.loads(stdout.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return results


def after_fix(text: str) -> str:
    """doctor --fix's output from "fixed:" on (the "before" part repeats the report just shown)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("fixed")), 0)
    return "\n".join(lines[start:])


def indent(text: str, pad: str = "   ") -> str:
    return "\n".join(pad + line if line else line for line in text.rstrip("\n").splitlines())


# --------------------------------------------------------------------------- scene 1: sync engines


def sync_scene(ws: Path, say: Callable[[str], None], *, sessions: int = 4, windows: int = 2) -> Counts:
    names = ["laptop", "desktop", "server"]
    machines = {n: Machine(n, ws / "replicas" / n, ws / "local" / n) for n in names}
    for m in machines.values():
        m.letta_home.mkdir(parents=True, mode=0o700)
    net = Network({n: m.letta_home for n, m in machines.items()})
    net.connect("laptop", "desktop", Engine.SYNCTHING)
    net.connect("laptop", "server", Engine.DROPBOX)
    counts = Counts()

    say("1. Three machines share one state dir: laptop <-> desktop by Syncthing, laptop <-> server by Dropbox.")
    first = run_all([machines["laptop"].start("--prefix", "shared", "--sessions", "1")])
    counts.written |= set(first[0]["written"])
    net.sync_all()
    shared = first[0]["written"][0]
    say(f"   laptop started session {shared}; it reached every machine.")

    net.cut()
    t0 = time.monotonic()
    procs = []
    for i, (name, m) in enumerate(machines.items()):
        for w in range(windows):
            extra = ["--resume", shared, "--cursor-base", str(10 * (i + 1))] if w == 0 else []
            procs.append(m.start("--prefix", f"{name}-w{w}", "--sessions", str(sessions), *extra))
    results = run_all(procs)
    took = time.monotonic() - t0
    for r in results:
        counts.written |= set(r["written"])
    wanted_cursor = max(r["cursors"].get(shared, -1) for r in results)
    say(f"2. Sync cut. {len(procs)} Claude Code windows ({windows} per machine) ran at once: "
        f"{sum(len(r['written']) for r in results)} new sessions, and {shared} continued on every machine "
        f"({took:.1f} s).")

    net.restore()
    made = net.sync_all()
    say(f"3. Sync restored. The engines found files changed on both sides and left {len(made)} conflict copies:")
    for copy in sorted(set(made)):
        say(f"     {copy}")

    code, text = machines["laptop"].doctor()
    say(f"4. subconscious doctor on laptop (exit {code}):")
    say(indent(text))
    code, text = machines["laptop"].doctor(fix=True)
    say(f"5. subconscious doctor --fix on laptop (exit {code}):")
    say(indent(after_fix(text)))

    net.sync_all()
    say("6. Sync carries laptop's repair to the others; doctor on each machine:")
    for name in ("desktop", "server"):
        code, text = machines[name].doctor()
        say(f"   {name}: exit {code}, {text.strip().splitlines()[-1]}")
    for name, m in machines.items():
        counts.present[name] = m.live_sessions()
    counts.identical = net.identical()
    from ..state.store.core import Store

    cursor = {}
    for name, m in machines.items():
        state = Store(m.home, name, m.local / "locks", m.local / "clocks", read_only=True).session(shared)
        cursor[name] = state.last_processed_index if state else None
    same_cursor = set(cursor.values()) == {wanted_cursor}
    say(f"   {counts.line()}; replicas identical: {'yes' if counts.identical else 'NO'}; "
        f"{shared}'s cursor is {wanted_cursor} (the furthest any machine got) everywhere: "
        f"{'yes' if same_cursor else 'NO ' + str(cursor)}")
    if not same_cursor:
        counts.identical = False
    return counts


# --------------------------------------------------------------------------- scene 2: git


@contextlib.contextmanager
def isolated_git(ws: Path) -> Iterator[dict[str, str]]:
    """git with a config of our own: the user's ~/.gitconfig (hooks, signing, drivers) stays out."""
    cfg = ws / "gitconfig"
    cfg.write_text("[init]\n\tdefaultBranch = main\n[commit]\n\tgpgsign = false\n[advice]\n\tdetachedHead = false\n"
                   "[user]\n\tname = subconscious demo\n\temail = demo@example.invalid\n[core]\n\tautocrlf = false\n")
    saved = dict(os.environ)
    for k in [k for k in os.environ if k.startswith("GIT_")]:
        del os.environ[k]
    os.environ.update(GIT_CONFIG_GLOBAL=str(cfg), GIT_CONFIG_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0",
                      GIT_EDITOR="true", LC_ALL="C")
    try:
        yield dict(os.environ)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if check and r.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {r.stderr.strip() or r.stdout.strip()}")
    return r


def git_scene(ws: Path, say: Callable[[str], None], *, sessions: int = 3) -> Counts | None:
    if shutil.which("git") is None:
        say("git: not installed, scene skipped")
        return None
    from ..sync.gitsetup import setup, setup_config

    counts = Counts()
    command = f"{sys.executable} -m subconscious merge-driver %O %A %B %P"
    base = ws / "git"
    base.mkdir()
    with isolated_git(ws):
        _git(base, "init", "-q", "--bare", "-b", "main", "remote.git")
        clones = {}
        for name in ("laptop", "desktop", "server"):
            path = base / name
            _git(base, "clone", "-q", "remote.git", name)
            clones[name] = Machine(f"{name}-git", path, ws / "local" / f"{name}-git")
        lap = clones["laptop"]
        setup(lap.letta_home, lap.home, command)
        _git(lap.letta_home, "add", "-A")
        _git(lap.letta_home, "commit", "-q", "-m", "subconscious sync kit")
        _git(lap.letta_home, "push", "-q", "origin", "HEAD:main")
        for name in ("desktop", "server"):
            _git(clones[name].letta_home, "pull", "-q", "origin", "main")
        setup_config(clones["desktop"].letta_home, command)
        say("7. git: a bare remote and three clones; laptop and desktop ran `subconscious sync setup-git`, "
            "server did not.")
        results = run_all([m.start("--prefix", f"{n}-git", "--sessions", str(sessions)) for n, m in clones.items()])
        for r in results:
            counts.written |= set(r["written"])
        for m in clones.values():
            _git(m.letta_home, "add", "-A")
            _git(m.letta_home, "commit", "-q", "-m", f"sessions on {m.name}")
        _git(lap.letta_home, "push", "-q", "origin", "HEAD:main")
        desk = clones["desktop"]
        r = _git(desk.letta_home, "pull", "-q", "--rebase", "origin", "main", check=False)
        say(f"   desktop: git pull --rebase -> {'merged by the driver, no conflict' if r.returncode == 0 else 'FAILED'}")
        if r.returncode != 0:
            raise RuntimeError(f"git pull --rebase with the driver failed: {r.stderr.strip()}")
        _git(desk.letta_home, "push", "-q", "origin", "HEAD:main")
        srv = clones["server"]
        r = _git(srv.letta_home, "pull", "-q", "--rebase", "origin", "main", check=False)
        state = "stopped with CONFLICT (conflict markers in our JSON)" if r.returncode else "merged"
        say(f"   server (no driver): git pull --rebase -> {state}")
        code, text = srv.doctor()
        say(f"   subconscious doctor on server (exit {code}):")
        say(indent(text, "     "))
        code, text = srv.doctor(fix=True)
        say(f"   subconscious doctor --fix on server (exit {code}; git itself still waits for `git add`):")
        say(indent(after_fix(text), "     "))
        if r.returncode:
            _git(srv.letta_home, "add", "-A")
            _git(srv.letta_home, "-c", "core.editor=true", "rebase", "--continue")
        _git(srv.letta_home, "push", "-q", "origin", "HEAD:main")
        for m in (lap, desk):
            _git(m.letta_home, "pull", "-q", "--rebase", "origin", "main")
        code, text = srv.doctor()
        say(f"   after `git add` + `git rebase --continue`, push and pull everywhere: doctor on server exit {code}, "
            f"{text.strip().splitlines()[-1]}")
        for name, m in clones.items():
            counts.present[name] = m.live_sessions()
        heads = {_git(m.letta_home, "rev-parse", "HEAD").stdout.strip() for m in clones.values()}
        counts.identical = len(heads) == 1
        say(f"   {counts.line()}; clones at the same commit: {'yes' if counts.identical else 'NO'}")
    return counts
