"""What a bulk read of every session (``status``, ``doctor``) found last time, kept on this machine so that
a session none of whose files changed is not read, parsed and merged again.

A read-only bulk read (:meth:`.session_reading.SessionReading.read_each`) reads thousands of files: at
10,000 sessions across 3 hosts, 40,000 of them, most unchanged since the last ``status``. For each session
this cache keeps the merged state, the problems and whether it is retired, with the identity of every file
the read read — its name and (device, inode, size, modification time, change time), or that it was absent —
and the newest stamp it held. A later read takes the entry only if the same names are to be read (the
listings are taken afresh every time) and each still has that identity, the session floor, this host, the
hosts being retired and the code that reads are the same, and the newest stamp is still within the bound
(:func:`.clock.bound`): then a fresh read would read the same bytes and find the same. Anything else is read
as usual.

Git's racily-clean rule: an entry is only kept when every file's modification and change time are more than
:data:`.listcache.RACY_NS` older than the moment its identity was taken (before its bytes were read), and
it is only trusted once the same identities were seen at least that long before by this machine's clock
(:func:`sighted`: a file server's clock behind ours makes a file's times look old at once). A file
rewritten in place in the same tick of a coarse clock, to the same size, keeps its identity; such a file
changed too recently for that to be told apart, so its session is read again next time. A read that found
a version stamped beyond the bound, or that listed the hosts again because something moved, is not kept.

The cache is one file beside the listing cache (the machine-local state dir, never the synced home), 0600
in a 0700 directory, written atomically, with a digest of its body: a cache that is not a regular file (a
link, a FIFO), too large, of another format, for another home or code, damaged or unreadable is ignored and
rebuilt, never followed, never a crash. Only writes of a read-only store's bulk read fill it; a hook's
read, every write and gc read the files themselves.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

from ..clock import Stamp, bound
from ..files import Problem
from .listcache import RACY_NS
from ..records import SessionState

FORMAT = 1
CAP = 256 << 20  # a larger cache file is ignored (100,000 sessions: about 40 MiB)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_BINARY = getattr(os, "O_BINARY", 0)


def code_identity(extra: tuple[str, ...] = ()) -> str:
    """Which code reads: the package's version and each state module's size and time, and those of the
    ``extra`` module files (an edited checkout reads with other code: its cache is not trusted)."""
    from ... import __version__

    here = os.path.dirname(os.path.abspath(__file__))
    parts = [str(__version__)]
    try:
        with os.scandir(here) as it:
            for entry in sorted(it, key=lambda e: e.name):
                if entry.name.endswith(".py"):
                    st = entry.stat(follow_symlinks=False)
                    parts.append(f"{entry.name}:{st.st_size}:{st.st_mtime_ns}")
        for name in extra:
            st = os.stat(name)
            parts.append(f"{name}:{st.st_size}:{st.st_mtime_ns}")
    except OSError:
        parts.append("?")
    return hashlib.sha256("\n".join(parts).encode("utf-8", "surrogateescape")).hexdigest()[:32]


def read_private(path: Path, cap: int | None = None) -> bytes | None:
    """The bytes of the machine-local cache file at ``path``, or None: never through a link (the file
    or its directory), never a FIFO or device, never more than ``cap`` bytes (:data:`CAP`)."""
    cap = CAP if cap is None else cap
    try:
        st = os.lstat(path.parent)
        if not stat.S_ISDIR(st.st_mode):
            return None
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC | _BINARY)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > cap:
            return None
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 24, cap + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > cap:
                return None
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _short(host: str | None, name: str, usual: str) -> str:
    """How the cache names one of a session's files: ``<host>/<name>`` (no host: the home), the name left
    out when it is the session's own file name (the cache is a sixth smaller)."""
    return f"{host or ''}/{'' if name == usual else name}"


def _state_json(state: SessionState | None) -> list | None:
    if state is None:
        return None
    return [state.session_id, state.conversation_id, state.last_processed_index, state.started_at,
            state.last_block_values, state.last_seen_message_id, state.host, state.stamp.wall, state.stamp.count,
            state.extra, state.agent_id]


def _opt(value, kind) -> bool:
    return value is None or type(value) is kind


def _state_of(value, session_id: str) -> SessionState | None:
    """The state :func:`_state_json` wrote (ValueError if it is not such a list)."""
    if value is None:
        return None
    if type(value) is not list or len(value) != 11:
        raise ValueError("not a state")
    sid, conv, index, started, blocks, seen, host, wall, count, extra, agent = value
    if (sid != session_id or not _opt(conv, str) or type(index) is not int or not _opt(started, str)
            or not _opt(blocks, dict) or not _opt(seen, str) or type(host) is not str or type(wall) is not int
            or type(count) is not int or type(extra) is not str or not _opt(agent, str)):
        raise ValueError("not a state")
    return SessionState(sid, conv, index, started, blocks, seen, host, Stamp(wall, count), extra, agent)


