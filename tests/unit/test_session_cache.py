"""Issue 24 item 5: the machine-local cache of a read-only bulk read (subconscious/state/sessions/cache.py).

``status`` and ``doctor`` read every session (40,000 files at 10,000 sessions across 3 hosts); a session
none of whose files changed is taken from the cache. What a user must never see: a cached read that says
anything a fresh read of the same files would not. The file system here is the real one, with its file
times and clock replaced by a model (a coarse 2 s tick, as FAT's, on a clock the test moves), so that a
rewrite in the same tick, to the same size, in place, keeps every part of the file's identity but its
bytes — the case git's racily-clean rule is for."""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from subconscious.state.clock import Stamp
from subconscious.state.copynames import Engine, make_copy_name
from subconscious.state.fs import RealFS
from subconscious.state.records import SessionState
from subconscious.state.store.core import Store
from tests.harness.sizes import examples

TICK = 2_000_000_000  # FAT's modification-time tick
SIDS = [f"0000000{i}-1111-4222-8333-444444444444" for i in range(3)]
WALL = 1_764_000_000_000


class ModelTimes(RealFS):
    """The real file system whose file times are a model: a file's modification and change time is the
    model clock when the test last wrote it, cut to a 2 s tick; its device, inode and size are the real
    ones. ``now`` is the model clock. Counts the reads of session files."""

    def __init__(self, world: dict):
        super().__init__()
        self.world = world  # shared with the confined copies the store makes

    def now(self) -> float:
        return self.world["now"] / 1e9

    def file_token(self, path):
        token = super().file_token(path)
        if not token:
            return token
        m, c = self.world["times"].get(os.fspath(path), (0, 0))
        return (*token[:3], m - m % TICK, c - c % TICK)

    def read(self, path, cap=64 << 20):
        if os.path.basename(os.fspath(path)).startswith("session-"):
            self.world["reads"][os.fspath(path)] += 1
        return super().read(path, cap)


class World:
    def __init__(self, root: Path):
        self.root = root
        self.home = root / "home"
        self.local = root / "local"
        self.state = {"now": 1_800_000_000 * 10**9, "times": {}, "reads": Counter()}
        for h in ("alpha", "beta"):
            (self.home / "hosts" / h).mkdir(parents=True)
        for i, sid in enumerate(SIDS):
            for where in self.targets()[:3 * len(SIDS)]:
                if sid in where.name:
                    self.write(where, i, replace=True)

    def targets(self) -> list[Path]:
        out = []
        for sid in SIDS:
            name = f"session-{sid}.json"
            out += [self.home / name, self.home / "hosts" / "alpha" / name, self.home / "hosts" / "beta" / name]
        for sid in SIDS:
            name = f"session-{sid}.json"
            out += [self.home / "hosts" / "gamma" / name, self.home / make_copy_name(Engine.DROPBOX, name)]
        return out

    def write(self, path: Path, digit: int, replace: bool, garbage: bool = False, keep_mtime: bool = False) -> None:
        """A version of the session the file is named for: always the same size for a digit (a rewrite to
        another digit in place keeps the inode and the size); ``garbage``: bytes that are not JSON;
        ``keep_mtime``: its modification time put back as it was (``touch -d``, ``rsync -a``: the change
        time is still now)."""
        sid = next(s for s in SIDS if s in path.name)
        host = path.parent.name if path.parent.parent.name == "hosts" else "alpha"
        data = json.dumps(SessionState(sid, conversation_id=f"conv-{digit}", last_processed_index=digit, host=host,
                                       stamp=Stamp(WALL + digit, digit)).to_json()).encode()
        if garbage:
            data = b"{nope" + b"x" * (len(data) - 5)
        if not path.parent.is_dir():
            return  # (gamma's versions once gamma exists)
        if replace or not path.exists():
            tmp = path.with_name(".tmp-" + path.name)
            tmp.write_bytes(data)
            os.replace(tmp, path)  # another inode
        else:
            with open(path, "r+b") as f:  # in place: the same inode
                f.write(data)
                f.truncate()
        now = self.state["now"]
        before = self.state["times"].get(os.fspath(path), (now, now))[0]
        self.state["times"][os.fspath(path)] = (before if keep_mtime else now, now)

    def store(self, cached: bool = True, **kw) -> Store:
        fs = ModelTimes(self.state) if cached else RealFS()
        s = Store(self.home, "alpha", self.local / "locks", self.local / "clocks", read_only=True, fs=fs, **kw)
        s.keep_caches = cached
        return s

    def read(self, cached: bool = True, **kw) -> list:
        return list(self.store(cached, **kw).sessions())

    def cache_files(self) -> list[Path]:
        return sorted((self.local / "cache").glob("sessions-*.json"))


