"""Issue 24 item 5, without timing: how many names a read looks at and how many listings it takes,
counted through the file-system seam (a RealFS that counts). Reading every session looks at each name a
bounded number of times (it looked at the whole listing once per session: 3.7 s at 2,000 sessions); a
hook's read of one session lists no large directory that has not changed since this machine last listed
it, and still sees every copy and displaced version (a new name changes the directory's mtime)."""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path

from subconscious.state.copynames import Engine, make_copy_name
from subconscious.state.fs import RealFS
from subconscious.state.records import SessionState
from subconscious.state.store.core import Store

HOSTS = ("alpha", "beta", "gamma")


class Names(list):
    """A listing that counts the names iterated over (sorting, set-building and scans all iterate)."""

    looked = 0

    def __iter__(self):
        for name in super().__iter__():
            Names.looked += 1
            yield name


class CountingFS(RealFS):
    def __init__(self):
        super().__init__()
        self.listed: Counter = Counter()

    def listdir(self, directory):
        self.listed[Path(directory).name] += 1
        return Names(super().listdir(directory))


def session(sid: str, host: str, cursor: int) -> dict:
    return SessionState(sid, conversation_id=f"conv-{sid}", last_processed_index=cursor, host=host,
                        stamp=__import__("subconscious.state.clock", fromlist=["Stamp"]).Stamp(int(time.time() * 1000), 0)
                        ).to_json()


def build(tmp: Path, n: int) -> Path:
    """A home with n sessions: each a view plus one version per host."""
    home = tmp / "home"
    for h in HOSTS:
        (home / "hosts" / h).mkdir(parents=True)
    for i in range(n):
        sid = f"{i:08d}-aaaa-4bbb-8ccc-dddddddddddd"
        (home / f"session-{sid}.json").write_text(json.dumps(session(sid, "alpha", i)))
        for h in HOSTS:
            (home / "hosts" / h / f"session-{sid}.json").write_text(json.dumps(session(sid, h, i)))
    return home


def settle(*dirs: Path) -> None:
    """As if the directories last changed a minute ago (a listing now is trusted, not racy)."""
    past = time.time_ns() - 60 * 10**9
    for d in dirs:
        os.utime(d, ns=(past, past))


def waited(monkeypatch) -> dict:
    """The listing cache's clock, ``shift["ns"]`` ahead: a directory dated back by :func:`settle` has its
    change time now, and the cache trusts a listing only once that is RACY_NS old; the shift stands for
    that wait (set it to 0 to be back on time)."""
    import types

    from subconscious.state.sessions import listcache

    shift = {"ns": listcache.RACY_NS + 10**9}
    monkeypatch.setattr(listcache, "time", types.SimpleNamespace(time_ns=lambda: time.time_ns() + shift["ns"]))
    return shift


def store(tmp: Path, home: Path, fs=None) -> Store:
    return Store(home, "alpha", tmp / "local" / "locks", tmp / "local" / "clocks", read_only=True, fs=fs or RealFS())


def names_looked_at_reading_all(tmp: Path, n: int) -> tuple[int, Counter, int]:
    home = build(tmp / str(n), n)
    fs = CountingFS()
    Names.looked = 0
    got = list(store(tmp / str(n), home, fs).sessions())
    assert len(got) == n and all(s.last_processed_index == int(sid[:8]) for sid, s, _ in got)
    return Names.looked, fs.listed, sum(1 for _ in home.rglob("*"))


def test_reading_every_session_looks_at_each_name_a_bounded_number_of_times(tmp_path):
    small, listed_small, files_small = names_looked_at_reading_all(tmp_path, 40)
    large, listed_large, files_large = names_looked_at_reading_all(tmp_path, 160)
    assert listed_small == listed_large  # the same listings, whatever the number of sessions
    assert max(listed_large.values()) <= 2  # each directory listed at most twice (ids, then the read)
    # linear: 4x the sessions, about 4x the names looked at (one scan per session made it 16x)
    assert large <= 5 * small, (small, large)
    assert large <= 12 * files_large


def test_a_hooks_read_lists_no_unchanged_directory_and_sees_what_changes_it(tmp_path, monkeypatch):
    home = build(tmp_path, 300)
    dirs = [home, *(home / "hosts" / h for h in HOSTS)]
    settle(*dirs)
    shift = waited(monkeypatch)
    fs = CountingFS()
    s = store(tmp_path, home, fs)
    sid = f"{7:08d}-aaaa-4bbb-8ccc-dddddddddddd"
    assert s.session(sid).last_processed_index == 7
    first = sum(fs.listed.values())
    assert s.session(sid).last_processed_index == 7
    assert s.session(f"{9:08d}-aaaa-4bbb-8ccc-dddddddddddd").last_processed_index == 9
    assert sum(fs.listed.values()) - first == 2  # per read only hosts/ itself (3 entries), no session directory
    # a sync engine's conflict copy with a further cursor arrives: the directory changed, so it is listed
    shift["ns"] = 0
    copy = home / make_copy_name(Engine.SYNCTHING, f"session-{sid}.json")
    copy.write_text(json.dumps(session(sid, "beta", 50)))
    assert s.session(sid).last_processed_index == 50
    assert fs.listed["home"] >= 2
    # listed right after it changed: not trusted (a second change in the same tick would be missed) ...
    before = fs.listed["home"]
    s.session(sid)
    assert fs.listed["home"] == before + 1
    # ... and so is a displaced version appearing in a host's directory
    displaced = home / "hosts" / "beta" / f".subconscious-displaced-session-{sid}.json-0badc0de"
    displaced.write_text(json.dumps(session(sid, "beta", 60)))
    full = s.session_files.read(sid, os.listdir(home))[0]
    assert s.session(sid).last_processed_index == full.last_processed_index


