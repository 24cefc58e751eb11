"""Bash (LETTA_SDK_TOOLS=full only), run inside a bubblewrap sandbox or not at all.

The sandbox (``bwrap``) is an allow-list view, not the host read-only:
- visible: /usr (and the /bin, /lib… links or directories), a few files of /etc (``ETC``), a fresh /proc
  of its own processes, a minimal /dev, and the project directory (writable); nothing else exists —
  no home directory, no /run, /var, /srv, /opt, /mnt, /media, no other /etc files;
- /tmp is an empty tmpfs of ``Limits.sandbox_tmp_bytes`` (HOME is /tmp/home), /dev/shm a small one;
- in the project: every path that runs code later (denied.py: ``.git`` anywhere, ``.claude``, ``.letta``,
  ``.envrc``, ``.vscode``…) and every directory that is a git repository by its layout (HEAD beside
  objects/, refs/ or commondir) is mounted read-only over itself, found with lstat and never followed; at
  the top level the absent ones get an empty read-only mount so they cannot be created; ``.letta``,
  credential-named files (inside those read-only paths too) and directories, private paths
  (SUBCONSCIOUS_PRIVATE_PATHS), sockets, FIFOs and devices are covered by an empty file or directory
  (unreadable, and a socket cannot be connected to); a repository's config holding credentials by a
  redacted copy; one created deeper down anyway (say ``sub/.git``, or a bare layout under any name) is
  moved aside (``<name>.subconscious-removed-<time>``; for a layout, its HEAD) when the command ends, links
  it made that lead out of the project are removed, and the result says so;
- one call per project at a time (a lock file per project in the machine-local state dir); the scan and
  the sweep walk by directory fds (O_NOFOLLOW | O_DIRECTORY) and rename relative to the held directory; a
  directory the command made unlistable is made listable again, or moved aside whole — never skipped;
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
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from .confine import (MAX_DEPTH, SECRET_DIRS, Root, ToolError, ToolTimeout, _CLOEXEC, _DIR_FLAGS, _DIRECTORY, _NOFOLLOW,
                      git_toplevel, hooks_dir, within)
from .denied import (RUNS_LATER_DIRS, RUNS_LATER_FILES, fold, masked_in, repo_layout, secret_name, unreachable,
                     write_denied)
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
# called once the command is over and the sandbox gone, before the sweep (registry: the worker then lets the
# tool child finish the sweep past the call's timeout)
on_sweep = None


def _tool(name: str) -> str | None:
    return shutil.which(name) if os.name == "posix" else None


def sandbox_available() -> bool:
    return _tool("bwrap") is not None and os.path.exists("/usr/bin/prlimit")


# ---------------------------------------------------------------------------------------------- the project
# The project is walked by directory file descriptors: each directory opened relative to its parent's fd
# with O_NOFOLLOW | O_DIRECTORY, listed through its fd, every entry lstat'ed, renamed, unlinked or linked
# relative to the fd of the directory that holds it. A directory swapped for a link is never entered, and
# nothing outside the project can be reached by a name inside it.

_O_PATH = getattr(os, "O_PATH", 0)
# inside a repository these hold only object files (hex names): never searched for credential names
_OBJECT_DIRS = frozenset({"objects", "lfs"})
# what of a directory that is a repository by its layout gets mounted read-only when it is the project itself
_GITDIR_ENTRIES = ("HEAD", "config", "commondir", "objects", "refs", "hooks", "info", "packed-refs", "worktrees",
                   "modules", "gitdir")
# links that may lead out of the project: what the sandbox shows read-only anyway (venvs link their python)
_LINK_OK = ("/usr", "/dev/null")


@dataclass
class Scan:
    """What the sandbox must mask in the project, found with lstat (links never followed)."""
    ro: list[str] = field(default_factory=list)         # mounted read-only over themselves
    hide_dirs: list[str] = field(default_factory=list)  # covered by an empty read-only directory
    hide_files: list[str] = field(default_factory=list)  # covered by an empty read-only file
    redacted: list[tuple[str, str]] = field(default_factory=list)  # (rel, text): covered by a redacted copy
    placeholders: list[tuple[str, bool]] = field(default_factory=list)  # absent top-level names: (rel, is_dir)
    seen: dict[str, tuple] = field(default_factory=dict)  # every masked-name entry: rel -> identity
    links: dict[str, str] = field(default_factory=dict)   # every link outside the masks: rel -> target
    repos: set[str] = field(default_factory=set)          # directories that are repositories by their layout
    notes: list[str] = field(default_factory=list)        # what had to be done to look everywhere
    hooks: str | None = None                              # core.hooksPath inside the project, if set
    # (type, st_dev, st_ino) of every fixed entry and repository, taken when the scan ends: the sweep trusts
    # a path only while the same inode is there (a command can rename the directory *holding* a mount point
    # and make a new one under the old name; the mount moves with the old inode)
    ids: dict[str, tuple] = field(default_factory=dict)

    def fixed(self) -> set[str]:
        """Entries the command could not change (mounted over)."""
        return set(self.ro) | set(self.hide_dirs) | set(self.hide_files) | {r for r, _ in self.redacted}


def _identity(st: os.stat_result, link: str | None) -> tuple:
    return (stat.S_IFMT(st.st_mode), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, link)


def _entries(fd: int) -> list[tuple[str, os.stat_result]]:
    with os.scandir(fd) as it:
        names = sorted(e.name for e in it)
    out = []
    for n in names:
        try:
            out.append((n, os.stat(n, dir_fd=fd, follow_symlinks=False)))
        except OSError:
            continue
    return out


def _open_sub(parent: int, name: str, rel: str, notes: list[str]) -> int | None:
    """fd of the directory ``name`` in ``parent`` (never through a link), made listable first if it is ours and
    was not (a command's ``chmod 311 a`` must not hide ``a/b/.git``); None if it cannot be opened."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except PermissionError:
        if not _O_PATH:
            return None
    except OSError:
        return None
    try:
        pfd = os.open(name, _O_PATH | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=parent)
    except OSError:
        return None
    try:
        st = os.fstat(pfd)
        if not stat.S_ISDIR(st.st_mode):
            return None
        os.chmod(f"/proc/self/fd/{pfd}", stat.S_IMODE(st.st_mode) | 0o700)  # the inode the O_PATH fd holds
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
        again = os.fstat(fd)
        if (again.st_dev, again.st_ino) != (st.st_dev, st.st_ino):
            os.close(fd)
            return None
        notes.append(f"{rel} (made listable again)")
        return fd
    except OSError:
        return None
    finally:
        os.close(pfd)


def _root_fd(project: str) -> int:
    return os.open(project, os.O_RDONLY | _DIRECTORY | _CLOEXEC)


def _leads_out(project: str, rel: str) -> str | None:
    """Where a link in the project leads when that is outside it, or into a place the tools never write (a
    path that runs code later, a credential file): a host program writing the link's name later would write
    there. None: an ordinary place inside, or a system path."""
    try:
        real = os.path.realpath(os.path.join(project, rel))
    except OSError:  # the link changed while it was resolved (realpath's lstat then readlink): a process is
        return os.path.join(project, rel)  # flipping it, so nothing says it stays inside: it goes
    if any(within(real, ok) for ok in _LINK_OK):
        return None
    if within(real, project):
        inner = os.path.relpath(real, project).replace(os.sep, "/")
        return real if inner != "." and write_denied(inner) else None
    return real


def _redacted_copy(fd: int, name: str) -> str | None:
    """The text of a repository's config with its credentials redacted, if it holds any."""
    from ..privacy.redact import redact
    try:
        f = os.open(name, os.O_RDONLY | _NOFOLLOW | _CLOEXEC | getattr(os, "O_NONBLOCK", 0), dir_fd=fd)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(f).st_mode):
            return None
        os.set_blocking(f, True)
        text = os.read(f, 1024 * 1024).decode("utf-8", errors="replace")
    finally:
        os.close(f)
    out = redact(text)
    return out if out != text else None