ops = st.one_of(
    st.tuples(st.just("write"), st.integers(0, 14), st.integers(0, 9), st.booleans()),
    st.tuples(st.just("garbage"), st.integers(0, 14)),
    st.tuples(st.just("write, time put back"), st.integers(0, 14), st.integers(0, 9)),
    st.tuples(st.just("delete"), st.integers(0, 14)),
    st.tuples(st.just("new host"),),
    st.tuples(st.just("tick"), st.sampled_from([0, TICK // 4, TICK // 2, TICK, 3 * TICK // 2, 2 * TICK, 5 * TICK])),
    st.tuples(st.just("read"),),
)


def apply(world: World, op: tuple) -> None:
    kind = op[0]
    if kind == "write":
        world.write(world.targets()[op[1]], op[2], replace=op[3])
    elif kind == "write, time put back":
        world.write(world.targets()[op[1]], op[2], replace=False, keep_mtime=True)
    elif kind == "garbage":
        world.write(world.targets()[op[1]], 0, replace=False, garbage=True)
    elif kind == "delete":
        world.targets()[op[1]].unlink(missing_ok=True)
    elif kind == "new host":
        (world.home / "hosts" / "gamma").mkdir(exist_ok=True)
    elif kind == "tick":
        world.state["now"] += op[1]
    else:
        assert world.read() == world.read(cached=False)


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, min_size=1, max_size=30))
def test_a_cached_read_says_what_a_fresh_read_says_under_any_edits(steps):
    """Random edits between bulk reads — rewrites in place to the same size within one tick of the clock,
    files replaced by others (another inode), deleted, unparseable, a conflict copy, a new host's directory,
    the clock moved by less or more than a tick — and every cached read equals a fresh one. In the end,
    once the files are older than the racy window, a second read reads no session file at all."""
    with tempfile.TemporaryDirectory() as tmp:
        world = World(Path(tmp))
        for op in steps:
            apply(world, op)
        assert world.read() == world.read(cached=False)
        world.state["now"] += 10 * TICK
        fresh = world.read(cached=False)
        assert world.read() == fresh  # every file older than the racy window: its identities seen
        world.state["now"] += 10 * TICK
        assert world.read() == fresh  # seen again that long after (this machine's clock): trusted
        world.state["reads"].clear()
        assert world.read() == fresh
        assert sum(world.state["reads"].values()) == 0


def test_a_later_status_with_nothing_changed_parses_no_session_file(tmp_path):
    """The counting test: the first bulk read after the files settled reads each session file once; one
    within the racy window after it reads them again (trusted only once seen that long apart, by this
    machine's clock); the next reads none and says the same. One file rewritten in place to the same size
    (a tick later) is read again, alone, and its new cursor shows."""
    world = World(tmp_path)
    world.state["now"] += 10 * TICK
    first = world.read()
    assert set(world.state["reads"].values()) == {1} and len(world.state["reads"]) == 3 * len(SIDS)
    world.state["reads"].clear()
    assert world.read() == first
    assert len(world.state["reads"]) == 3 * len(SIDS)  # seen again too soon: read again
    world.state["now"] += 10 * TICK
    assert world.read() == first  # seen again long enough after the first: trusted from now on
    world.state["reads"].clear()
    assert world.read() == first
    assert not world.state["reads"]
    changed = world.targets()[1]  # alpha's version of the first session
    world.state["now"] += TICK
    world.write(changed, 7, replace=False)
    world.state["now"] += 10 * TICK
    got = world.read()
    assert got == world.read(cached=False)
    assert {sid: s.last_processed_index for sid, s, _ in got}[SIDS[0]] == 7
    reads = {Path(p).name for p in world.state["reads"]}
    assert reads == {changed.name}  # the one session read again (its three files), the others from the cache
    (cache,) = world.cache_files()
    assert cache.stat().st_mode & 0o777 == 0o600 and cache.parent.stat().st_mode & 0o777 == 0o700


def test_a_file_changed_within_the_racy_window_is_read_again(tmp_path):
    """A file rewritten in place to the same size in the tick it was read keeps its whole identity: only
    the racily-clean rule tells; the read right after is not trusted to the cache, so the new bytes show."""
    world = World(tmp_path)
    world.state["now"] += 10 * TICK
    target = world.targets()[0]  # the first session's view
    world.write(target, 5, replace=False)  # (now: within the racy window until 3 s pass)
    world.state["now"] += TICK // 4
    world.read()
    world.write(target, 6, replace=False)  # the same tick, size and inode
    world.state["now"] += 10 * TICK
    got = world.read()
    assert got == world.read(cached=False)
    assert {sid: s.last_processed_index for sid, s, _ in got}[SIDS[0]] == 6


def genuine_cache(world: World) -> tuple[Path, bytes]:
    world.state["now"] += 10 * TICK
    world.read()
    world.state["now"] += 10 * TICK
    world.read()  # (trusted: seen twice, that long apart)
    (cache,) = world.cache_files()
    return cache, cache.read_bytes()


def lie(raw: bytes) -> bytes:
    """A well-formed cache, its digest right, saying the first session's cursor is 9."""
    import hashlib

    head, _, body = raw.partition(b"\n")
    sessions = json.loads(body)
    sessions[SIDS[0]][2][2] = 9
    body = json.dumps(sessions).encode()
    header = json.loads(head)
    header["sha256"] = hashlib.sha256(body).hexdigest()
    return json.dumps(header).encode() + b"\n" + body


def test_a_lying_cache_behind_a_link_is_never_followed(tmp_path):
    world = World(tmp_path)
    cache, raw = genuine_cache(world)
    fresh = world.read(cached=False)
    assert {sid: s.last_processed_index for sid, s, _ in fresh}[SIDS[0]] == 0
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_bytes(lie(raw))
    cache.unlink()
    cache.symlink_to(elsewhere)
    assert world.read() == fresh
    assert elsewhere.read_bytes() == lie(raw)  # not written through either
    # the same bytes in the cache's own place are the cache (the machine's own 0700 directory): the
    # lie shows, which is what makes this test fail if the link is followed
    cache.unlink()
    cache.write_bytes(lie(raw))
    assert {sid: s.last_processed_index for sid, s, _ in world.read()}[SIDS[0]] == 9


def test_a_cache_directory_that_is_a_link_is_neither_read_nor_written(tmp_path):
    world = World(tmp_path)
    cache, raw = genuine_cache(world)
    fresh = world.read(cached=False)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / cache.name).write_bytes(lie(raw))
    for p in cache.parent.iterdir():
        p.unlink()
    cache.parent.rmdir()
    cache.parent.symlink_to(elsewhere)
    assert world.read() == fresh
    assert (elsewhere / cache.name).read_bytes() == lie(raw)


