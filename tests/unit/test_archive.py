"""``subconscious export`` / ``import``: a home's state in one archive and merged back, as a user notices it
(what ``status --json`` and the store read), and archives that must be refused."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from subconscious.sync import archive
from subconscious.sync.archive import ArchiveError, collect, import_into, read_archive, write_archive
from subconscious.injection.blockcache import seal_blocks
from subconscious.privacy.keys import Policy
from subconscious.state.records import SessionState
from subconscious.state.seal import Key, is_envelope
from subconscious.state.store.core import Store
from tests.harness.sizes import examples

K1 = Key(bytes([1]) * 32)


def store(tmp: Path, host: str, home: str = "home") -> Store:
    return Store(tmp / home, host, tmp / f"local-{host}" / "locks", tmp / f"local-{host}" / "clocks")


def populate(tmp: Path) -> None:
    a, b = store(tmp, "alpha"), store(tmp, "beta")
    for i in range(3):
        a.put_conversation(f"s{i}", f"conv-{i}", "agent-a")
        a.update_session(f"s{i}", lambda cur, i=i: SessionState(f"s{i}", conversation_id=f"conv-{i}",
                                                                 last_processed_index=10 + i))
    b.update_session("s1", lambda cur: cur.evolve(last_processed_index=40))  # beta delivered further
    b.put_conversation("gone", "conv-g", "agent-a")
    b.delete_conversation("gone")
    a.put_setting("agentId", "agent-a")
    sealed, _ = seal_blocks(None, {"human": "private memory text"}, {K1.id: K1}, Policy(True, K1.id), "s2")
    a.update_session("s2", lambda cur: cur.evolve(last_block_values=sealed))


def seen(s: Store) -> dict:
    """What the home says: every entry (tombstones too), settings, sessions."""
    snap = s.read()
    return {"raw": snap.raw, "settings": {k: v.to_json() for k, v in snap.settings.items() if k != "tombstone-floor"},
            "sessions": {sid: st.to_json() for sid, st, _ in s.sessions()}}


def test_export_then_import_twice_into_an_empty_home_gives_the_same_state(tmp_path):
    populate(tmp_path)
    source = store(tmp_path, "alpha")
    path = tmp_path / "backup.tar.gz"
    write_archive(path, collect(source, "alpha"))
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert b"private memory text" not in path.read_bytes()
    assert b"private memory text" not in b"".join(
        tarfile.open(path).extractfile(m).read() for m in tarfile.open(path) if m.isreg())

    target = store(tmp_path, "gamma", "restored")
    first = import_into(target, read_archive(path))
    assert first["sessions_merged"] == 3 and first["conversations_merged"] == 4 and not first["invalid"]
    after_once = seen(target)
    second = import_into(target, read_archive(path))
    assert second["sessions_merged"] == 0 and second["conversations_merged"] == 0 and second["settings_merged"] == 0
    assert seen(target) == after_once == seen(source)
    assert target.session("s1").last_processed_index == 40 and target.conversation("gone") is None
    assert is_envelope(target.session("s2").last_block_values["human"])  # still sealed, still opens with K1


def test_import_never_overwrites_newer_state(tmp_path):
    populate(tmp_path)
    path = tmp_path / "old.tar.gz"
    write_archive(path, collect(store(tmp_path, "alpha"), "alpha"))
    home = store(tmp_path, "alpha")
    home.update_session("s0", lambda cur: cur.evolve(last_processed_index=99, last_seen_message_id="msg-new"))
    home.put_conversation("s2", "conv-newer", "agent-a")
    home.delete_conversation("s1")
    out = import_into(home, read_archive(path))
    assert out["older_than_home"] >= 2
    assert home.session("s0").last_processed_index == 99 and home.session("s0").last_seen_message_id == "msg-new"
    assert home.conversation("s2").conversation_id == "conv-newer" and home.conversation("s1") is None


def _tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            info.size = len(data) if info.isreg() else 0
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return path


def _member(name: str, value=None, **kw) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    for k, v in kw.items():
        setattr(info, k, v)
    return info, json.dumps(value if value is not None else {}).encode()


MANIFEST = {"format": "subconscious-export", "version": 1}


@pytest.mark.parametrize("members, said", [
    ([_member("manifest.json", {**MANIFEST, "version": 2})], "format version 2"),
    ([_member("manifest.json", MANIFEST), _member("../../etc/cron.d/evil")], "not part of an export"),
    ([_member("manifest.json", MANIFEST), _member("/etc/passwd")], "not part of an export"),
    ([_member("manifest.json", MANIFEST), _member("sessions/session-../x.json")], "not part of an export"),
    ([_member("manifest.json", MANIFEST), _member("settings.json", type=tarfile.SYMTYPE, linkname="/root/.ssh/id_rsa")],
     "symbolic link"),
    ([_member("manifest.json", MANIFEST), _member("settings.json", type=tarfile.LNKTYPE, linkname="manifest.json")],
     "hard link"),
    ([_member("conversations.json")], "no manifest"),
    ([_member("manifest.json", {"format": "something-else", "version": 1})], "not a subconscious export"),
], ids=["unknown-version", "traversal", "absolute", "session-traversal", "symlink", "hardlink", "no-manifest",
        "other-format"])
def test_malicious_or_unknown_archives_are_refused_and_change_nothing(tmp_path, members, said):
    populate(tmp_path)
    home = store(tmp_path, "alpha")
    before = seen(home)
    with pytest.raises(ArchiveError, match=said):
        import_into(home, read_archive(_tar(tmp_path / "bad.tar.gz", members)))
    assert seen(home) == before


def test_a_huge_member_is_refused_before_it_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(archive, "MEMBER_MAX", 1000)
    path = _tar(tmp_path / "big.tar.gz", [_member("manifest.json", MANIFEST),
                                          _member("conversations.json", {f"s{i}": "c" for i in range(200)})])
    with pytest.raises(ArchiveError, match="is 2490 bytes; at most 1000 for it"):
        read_archive(path)
    (tmp_path / "junk.tar.gz").write_bytes(os.urandom(300))
    with pytest.raises(ArchiveError, match="not a subconscious export"):
        read_archive(tmp_path / "junk.tar.gz")


def _cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "subconscious", *args], capture_output=True, text=True, env=env,
                          timeout=60)


def test_the_commands_round_trip_what_status_shows(tmp_path):
    populate(tmp_path)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_"))}
    src = {**base, "LETTA_HOME": str(tmp_path / "src"), "SUBCONSCIOUS_STATE_DIR": str(tmp_path / "local-x"),
           "SUBCONSCIOUS_HOST": "alpha", "HOME": str(tmp_path)}
    (tmp_path / "src" / ".letta").mkdir(parents=True)
    os.rename(tmp_path / "home", tmp_path / "src" / ".letta" / "claude")
    dst = {**src, "LETTA_HOME": str(tmp_path / "dst"), "SUBCONSCIOUS_STATE_DIR": str(tmp_path / "local-y"),
           "SUBCONSCIOUS_HOST": "gamma"}
    out = _cli("export", str(tmp_path / "a.tar.gz"), "--json", env=src)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["counts"]["sessions"] == 3
    for _ in range(2):
        got = _cli("import", str(tmp_path / "a.tar.gz"), env=dst)
        assert got.returncode == 0, got.stderr
    assert "0 merged, 3 unchanged" in got.stdout
    status = [json.loads(_cli("status", "--json", env=e).stdout)["found"] for e in (src, dst)]
    for f in status:
        f.pop("hosts")
    assert status[0] == status[1] and status[0]["sessions"] == 3 and status[0]["conversations"] == 3

    manifest = {**MANIFEST, "version": 7}
    _tar(tmp_path / "future.tar.gz", [_member("manifest.json", manifest)])
    refused = _cli("import", str(tmp_path / "future.tar.gz"), env=dst)
    assert refused.returncode == 1 and "format version 7" in refused.stderr and "Upgrade subconscious" in refused.stderr


# --------------------------------------------------------------------------- properties

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_ids = st.builds(str.__add__, st.sampled_from("abcXYZ019"), st.text("abcXYZ019_-", max_size=11))
_stamp = st.builds(lambda w, c: f"{w}:{c}", st.integers(1, 10**13), st.integers(0, 99))
_entry = st.one_of(
    st.builds(lambda c, a, h, s: {"conversationId": c, "agentId": a, "hlc": s, "host": h}, _ids, _ids, _ids, _stamp),
    st.builds(lambda h, s: {"deleted": True, "hlc": s, "host": h}, _ids, _stamp))
_json = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                     max_leaves=8)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(convs=st.dictionaries(_ids, _entry, max_size=6),
       sets=st.dictionaries(st.text(max_size=8), st.builds(lambda v, s, h: {"value": v, "hlc": s, "host": h},
                                                             _json, _stamp, _ids), max_size=4),
       cursors=st.dictionaries(_ids, st.integers(-1, 10**6), max_size=4))
def test_any_state_survives_the_archive_unchanged(tmp_path, convs, sets, cursors):
    sessions = {sid: SessionState(sid, conversation_id=f"c-{sid}", last_processed_index=i).to_json()
                for sid, i in cursors.items()}
    manifest = {"format": "subconscious-export", "version": 1}
    write_archive(tmp_path / "p.tar.gz", archive.Contents(manifest, convs, sets, sessions))
    got = read_archive(tmp_path / "p.tar.gz")
    assert (got.manifest, got.conversations, got.settings, got.sessions) == (manifest, convs, sets, sessions)
    assert archive.check(got, now_ms=10**13).invalid == []  # (stamps up to 10**13 ms: now is after them all)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(["manifest.json", "conversations.json", "settings.json", "sessions/session-a.json"]),
       body=st.binary(max_size=200) | _json.map(lambda v: json.dumps(v).encode()))
def test_any_member_content_is_merged_or_refused_never_a_crash(tmp_path, name, body):
    members = [] if name == "manifest.json" else [_member("manifest.json", MANIFEST)]
    info = tarfile.TarInfo(name)
    path = _tar(tmp_path / "x.tar.gz", members + [(info, body)])
    try:
        contents = read_archive(path)
    except ArchiveError:
        return
    home = store(tmp_path, "alpha", f"h-{abs(hash(body)) % 10**9}")
    out = import_into(home, contents)
    assert isinstance(out["invalid"], list)
    home.read()