def scan_project(project: str, deadline: float | None = None) -> Scan:
    from ..privacy.private import is_private_path, private_globs

    s = Scan()
    globs = private_globs()
    present = set()

    def tick():
        if deadline is not None and time.monotonic() > deadline:
            raise ToolError("the project is too large to check before running Bash within the time limit; "
                            "the command was not run")

    def visit(fd: int, d: str, dname: str, inside: bool, depth: int) -> None:
        """``inside``: this directory is already mounted over (read-only or hidden): look only for what must be
        hidden below it (credential-named files, sockets, the subconscious's state)."""
        entries = _entries(fd)
        names = [n for n, _ in entries]
        is_repo = repo_layout(names)
        if is_repo:
            s.repos.add(d)
            if not inside:
                if d:
                    s.ro.append(d)
                    inside = True
                else:  # the project is itself a bare repository: its repository parts are read-only
                    s.ro.extend(n for n in names if fold(n) in {fold(g) for g in _GITDIR_ENTRIES})
        for name, st in entries:
            tick()
            rel = f"{d}/{name}" if d else name
            mode = st.st_mode
            if not d:
                present.add(name)
            masked = masked_in(dname, name)
            link = None
            if stat.S_ISLNK(mode):
                try:
                    link = os.readlink(name, dir_fd=fd)
                except OSError:
                    link = ""
            if masked:
                s.seen[rel] = _identity(st, link)
            if stat.S_ISLNK(mode):
                if inside:
                    continue
                if masked:  # never bind a link (bwrap would follow it); mask what it points at if that is inside
                    real = os.path.realpath(os.path.join(project, rel))
                    if within(real, project) and real != project and os.path.lexists(real):
                        rrel = os.path.relpath(real, project)
                        if not unreachable(name):
                            s.ro.append(rrel)
                        else:
                            (s.hide_dirs if os.path.isdir(real) else s.hide_files).append(rrel)
                else:
                    s.links[rel] = link
                continue
            private = bool(globs) and is_private_path(os.path.join(project, rel), globs)
            if stat.S_ISDIR(mode):
                if unreachable(name) or fold(name) in _SECRET_DIRS or private:
                    s.hide_dirs.append(rel)
                    continue
                if inside and is_repo and fold(name) in _OBJECT_DIRS:
                    continue
                if depth >= MAX_DEPTH or (inside and depth > 64):  # the sandbox sees an empty directory there
                    s.hide_dirs.append(rel)
                    continue
                sub = _open_sub(fd, name, rel, s.notes)
                if sub is None:  # not ours and not listable: the sandbox sees an empty directory there
                    s.hide_dirs.append(rel)
                    continue
                try:
                    ro_here = masked and not inside
                    if ro_here:
                        s.ro.append(rel)
                    visit(sub, rel, name, inside or ro_here, depth + 1)
                finally:
                    os.close(sub)
            elif stat.S_ISREG(mode):
                if secret_name(name) or private:
                    s.hide_files.append(rel)
                elif is_repo and fold(name) == "config":
                    text = _redacted_copy(fd, name)
                    if text is not None:
                        s.redacted.append((rel, text))
                    elif not inside:
                        s.ro.append(rel)
                elif masked and not inside:
                    s.ro.append(rel)
            else:  # sockets (a host service), FIFOs (a host reader), devices
                s.hide_files.append(rel)

    fd = _root_fd(project)
    try:
        visit(fd, "", "", False, 0)
    finally:
        os.close(fd)
    hooks = hooks_dir(git_toplevel(project) or project)
    if hooks and hooks != project and within(hooks, project):  # core.hooksPath: git runs what is there
        s.hooks = os.path.relpath(hooks, project).replace(os.sep, "/")
        if os.path.isdir(hooks) and not os.path.islink(hooks) and s.hooks not in s.fixed():
            s.ro.append(s.hooks)
        elif not os.path.lexists(hooks) and "/" not in s.hooks:
            s.placeholders.append((s.hooks, True))
    for name in sorted(RUNS_LATER_DIRS | RUNS_LATER_FILES | {".env", "Jenkinsfile"}):
        if name not in present and name != "jenkinsfile":
            s.placeholders.append((name, name in RUNS_LATER_DIRS))
    for rel in s.fixed() | s.repos:  # no command runs now (the lock is held): found by fd walk, no links between
        if rel:
            try:
                s.ids[rel] = _ino(os.lstat(os.path.join(project, rel)))
            except OSError:
                pass
    return s