def test_a_corrupt_or_hostile_cache_is_ignored_and_rebuilt(tmp_path):
    world = World(tmp_path)
    cache, raw = genuine_cache(world)
    fresh = world.read(cached=False)
    head, _, body = raw.partition(b"\n")
    sessions = json.loads(body)
    lying_body = lie(raw).partition(b"\n")[2]
    wrong_types = dict.fromkeys(sessions, [0, sessions[SIDS[0]][1], "garbage", {}, 1, None])
    forged = json.loads(head)
    import hashlib

    def with_digest(entries) -> bytes:
        b = json.dumps(entries).encode()
        return json.dumps(dict(forged, sha256=hashlib.sha256(b).hexdigest())).encode() + b"\n" + b

    every_entry_wrong = {sid: [e[0], e[1], e[2][:5], e[3], e[4], e[5]] for sid, e in sessions.items()}
    contents = [
        head + b"\n" + lying_body,  # (the digest no longer matches the body)
        b"", b"\x00" * 100, b"{nope", head + b"\n" + body[:-10], head + b"\n" + body + b" ", b"[]\n{}",
        json.dumps(dict(forged, context=[99])).encode() + b"\n" + body, with_digest(wrong_types),
        with_digest(every_entry_wrong), with_digest([1, 2]), b"[" * 100_000 + b"\n" + b"[" * 100_000,
        with_digest({sid: [e[0], e[1], e[2], [["k", "p", 3, None]], e[4], e[5]] for sid, e in sessions.items()}),
        with_digest({sid: [e[0], e[1], e[2], e[3], e[4], ["9999999999999999", 0]] for sid, e in sessions.items()}),
        with_digest({sid: [e[0], e[1], e[2], e[3], e[4], [9999999999999999, 0]] for sid, e in sessions.items()}),
    ]
    for content in contents:
        cache.write_bytes(content)
        assert world.read() == fresh, content[:80]
    # a FIFO where the cache is: not opened for reading (never blocks), replaced by the next write
    cache.unlink()
    os.mkfifo(cache)
    world.state["times"][os.fspath(world.targets()[2])] = (0, 0)  # (a change, so the read writes its cache again)
    assert world.read() == fresh
    # a huge file (sparse): not read
    cache.unlink(missing_ok=True)
    with open(cache, "wb") as f:
        f.truncate(300 << 20)
    assert world.read() == fresh
    # rebuilt: a read after a change writes a good cache again, and it is used (from the read that sees the
    # identities again long enough after the first)
    world.write(world.targets()[2], 3, replace=True)
    world.state["now"] += 10 * TICK
    assert world.read() == world.read(cached=False)
    world.state["now"] += 10 * TICK
    assert world.read() == world.read(cached=False)
    world.state["reads"].clear()
    assert world.read() == world.read(cached=False)
    assert not world.state["reads"]