def test_a_plain_looking_copy_beside_its_original_is_found_from_the_cache(tmp_path, monkeypatch):
    """OneDrive names its copy session-<id>-LAPTOP.json: plain-looking, so the cache keeps it because its
    prefix is another session's file."""
    home = build(tmp_path, 5)
    sid = f"{3:08d}-aaaa-4bbb-8ccc-dddddddddddd"
    (home / make_copy_name(Engine.ONEDRIVE, f"session-{sid}.json")).write_text(json.dumps(session(sid, "beta", 99)))
    settle(home, *(home / "hosts" / h for h in HOSTS))
    waited(monkeypatch)
    fs = CountingFS()
    s = store(tmp_path, home, fs)
    full = s.session_files.read(sid, os.listdir(home))[0]
    assert full.last_processed_index == 99
    for _ in range(2):  # the first lists, the second reads from the cache
        assert s.session(sid) == full
    assert fs.listed["home"] == 1
    cache = next((tmp_path / "local" / "cache").iterdir())
    assert oct(cache.stat().st_mode & 0o777) == "0o600" and oct(cache.parent.stat().st_mode & 0o777) == "0o700"


def test_reading_every_session_opens_each_file_once_and_each_directory_once(tmp_path, monkeypatch):
    """A bulk read (status, doctor, gc) opened the directories from the home down again for every file it
    read (three opens more per host's version) and read each file twice (a 1 MiB buffer, then the end):
    with 10,000 sessions across 3 hosts that was most of status's 3-5 s. Now each directory is opened once
    (as safely: from the home, never through a link) and each file read with one read."""
    home = build(tmp_path, 30)
    files = sum(1 for p in home.rglob("session-*.json"))
    opened, reads = Counter(), Counter()
    real_open, real_read = os.open, os.read

    def counting_open(path, *args, **kw):
        opened[os.path.basename(os.fspath(path)) if isinstance(path, (str, Path)) else path] += 1
        return real_open(path, *args, **kw)

    def counting_read(fd, n):
        reads["read"] += 1
        return real_read(fd, n)

    s = store(tmp_path, home)
    monkeypatch.setattr(os, "open", counting_open)
    monkeypatch.setattr(os, "read", counting_read)
    got = list(s.sessions())
    monkeypatch.undo()
    assert len(got) == 30 and all(state.last_processed_index == int(sid[:8]) for sid, state, _ in got)
    session_opens = sum(n for name, n in opened.items() if str(name).startswith("session-"))
    assert session_opens == files  # each file once
    # the directories: a few, not per file (and the temp file of the machine's read cache, written once at the
    # end: subconscious/state/sessions/cache.py)
    cache_opens = sum(n for name, n in opened.items() if "sessions-" in str(name))
    assert cache_opens <= 1
    assert sum(opened.values()) - session_opens - cache_opens <= 2 * (1 + 1 + len(HOSTS))
    assert reads["read"] <= files + 4
    # a link swapped in for a host's directory is never read through: not by a bulk read under way (it
    # holds the directory it opened), not by the next one (it opens the directories again, never a link)
    target = tmp_path / "target"
    target.mkdir()
    name = next(p.name for p in (home / "hosts" / "beta").iterdir())
    (target / name).write_text("planted")
    fs = RealFS().confined(home)
    held = fs.holding()
    with held:
        before = fs.read(home / "hosts" / "beta" / name)
    (home / "hosts" / "beta").rename(tmp_path / "moved")
    (home / "hosts" / "beta").symlink_to(target)
    with held:
        assert fs.read(home / "hosts" / "beta" / name) == before
    held.close()
    again = fs.holding()
    with again:
        assert fs.read(home / "hosts" / "beta" / name).status == "symlink"
    again.close()
    assert fs.read(home / "hosts" / "beta" / name).status == "symlink"


def test_doctor_reads_each_session_file_once(tmp_path, monkeypatch):
    """doctor read every session three times (its views check, gc's facts, the encryption scan: with
    10,000 sessions across 3 hosts 4.7-6.6 s): now one snapshot, each file opened once, and what it finds
    is the same."""
    from subconscious.doctor.checks import diagnose

    letta_home = tmp_path / "lh"
    home = build(tmp_path, 20)
    (letta_home / ".letta").mkdir(parents=True)
    home.rename(letta_home / ".letta" / "claude")
    home = letta_home / ".letta" / "claude"
    (home / make_copy_name(Engine.SYNCTHING, f"session-{3:08d}-aaaa-4bbb-8ccc-dddddddddddd.json")).write_text(
        json.dumps(session(f"{3:08d}-aaaa-4bbb-8ccc-dddddddddddd", "beta", 99)))
    files = sum(1 for _ in home.rglob("session-*.json"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "GIT_"))}
    env.update(LETTA_HOME=str(letta_home), SUBCONSCIOUS_HOST="alpha", SUBCONSCIOUS_STATE_DIR=str(tmp_path / "local"))
    cwd = tmp_path / "project"
    cwd.mkdir()
    opened: Counter = Counter()
    real_open = os.open

    def counting_open(path, *args, **kw):
        name = os.path.basename(os.fspath(path)) if isinstance(path, (str, Path)) else ""
        if name.startswith("session-"):
            opened[name] += 1
        return real_open(path, *args, **kw)

    monkeypatch.setattr(os, "open", counting_open)
    report = diagnose(env, str(cwd))
    monkeypatch.undo()
    assert report.counts["sessions"] == 20 and report.counts["conflict_copies"] == 1
    assert [f.kind for f in report.findings if f.kind == "conflict-copy"] == ["conflict-copy"]
    assert sum(opened.values()) == files, opened.most_common(3)  # each file once