def _ino(st: os.stat_result) -> tuple:
    return (stat.S_IFMT(st.st_mode), st.st_dev, st.st_ino)


# ------------------------------------------------------------------------------------------------ bwrap argv


def sandbox_argv(bwrap: str, project: str, scan: Scan, empty_dir: str, empty_file: str, command: str,
                 limits: Limits, copies: Mapping[str, str] | None = None) -> list[str]:
    """``copies``: project rel -> a file on the host shown there instead (the redacted copies of ``scan.redacted``)."""
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
    for rel, host in (copies or {}).items():
        argv += ["--ro-bind", host, j(rel)]
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
        n += 1
        stack.extend(_children(stack.pop()))
    return n


def _children(pid: int) -> list[int]:
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                out.extend(int(c) for c in fh.read().split())
    except (OSError, ValueError):
        pass
    return out


def _wait_gone(pids: list[int], limit: float = 5.0) -> None:
    """Wait until each of the sandbox's init processes is dead (a zombie or gone). Killing the outer bwrap does
    not wait for them: its init dies by PDEATHSIG a moment later, and the kernel kills the rest of the namespace
    before that init becomes a zombie — so once it is one, no process of the command can still change the
    project (the sweep must not run while one could)."""
    end = time.monotonic() + limit
    for pid in pids:
        while time.monotonic() < end:
            try:
                with open(f"/proc/{pid}/stat", "rb") as fh:
                    state = fh.read().rsplit(b")", 1)[1].split()[0]
            except (OSError, IndexError):
                break
            if state in (b"Z", b"X"):
                break
            time.sleep(0.005)


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
            inner = _children(proc.pid)  # the sandbox's PID 1 (bwrap's init in the PID namespace)
            _kill(proc)
            proc.wait()
            _wait_gone(inner)
        proc.wait()
        proc.stdout.close()
    return b"".join(chunks)[:cap], (None if stopped else proc.returncode), stopped