def test_a_cache_larger_than_its_cap_is_not_read(tmp_path, monkeypatch):
    from subconscious.state.sessions import cache as sessioncache

    world = World(tmp_path)
    cache, raw = genuine_cache(world)
    fresh = world.read(cached=False)
    cache.write_bytes(lie(raw))
    monkeypatch.setattr(sessioncache, "CAP", len(lie(raw)) - 1)
    assert world.read() == fresh


def test_a_cached_session_whose_stamp_is_now_beyond_the_bound_is_read_again(tmp_path):
    """The clock set back by more than the allowed skew after the cache was filled: a version that counted
    then is beyond the bound now, and the read says so (future-stamp) as a fresh read does."""
    world = World(tmp_path)
    world.state["now"] += 10 * TICK
    at_write = WALL + 9
    world.read(now=lambda: at_write)
    back = lambda: at_write - 25 * 3600 * 1000  # noqa: E731
    got = world.read(now=back)
    assert got == world.read(cached=False, now=back)
    assert any(p.kind == "future-stamp" for _, _, problems in got for p in problems)


def test_a_version_beyond_the_bound_when_read_is_not_kept(tmp_path):
    """A version stamped beyond the bound is ordered as the oldest and reported; once the clock is
    right again it counts as written: a read then must not give what the cache saw before."""
    world = World(tmp_path)
    world.state["now"] += 10 * TICK
    at_write = WALL + 9
    ahead = lambda: at_write - 25 * 3600 * 1000  # noqa: E731
    early = world.read(now=ahead)
    assert any(p.kind == "future-stamp" for _, _, problems in early for p in problems)
    got = world.read(now=lambda: at_write)
    assert got == world.read(cached=False, now=lambda: at_write)
    assert not any(p.kind == "future-stamp" for _, _, problems in got for p in problems)


def test_a_file_rewritten_with_its_time_put_back_is_read_again(tmp_path):
    """``touch -d`` or ``rsync -a`` after a rewrite puts the modification time back: only the change time
    says the file changed, and within the racy window even that can stay in its tick."""
    world = World(tmp_path)
    world.state["now"] += 10 * TICK
    target = world.targets()[1]
    world.write(target, 5, replace=False, keep_mtime=True)  # the modification time old, the change time now
    world.read()
    world.write(target, 6, replace=False, keep_mtime=True)  # the same tick: the whole identity as it was
    world.state["now"] += 10 * TICK
    got = world.read()
    assert got == world.read(cached=False)
    assert {sid: s.last_processed_index for sid, s, _ in got}[SIDS[0]] == 6


def test_bytes_remembered_by_a_report_are_never_cached_under_a_later_identity(tmp_path):
    """doctor reads every file once (a holding that remembers bytes): a file rewritten after its bytes
    were read, during the report, must not have those old bytes cached under its new identity — the
    next read, after the report, shows the new version."""
    world = World(tmp_path)
    world.state["now"] += 10 * TICK
    store = world.store()
    target = world.targets()[1]
    held = store.fs.holding(remember=True)
    try:
        with held:
            list(store.sessions())  # (the bytes remembered)
            world.write(target, 7, replace=True)
            world.state["now"] += 10 * TICK
            list(store.sessions())  # the report's snapshot: the bytes it read
    finally:
        held.close()
    world.state["now"] += 10 * TICK
    got = world.read()
    assert got == world.read(cached=False)
    assert {sid: s.last_processed_index for sid, s, _ in got}[SIDS[0]] == 7


def test_two_hosts_sharing_one_state_dir_keep_a_cache_each(tmp_path):
    """Red team finding: two host ids over one machine-local state dir (two SUBCONSCIOUS_HOST values) overwrote
    each other's session cache, so a status alternating between them stayed cold for ever."""
    world = World(tmp_path)
    world.state["now"] += 10 * TICK

    def read(host: str) -> list:
        fs = ModelTimes(world.state)
        s = Store(world.home, host, world.local / "locks", world.local / "clocks", read_only=True, fs=fs)
        s.keep_caches = True
        return list(s.sessions())

    for _ in range(2):
        read("alpha"), read("beta")
        world.state["now"] += 10 * TICK
    read("alpha"), read("beta")
    world.state["reads"].clear()
    read("alpha")
    read("beta")
    assert not world.state["reads"]  # both answered from their own cache
    assert len(world.cache_files()) == 2
