"""Bash (LETTA_SDK_TOOLS=full only), run inside a bubblewrap sandbox or not at all.

The sandbox (``bwrap``) is an allow-list view, not the host read-only:
- visible: /usr (and the /bin, /lib… links or directories), a few files of /etc (``ETC``), a fresh /proc
  of its own processes, a minimal /dev, and the project directory (writable); nothing else exists —
  no home directory, no /run, /var, /srv, /opt, /mnt, /media, no other /etc files;
- /tmp is an empty tmpfs of ``Limits.sandbox_tmp_bytes`` (HOME is /tmp/home), /dev/shm a small one;
- in the project: every path that runs code later (denied.py: ``.git`` anywhere, ``.claude``, ``.letta``,
  ``.envrc``, ``.vscode``…) is mounted read-only over itself, found with lstat and never followed; at
  the top level the absent ones get an empty read-only mount so they cannot be created; ``.letta``,
  credential-named files and directories, sockets, FIFOs and devices are covered by an empty file or
  directory (unreadable, and a socket cannot be connected to); one created deeper down anyway (say
  ``sub/.git``) is moved aside (``<name>.subconscious-removed-<time>``) when the command ends, and the
  result says so;
- namespaces: no network, no IPC, own PID namespace, own user namespace with further ones disabled;
  every capability dropped (as root too); a new session (no TIOCSTI into the caller's terminal);
- limits (prlimit inside the user namespace, so other processes of the user don't count): address space
  per process, file size, open files, processes, no core dumps; CPU time and the call's timeout;
- output is read in chunks up to the cap, then the whole sandbox is killed (its PID namespace dies with it);
  so is a sandbox with more processes than the limit (root is exempt from RLIMIT_NPROC, so the worker
  counts them itself);
- the environment holds only PATH, HOME, LANG and TERM; stdin is empty.

Without bwrap and prlimit (macOS, Windows, Linux without the ``bubblewrap`` package) Bash is refused with
an error, never run unconfined.
"""
from __future__ import annotations

import glob
import os
import select
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

from .confine import SECRET_DIRS, Root, ToolError, ToolTimeout
from .denied import RUNS_LATER_DIRS, RUNS_LATER_FILES, fold, is_masked_name, secret_name, unreachable
from .limits import Limits
from .readers import _str

__all__ = ["bash", "sandbox_available", "sandbox_argv", "scan_project", "Scan"]

MAX_COMMAND_CHARS = 8000
# read-only system directories (a link such as /bin -> usr/bin is recreated as the same link)
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# what of /etc programs need to start and behave: no shadow, no ssh/ssl private keys, no host config
ETC = ("alternatives", "passwd", "group", "nsswitch.conf", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
       "localtime", "timezone", "hosts", "host.conf", "mime.types", "ssl/certs", "ca-certificates",
       "ca-certificates.conf", "magic", "magic.mime", "terminfo", "os-release", "debian_version", "inputrc",
       "protocols", "services", "locale.alias", "papersize", "perl", "python3", "bash.bashrc", "environment")
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
_SECRET_DIRS = frozenset(d.lower() for d in SECRET_DIRS)
_POLL = 0.02


def _tool(name: str) -> str | None:
    return shutil.which(name) if os.name == "posix" else None


def sandbox_available() -> bool:
    return _tool("bwrap") is not None and os.path.exists("/usr/bin/prlimit")


# ---------------------------------------------------------------------------------------------- the project


@dataclass
class Scan:
    """What the sandbox must mask in the project, found with lstat (links never followed)."""
    ro: list[str] = field(default_factory=list)         # mounted read-only over themselves
    hide_dirs: list[str] = field(default_factory=list)  # covered by an empty read-only directory
    hide_files: list[str] = field(default_factory=list)  # covered by an empty read-only file
    placeholders: list[tuple[str, bool]] = field(default_factory=list)  # absent top-level names: (rel, is_dir)
    seen: dict[str, tuple] = field(default_factory=dict)  # every masked-name entry: rel -> identity


def _identity(st: os.stat_result, link: str | None) -> tuple:
    return (stat.S_IFMT(st.st_mode), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, link)


def _walk(project: str, deadline: float | None):
    """(rel, name, lstat) of every entry below ``project``, not descending into masked names or links."""
    stack = [""]
    while stack:
        d = stack.pop()
        try:
            with os.scandir(os.path.join(project, d) if d else project) as it:
                entries = list(it)
        except OSError:
            continue
        for e in entries:
            if deadline is not None and time.monotonic() > deadline:
                raise ToolError("the project is too large to check before running Bash within the time limit; "
                                "the command was not run")
            rel = f"{d}/{e.name}" if d else e.name
            try:
                st = os.lstat(os.path.join(project, rel))
            except OSError:
                continue
            yield rel, e.name, st
            if stat.S_ISDIR(st.st_mode) and not is_masked_name(e.name) and fold(e.name) not in _SECRET_DIRS:
                stack.append(rel)