def _writable(fd: int, op):
    """``op()``, and once more after making the directory ``fd`` writable if it was not (the command may have
    run ``chmod 555`` on the directory holding what must be moved; the directory is inside the project)."""
    try:
        return op()
    except PermissionError:
        os.fchmod(fd, stat.S_IMODE(os.fstat(fd).st_mode) | 0o700)
        return op()


def _aside(fd: int, name: str) -> str:
    """Rename ``name`` in the directory ``fd`` to a name nothing on the host acts on; returns the new name.
    After the first try the name has a random part: names planted in advance cannot make it fail."""
    import secrets

    stamp = int(time.time())
    for i in range(12):
        new = f"{name}.subconscious-removed-{stamp}" + (f"-{secrets.token_hex(6)}" if i else "")
        try:
            os.stat(new, dir_fd=fd, follow_symlinks=False)
            continue
        except FileNotFoundError:
            pass
        _writable(fd, lambda: os.rename(name, new, src_dir_fd=fd, dst_dir_fd=fd))
        return new
    raise OSError("no free name")


def _unrepo(fd: int) -> str | None:
    """If the directory ``fd`` is a repository by its layout, move its HEAD aside (git then no longer takes it
    for one; nothing is deleted). Returns the new name of HEAD."""
    entries = [n for n, _ in _entries(fd)]
    if not repo_layout(entries):
        return None
    head = next(n for n in entries if fold(n) == "head")
    return _aside(fd, head)


@dataclass
class Swept:
    moved: list[str] = field(default_factory=list)   # paths that run code later, moved aside
    links: list[str] = field(default_factory=list)   # links leading out of the project, removed
    notes: list[str] = field(default_factory=list)   # directories made listable again