def _problems_of(value) -> list[Problem]:
    if type(value) is not list:
        raise ValueError("not problems")
    out = []
    for p in value:
        if (type(p) is not list or len(p) != 4 or not all(type(x) is str for x in p[:3])
                or not _opt(p[3], str)):
            raise ValueError("not a problem")
        out.append(Problem(*p))
    return out


def load(path: Path, context: list):
    """The body of the cache file at ``path`` written for ``context``, or None (see the module docstring)."""
    raw = read_private(path)
    if raw is None:
        return None
    try:
        head, _, body = raw.partition(b"\n")
        header = json.loads(head)
        if (type(header) is not dict or header.get("context") != context
                or header.get("sha256") != hashlib.sha256(body).hexdigest()):
            return None
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


def save(path: Path, context: list, value) -> None:
    """Write the cache file at ``path`` atomically, 0600 in a 0700 directory, never through a link; a
    failure leaves the cache as it was (the next read reads the files)."""
    from ...base.atomic import atomic_write, ensure_dir

    try:
        body = json.dumps(value, separators=(",", ":")).encode()
        if len(body) > CAP:
            return
        header = json.dumps({"context": context, "sha256": hashlib.sha256(body).hexdigest()}).encode()
        ensure_dir(path.parent)
        if not stat.S_ISDIR(os.lstat(path.parent).st_mode):
            return  # a link where the cache directory should be: not written through
        atomic_write(path, header + b"\n" + body, durable=False)
    except (OSError, ValueError):
        pass


def cache_path(cache_dir: Path, kind: str, home: Path, host: str = "") -> Path:
    """``<cache dir>/<kind>-<digest of the home (and the host: two hosts sharing one state dir keep a cache
    each instead of overwriting each other's)>.json``."""
    key = os.fspath(home) + ("\0" + host if host else "")
    digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return Path(cache_dir) / f"{kind}-{digest}.json"


def sighted(first_ns: int, taken_ns: int) -> bool:
    """May an unchanged identity be trusted, first seen at ``first_ns`` and again now (``taken_ns``), both by
    this machine's clock? The racily-clean rule compares a file's times with this machine's clock; on a
    file server whose clock is behind ours, a file changed a moment ago looks old at once, and a same-size
    rewrite in the same tick of the server's clock keeps the identity. An identity seen again
    :data:`.listcache.RACY_NS` later by our clock was read again then, bytes and all: a rewrite that kept
    it would have had to come in the same tick as a change made before the first sighting, that long
    before. So a cache answers from the read after that, whatever the server's clock says."""
    return first_ns + RACY_NS < taken_ns


class QuietFiles:
    """Files of the home a check of doctor's found nothing in (a view without a problem, a file without
    anything of the block cache), by the same identity and racily-clean rule as the sessions': such a file
    is not read again while its identity is the one recorded. ``code``: the modules the check's answer
    depends on besides the state package (their size and time are part of the cache's context)."""

    def __init__(self, fs, home: Path, cache_dir: Path, kind: str, code: tuple[str, ...] = ()):
        self.fs = fs
        self.home_text = os.fspath(home)
        self.path = cache_path(cache_dir, kind, home)
        self.context = [FORMAT, self.home_text, code_identity(code)]
        got = load(self.path, self.context)
        self.old: dict = got if type(got) is dict else {}
        self.new: dict = {}
        self.changed = False

    def token(self, path: str) -> tuple[int, tuple | None]:
        """(when the identity was taken, in ns; the file's identity, None if it cannot be told): see
        :meth:`.fs.FS.file_identity`."""
        return self.fs.file_identity(path)

    def quiet(self, rel: str, token: tuple | None, limit: Stamp | None = None) -> bool:
        """Was the file found quiet with this identity (and, with ``limit``, no stamp in it beyond it)?"""
        entry = self.old.get(rel)
        if not token or type(entry) is not list or len(entry) != len(token) + 4 or entry[:-4] != list(token):
            return False
        wall, count, _, trusted = entry[-4:]
        if type(wall) is not int or type(count) is not int or trusted is not True or (
                limit is not None and Stamp(wall, count) > limit):
            return False
        self.new[rel] = entry
        return True

    def mark(self, rel: str, taken_ns: int, token: tuple | None, newest: Stamp | None = None) -> None:
        """The file, read after its identity was taken at ``taken_ns``, was found quiet (its newest stamp);
        trusted from the read that finds the same identity :func:`sighted` long enough before."""
        self.changed = True
        if token and max(token[3], token[4]) + RACY_NS < taken_ns:
            old = self.old.get(rel)
            first = old[-2] if (type(old) is list and len(old) == len(token) + 4 and old[:-4] == list(token)
                                and type(old[-2]) is int) else taken_ns
            newest = newest or Stamp(0, 0)
            self.new[rel] = [*token, newest.wall, newest.count, first, sighted(first, taken_ns)]

    def save(self) -> None:
        if self.changed or len(self.new) != len(self.old):
            if self.new or self.old:
                save(self.path, self.context, self.new)