def scan_project(project: str, deadline: float | None = None) -> Scan:
    s = Scan()
    present = set()
    for rel, name, st in _walk(project, deadline):
        mode = st.st_mode
        if "/" not in rel:
            present.add(name)
        masked = is_masked_name(name)
        link = None
        if stat.S_ISLNK(mode):
            try:
                link = os.readlink(os.path.join(project, rel))
            except OSError:
                link = ""
        if masked:
            s.seen[rel] = _identity(st, link)
        if stat.S_ISLNK(mode):
            if masked:  # never bind a link (bwrap would follow it); mask what it points at if that is inside
                real = os.path.realpath(os.path.join(project, rel))
                if real.startswith(project.rstrip("/") + "/") and os.path.lexists(real):
                    rrel = os.path.relpath(real, project)
                    if not unreachable(name):
                        s.ro.append(rrel)
                    else:
                        (s.hide_dirs if os.path.isdir(real) else s.hide_files).append(rrel)
            continue
        if stat.S_ISDIR(mode):
            if unreachable(name) or fold(name) in _SECRET_DIRS:
                s.hide_dirs.append(rel)
            elif masked:
                s.ro.append(rel)
        elif stat.S_ISREG(mode):
            if secret_name(name):
                s.hide_files.append(rel)
            elif masked:
                s.ro.append(rel)
        else:  # sockets (a host service), FIFOs (a host reader), devices
            s.hide_files.append(rel)
    for name in sorted(RUNS_LATER_DIRS | RUNS_LATER_FILES | {".env", "Jenkinsfile"}):
        if name not in present and name != "jenkinsfile":
            s.placeholders.append((name, name in RUNS_LATER_DIRS))
    return s


# ------------------------------------------------------------------------------------------------ bwrap argv


def sandbox_argv(bwrap: str, project: str, scan: Scan, empty_dir: str, empty_file: str, command: str,
                 limits: Limits) -> list[str]:
    argv = [bwrap, "--die-with-parent", "--new-session", "--unshare-all", "--unshare-user", "--disable-userns",
            "--cap-drop", "ALL"]
    for p in SYSTEM:
        if os.path.islink(p):
            argv += ["--symlink", os.readlink(p), p]
        elif os.path.isdir(p):
            argv += ["--ro-bind", p, p]
    for name in ETC:
        p = "/etc/" + name
        if os.path.lexists(p):
            argv += ["--ro-bind-try", p, p]
    for p in sorted(glob.glob("/etc/python3*")):
        argv += ["--ro-bind-try", p, p]
    tmp = str(limits.sandbox_tmp_bytes)
    argv += ["--proc", "/proc", "--dev", "/dev", "--size", str(1024 * 1024), "--tmpfs", "/dev/shm",
             "--remount-ro", "/dev", "--size", tmp, "--tmpfs", "/tmp", "--dir", "/tmp/home",
             "--symlink", "../tmp", "/var/tmp", "--bind", project, project]
    j = lambda rel: os.path.join(project, rel)  # noqa: E731
    for rel in scan.ro:
        argv += ["--ro-bind", j(rel), j(rel)]
    for rel in scan.hide_dirs:
        argv += ["--ro-bind", empty_dir, j(rel)]
    for rel in scan.hide_files:
        argv += ["--ro-bind", empty_file, j(rel)]
    for rel, is_dir in scan.placeholders:
        argv += ["--ro-bind", empty_dir if is_dir else empty_file, j(rel)]
    argv += ["--remount-ro", "/", "--chdir", project, "--clearenv",
             "--setenv", "PATH", SANDBOX_PATH, "--setenv", "HOME", "/tmp/home",
             "--setenv", "LANG", "C.UTF-8", "--setenv", "TERM", "dumb",
             "/usr/bin/prlimit", f"--as={limits.sandbox_memory_bytes}", f"--fsize={limits.sandbox_file_bytes}",
             f"--nproc={limits.sandbox_processes}", "--nofile=1024", "--core=0", "--",
             "/bin/sh", "-c", command]
    return argv


# ------------------------------------------------------------------------------------------------ the run


def _count_processes(pid: int, cap: int) -> int:
    """Processes in the tree below ``pid`` (the sandbox: orphans are adopted by its PID 1), up to ``cap``."""
    n, stack = 0, [pid]
    while stack and n <= cap:
        p = stack.pop()
        n += 1
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as fh:
                    stack.extend(int(c) for c in fh.read().split())
        except (OSError, ValueError):
            continue
    return n


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        proc.kill()
    except OSError:
        pass