def _sweep(project: str, scan: Scan) -> Swept:
    """After the sandbox is gone: take the placeholders away; move aside any path that runs code later which
    the command made where no mount could stop it (below the top level, or by replacing a link) and any
    repository it laid out under another name; remove the links it made that lead out of the project; put
    back the links that were there. Entries that were mounted over are left as they are (they could not
    change). Walked by directory fds, renaming relative to the directory that holds the entry."""
    out = Swept()
    fixed = scan.fixed()
    placed = {rel for rel, _ in scan.placeholders}
    known = set(scan.ids.values())  # the user's own fixed entries and repositories, wherever a rename put them

    def same(rel: str, st: os.stat_result) -> bool:
        """Is the entry at ``rel`` the one the scan fixed there (not a new one made after renaming its parent)?"""
        want = scan.ids.get(rel)
        return want is None or want == _ino(st)  # None: a pending scan from before ids were kept
    restore: dict[str, list[tuple[str, str]]] = {}
    for rel, ident in scan.seen.items():
        if ident[0] == stat.S_IFLNK and ident[5]:
            d, _, name = rel.rpartition("/")
            restore.setdefault(d, []).append((name, ident[5]))

    def moved(rel: str, fd: int, name: str, why: str = "") -> None:
        try:
            new = _aside(fd, name)
        except OSError:
            out.moved.append(f"{rel} (could not be moved aside!)")
            return
        try:  # a moved-aside .git is still a repository by its layout: take its HEAD away too
            sub = os.open(new, _DIR_FLAGS, dir_fd=fd)
        except OSError:
            sub = None
        if sub is not None:
            try:
                _unrepo(sub)
            except OSError:
                pass
            finally:
                os.close(sub)
        d = rel.rpartition("/")[0]
        out.moved.append(f"{rel}{why} -> {d + '/' if d else ''}{new}")

    def visit(fd: int, d: str, dname: str, depth: int, st_d: os.stat_result | None) -> None:
        trusted = d in scan.repos and (st_d is None or same(d, st_d)) or (st_d is not None and _ino(st_d) in known)
        if not trusted:
            try:
                head = _unrepo(fd)
            except OSError:
                head = "?"
            if head:
                out.moved.append(f"{d or '.'} (a git repository by its layout: HEAD -> {head})")
        for name, st in _entries(fd):
            rel = f"{d}/{name}" if d else name
            if rel in placed or (rel in fixed and same(rel, st)):
                continue
            if rel == scan.hooks and rel not in scan.links:  # made where the repository's core.hooksPath points
                moved(rel, fd, name, " (core.hooksPath)")
                continue
            if masked_in(dname, name):
                before = scan.seen.get(rel)
                if before and before[0] != stat.S_IFLNK and tuple(before[:3]) == _ino(st):
                    continue  # mounted read-only over itself: the command could not change it
                if not stat.S_ISLNK(st.st_mode) and _ino(st) in known:
                    continue  # the user's own, under a parent the command renamed: unchanged (it was mounted over)
                if before and stat.S_ISLNK(st.st_mode):
                    try:
                        if os.readlink(name, dir_fd=fd) == before[5]:
                            continue
                    except OSError:
                        pass
                moved(rel, fd, name)
                continue
            if stat.S_ISLNK(st.st_mode):
                try:
                    target = os.readlink(name, dir_fd=fd)
                except OSError:
                    continue
                if scan.links.get(rel) == target:
                    continue  # there before the command
                where = _leads_out(project, rel)
                if where is not None:
                    try:
                        _writable(fd, lambda: os.unlink(name, dir_fd=fd))
                        out.links.append(f"{rel} -> {target}")
                    except OSError:
                        out.links.append(f"{rel} -> {target} (could not be removed!)")
                continue
            if stat.S_ISDIR(st.st_mode):
                if depth >= MAX_DEPTH:
                    moved(rel, fd, name, " (too deep to check)")
                    continue
                sub = _open_sub(fd, name, rel, out.notes)
                if sub is None:  # never skipped: what cannot be looked into is moved aside whole
                    moved(rel, fd, name, " (could not be listed)")
                    continue
                try:
                    visit(sub, rel, name, depth + 1, st)
                finally:
                    os.close(sub)
        for name, target in restore.get(d, ()):
            try:
                os.symlink(target, name, dir_fd=fd)  # fails if something is there (it was not moved aside)
            except OSError:
                pass

    for rel, is_dir in scan.placeholders:
        try:
            fd = _root_fd(project)
        except OSError:
            break
        try:
            st = os.stat(rel, dir_fd=fd, follow_symlinks=False)
            if is_dir and stat.S_ISDIR(st.st_mode):
                os.rmdir(rel, dir_fd=fd)  # only if still empty (it was a read-only mount point in the sandbox)
            elif not is_dir and stat.S_ISREG(st.st_mode) and st.st_size == 0:
                os.unlink(rel, dir_fd=fd)
        except OSError:
            pass
        finally:
            os.close(fd)
    fd = _root_fd(project)
    try:
        visit(fd, "", "", 0, None)
    finally:
        os.close(fd)
    return out