class SessionCache:
    """One home's cache, loaded once per bulk read: :meth:`get` before reading a session, :meth:`put`
    after a fresh read, :meth:`save` at the end."""

    def __init__(self, fs, home: Path, cache_dir: Path, context: list):
        self.fs = fs
        self.home = Path(home)
        self.home_text = os.fspath(self.home)
        self.path = cache_path(cache_dir, "sessions", self.home, str(context[0]) if context else "")
        self.context = [FORMAT, self.home_text, code_identity(), *context]
        self.old: dict = {}
        self.new: dict = {}
        self.changed = False
        self.complete = False  # every session of the home was visited (unvisited entries then go)
        self.hits = self.misses = 0
        self._load()

    def _load(self) -> None:
        sessions = load(self.path, self.context)
        if type(sessions) is dict:
            self.old = sessions

    def tokens(self, plan: list[tuple]) -> tuple[int, list | None]:
        """(when the first identity was taken, in ns; each planned file's ``[name, *identity]``, or None
        if one cannot be told), see :meth:`.fs.FS.file_identity`."""
        sep, home = os.sep, self.home_text
        out = []
        taken = None
        identity = self.fs.file_identity
        usual = plan[0][1] if plan else None  # the session's file name: most of its files are named so
        for host, name, _, _ in plan:
            rel = name if host is None else f"hosts{sep}{host}{sep}{name}"
            at, token = identity(home + sep + rel)
            rel = _short(host, name, usual)
            taken = at if taken is None or at < taken else taken
            if token is None:
                return taken, None
            out.append([rel, *token])
        return taken if taken is not None else int(self.fs.now() * 1e9), out

    def get(self, session_id: str, tokens: list | None, now_ms: int):
        """``(state, problems, retired)`` as a fresh read with these files would give, or None."""
        entry = self.old.get(session_id)
        if tokens is None or type(entry) is not list or len(entry) != 6 or entry[1] != tokens or entry[2] is None:
            self.misses += 1  # (no state: these identities seen once, not long enough ago to be trusted)
            return None
        try:
            _, _, state, problems, retired, newest = entry
            if type(retired) is not bool or type(newest) is not list or len(newest) != 2:
                raise ValueError("not an entry")
            if Stamp(*newest) > bound(now_ms):  # (a clock set back: the bound moved below it)
                raise ValueError("beyond the bound")
            got = _state_of(state, session_id), _problems_of(problems), retired
        except (ValueError, TypeError):
            self.misses += 1
            return None
        self.hits += 1
        self.new[session_id] = entry
        return got

    def put(self, session_id: str, taken_ns: int, tokens: list | None, state, problems, reads) -> None:
        """Keep a fresh read's result, if it may be trusted (see the module docstring)."""
        self.changed = True  # (an entry replaced or gone)
        if tokens is None or reads.get("future", True):
            return
        plan = reads.get("plan")
        if plan is None or len(plan) != len(tokens):
            return
        usual = plan[0][1]
        for (host, name, _, _), token in zip(plan, tokens):
            if token[0] != _short(host, name, usual):
                return  # the hosts were listed again: another set of files than the one whose identity was taken
            if len(token) > 1 and max(token[4], token[5]) + RACY_NS >= taken_ns:
                return  # changed too recently to tell a same-tick rewrite from no change
        old = self.old.get(session_id)
        first = old[0] if type(old) is list and len(old) == 6 and old[1] == tokens and type(old[0]) is int else taken_ns
        if not sighted(first, taken_ns):  # these identities seen for the first time: kept as a sighting
            self.new[session_id] = [first, tokens, None, None, None, None]
            return
        newest = reads["newest"]
        self.new[session_id] = [first, tokens, _state_json(state),
                                [[p.kind, p.path, p.message, p.kept_at] for p in problems], bool(reads["retired"]),
                                [newest.wall, newest.count]]

    def save(self) -> None:
        if not self.complete:
            merged = dict(self.old)
            merged.update(self.new)
            new = merged
        else:
            new = self.new
        if (not self.changed and len(new) == len(self.old)) or (not new and not self.old):
            return
        save(self.path, self.context, new)