def _run(argv: list[str], limits: Limits, remaining: float) -> tuple[bytes, int | None, str | None]:
    """(output up to the cap, exit status or None, why it was stopped or None)."""
    cap = limits.max_result_chars * 4
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    chunks, size, stopped = [], 0, None
    end = time.monotonic() + remaining
    try:
        while True:
            r, _, _ = select.select([fd], [], [], _POLL)
            eof = False
            if r:
                try:
                    data = os.read(fd, min(65536, cap + 1 - size))
                except BlockingIOError:
                    data = None
                if data == b"":
                    eof = True
                elif data:
                    chunks.append(data)
                    size += len(data)
                    if size > cap:
                        stopped = f"output over {cap:,} bytes"
                        break
            if eof or (proc.poll() is not None and not r):
                break
            if time.monotonic() > end:
                stopped = "timeout"
                break
            if _count_processes(proc.pid, limits.sandbox_processes + 2) > limits.sandbox_processes + 1:
                stopped = f"more than {limits.sandbox_processes} processes"
                break
    finally:
        if stopped or proc.poll() is None:
            _kill(proc)
        proc.wait()
        proc.stdout.close()
    return b"".join(chunks)[:cap], (None if stopped else proc.returncode), stopped


def _aside(project: str, rel: str) -> str:
    """Move ``rel`` to a name nothing on the host acts on, next to it; returns the new relative path."""
    for i in range(100):
        new = f"{rel}.subconscious-removed-{int(time.time())}{'-%d' % i if i else ''}"
        if not os.path.lexists(os.path.join(project, new)):
            os.rename(os.path.join(project, rel), os.path.join(project, new))
            return new
    raise OSError("no free name")


def _sweep(project: str, scan: Scan) -> list[str]:
    """After the sandbox is gone: take the placeholders away, and move aside any path that runs code later
    which the command made where no mount could stop it (below the top level, or by replacing a link);
    links that were there are put back. Entries that were mounted read-only are left as they are."""
    for rel, is_dir in scan.placeholders:
        p = os.path.join(project, rel)
        try:
            st = os.lstat(p)
            if is_dir and stat.S_ISDIR(st.st_mode):
                os.rmdir(p)  # only if still empty (it was a read-only mount point in the sandbox)
            elif not is_dir and stat.S_ISREG(st.st_mode) and st.st_size == 0:
                os.unlink(p)
        except OSError:
            pass
    placed = {rel for rel, _ in scan.placeholders}
    links = {rel: ident[5] for rel, ident in scan.seen.items() if ident[0] == stat.S_IFLNK}
    moved = []
    for rel, name, st in list(_walk(project, None)):
        if not is_masked_name(name) or rel in placed:
            continue
        before = scan.seen.get(rel)
        if before and before[0] != stat.S_IFLNK:
            continue  # mounted read-only over itself: the command could not change it
        if before and stat.S_ISLNK(st.st_mode) and os.readlink(os.path.join(project, rel)) == before[5]:
            continue
        try:
            moved.append(f"{rel} -> {_aside(project, rel)}")
        except OSError:
            moved.append(f"{rel} (could not be moved aside!)")
    for rel, target in links.items():
        p = os.path.join(project, rel)
        if not os.path.lexists(p) and target:
            try:
                os.symlink(target, p)
            except OSError:
                pass
    return moved


def bash(root: Root, args: Mapping[str, Any], limits: Limits, deadline: float) -> str:
    command = _str(args, "command", required=True)
    if len(command) > MAX_COMMAND_CHARS:
        raise ToolError(f"the command is over {MAX_COMMAND_CHARS} characters")
    bwrap = _tool("bwrap")
    if bwrap is None or not os.path.exists("/usr/bin/prlimit"):
        raise ToolError("Bash runs only inside a bubblewrap sandbox, and bwrap (or prlimit) is not installed on this "
                        "machine (Linux: install the 'bubblewrap' package); the command was not run")
    started = time.monotonic()
    scan = scan_project(root.path, deadline - 0.5)
    with tempfile.TemporaryDirectory(prefix="subconscious-sandbox-") as tmp:
        empty_dir, empty_file = os.path.join(tmp, "d"), os.path.join(tmp, "f")
        os.mkdir(empty_dir, 0o555)
        open(empty_file, "wb").close()
        os.chmod(empty_file, 0o444)
        os.chmod(tmp, 0o755)
        argv = sandbox_argv(bwrap, root.path, scan, empty_dir, empty_file, command, limits)
        try:
            out, status, stopped = _run(argv, limits, max(0.5, deadline - time.monotonic()))
        finally:
            removed = _sweep(root.path, scan)
            os.chmod(empty_dir, 0o755)
    took = time.monotonic() - started
    text = out.decode("utf-8", errors="replace").rstrip()
    if len(text) > limits.max_result_chars - 600:  # keep the status line and the notes inside the result cap
        text = text[:limits.max_result_chars - 600] + "\n[... output cut]"
    note = ""
    if removed:
        note = ("\n[moved aside after the command (paths that run code outside the sandbox later are never kept): "
                + ", ".join(removed[:20]) + (" ..." if len(removed) > 20 else "") + "]")
    if stopped == "timeout":
        raise ToolTimeout(f"the command was killed after {took:.0f} s (per-call limit){note}\n{text[-2000:]}")
    if stopped:
        return (f"{text}\n[stopped: {stopped}; the sandbox was killed after {took:.1f} s]{note}")
    return (f"{text}\n[exit status {status}, {took:.1f} s, run in a sandbox: project writable except paths that run "
            f"code later, no network]{note}")