def _lock_name(path: str) -> str:
    import hashlib
    return "bash-" + hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest()[:32]


def _pending_path(project: str) -> str:
    from ..local.identity import local_dirs
    return os.path.join(local_dirs(os.environ).locks, _lock_name(project) + ".pending.json")


def save_pending(project: str, scan: Scan) -> None:
    """Before the sandbox starts: what the sweep compares with, kept on disk until the sweep has run. A call
    killed before its sweep finished (the worker stops a tool child at the timeout) leaves it, and the next
    call sweeps against it first: what that command planted is never taken for the user's own."""
    import json

    data = {"ro": scan.ro, "hide_dirs": scan.hide_dirs, "hide_files": scan.hide_files,
            "redacted": [[rel, ""] for rel, _ in scan.redacted], "placeholders": scan.placeholders,
            "seen": scan.seen, "links": scan.links, "repos": sorted(scan.repos), "hooks": scan.hooks,
            "ids": scan.ids}
    path = _pending_path(project)
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW | _CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh)  # ASCII: names that are not UTF-8 come back as they were
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def load_pending(project: str) -> Scan | None:
    import json

    try:
        with open(_pending_path(project), encoding="ascii") as fh:
            d = json.load(fh)
        return Scan(ro=list(d["ro"]), hide_dirs=list(d["hide_dirs"]), hide_files=list(d["hide_files"]),
                    redacted=[tuple(x) for x in d["redacted"]], placeholders=[tuple(x) for x in d["placeholders"]],
                    seen={k: tuple(v) for k, v in d["seen"].items()}, links=dict(d["links"]), repos=set(d["repos"]),
                    hooks=d.get("hooks"), ids={k: tuple(v) for k, v in d.get("ids", {}).items()})
    except (OSError, ValueError, KeyError, TypeError):  # none (or not ours: written atomically, never torn)
        return None


def _done_pending(project: str) -> None:
    try:
        os.unlink(_pending_path(project))
    except FileNotFoundError:
        pass


@contextmanager
def project_lock(project: str, deadline: float) -> Iterator[None]:
    """One Bash call per project at a time, across workers (two sessions on one project have two): a lock
    file per project root in the machine-local state dir. Another call's sandbox could otherwise change the
    project between this call's scan, mounts and sweep."""
    import fcntl

    from ..local.identity import local_dirs

    d = local_dirs(os.environ).locks
    os.makedirs(d, 0o700, exist_ok=True)
    # a project inside another session's project overlaps it: every call holds its own root exclusively and
    # each directory above it shared, taken from the top down (so nested roots wait for each other, and
    # disjoint ones don't)
    chain, p = [project], project
    while os.path.dirname(p) != p:
        p = os.path.dirname(p)
        chain.append(p)
    fds: list[int] = []
    try:
        for path in reversed(chain):
            name = _lock_name(path) + ".lock"
            fd = os.open(os.path.join(d, name), os.O_RDWR | os.O_CREAT | _NOFOLLOW | _CLOEXEC, 0o600)
            fds.append(fd)
            how = fcntl.LOCK_EX if path == project else fcntl.LOCK_SH
            while True:
                try:
                    fcntl.flock(fd, how | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise ToolError("another Bash call is running in this project (one at a time per project) "
                                        "and did not finish in time; the command was not run") from None
                    time.sleep(_POLL)
        yield
    finally:
        for fd in fds:
            os.close(fd)


def bash(root: Root, args: Mapping[str, Any], limits: Limits, deadline: float) -> str:
    command = _str(args, "command", required=True)
    if len(command) > MAX_COMMAND_CHARS:
        raise ToolError(f"the command is over {MAX_COMMAND_CHARS} characters")
    bwrap = _tool("bwrap")
    if bwrap is None or not os.path.exists("/usr/bin/prlimit"):
        raise ToolError("Bash runs only inside a bubblewrap sandbox, and bwrap (or prlimit) is not installed on this "
                        "machine (Linux: install the 'bubblewrap' package); the command was not run")
    started = time.monotonic()
    with project_lock(root.path, deadline - 1.0):
        earlier = load_pending(root.path)
        left = _sweep(root.path, earlier) if earlier is not None else Swept()  # a call killed before its sweep
        _done_pending(root.path)
        scan = scan_project(root.path, deadline - 0.5)
        save_pending(root.path, scan)
        with tempfile.TemporaryDirectory(prefix="subconscious-sandbox-") as tmp:
            empty_dir, empty_file = os.path.join(tmp, "d"), os.path.join(tmp, "f")
            os.mkdir(empty_dir, 0o555)
            open(empty_file, "wb").close()
            os.chmod(empty_file, 0o444)
            copies = {}
            for i, (rel, text) in enumerate(scan.redacted):
                copies[rel] = os.path.join(tmp, f"c{i}")
                with open(copies[rel], "w", encoding="utf-8") as fh:
                    fh.write(text)
                os.chmod(copies[rel], 0o444)
            os.chmod(tmp, 0o755)
            argv = sandbox_argv(bwrap, root.path, scan, empty_dir, empty_file, command, limits, copies)
            try:
                out, status, stopped = _run(argv, limits, max(0.5, deadline - time.monotonic()))
            finally:
                if on_sweep is not None:
                    try:
                        on_sweep()
                    except OSError:
                        pass
                swept = _sweep(root.path, scan)
                _done_pending(root.path)
                os.chmod(empty_dir, 0o755)
        swept.moved[:0], swept.links[:0] = left.moved, left.links
    took = time.monotonic() - started
    text = out.decode("utf-8", errors="replace").rstrip()
    if len(text) > limits.max_result_chars - 600:  # keep the status line and the notes inside the result cap
        text = text[:limits.max_result_chars - 600] + "\n[... output cut]"
    note = ""
    if swept.moved:
        note += ("\n[moved aside after the command (paths that run code outside the sandbox later are never kept): "
                 + ", ".join(swept.moved[:20]) + (" ..." if len(swept.moved) > 20 else "") + "]")
    if swept.links:
        note += ("\n[links leading out of the project (or into a path that runs code later) removed after the command "
                 "(a program writing there later would write through them): " + ", ".join(swept.links[:20]) + (" ..." if len(swept.links) > 20 else "") + "]")
    fixed = scan.notes + swept.notes
    if fixed:
        note += "\n[directories the command made unlistable, made listable again to check them: " + ", ".join(fixed[:20]) + "]"
    if stopped == "timeout":
        raise ToolTimeout(f"the command was killed after {took:.0f} s (per-call limit){note}\n{text[-2000:]}")
    if stopped:
        return (f"{text}\n[stopped: {stopped}; the sandbox was killed after {took:.1f} s]{note}")
    return (f"{text}\n[exit status {status}, {took:.1f} s, run in a sandbox: project writable except paths that run "
            f"code later, no network]{note}")
