"""Hostile archives given to ``subconscious import``, run as a user runs it (the real CLI in a subprocess):
compression bombs and floods of entries are refused within a small memory and time, measured from outside
(the child's peak RSS from getrusage, wall seconds; printed: the bounds are stated in docs/several-machines.md, the test
asserts the memory only), and versions stamped far in the future are refused one by one with a message.

The bombs are built cheaply as multi-member gzip (each MiB of zeros compressed once and repeated), which
every gzip reader, ours included, reads as one stream."""

from __future__ import annotations

import gzip
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
from subconscious.sync.archive import ArchiveError, read_archive, write_archive
from subconscious.state.clock import ALLOWED_SKEW_MS
from subconscious.state.records import SessionState

REPO = Path(__file__).resolve().parents[2]
MiB = 1 << 20
MANIFEST = {"format": "subconscious-export", "version": 1}
PEAK_BOUND_MIB = 64  # docs/several-machines.md: "refused within 64 MiB of memory and a few seconds"

MEASURE = """
import json, resource, subprocess, sys, time
t = time.monotonic()
p = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(json.dumps({"rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr, "seconds": time.monotonic() - t,
                  "peak_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""


def _header(name: str, size: int, kind: bytes = tarfile.REGTYPE) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.type, info.mode = size, kind, 0o600
    return info.tobuf(format=tarfile.USTAR_FORMAT)


def _manifest() -> bytes:
    body = json.dumps(MANIFEST).encode()
    return _header("manifest.json", len(body)) + body + bytes(-len(body) % 512)


ZERO_MIB = gzip.compress(bytes(MiB), compresslevel=9)  # one MiB of zeros, compressed once


def _bomb(path: Path, members: list[tuple[str, int]]) -> Path:
    """A .tar.gz whose members are ``size`` zero bytes each (sizes in whole MiB)."""
    with open(path, "wb") as f:
        f.write(gzip.compress(_manifest()))
        for name, size in members:
            f.write(gzip.compress(_header(name, size)))
            f.write(ZERO_MIB * (size // MiB))
        f.write(gzip.compress(bytes(1024)))
    return path


def _import(tmp: Path, path: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_"))}
    env.update(LETTA_HOME=str(tmp / "home"), SUBCONSCIOUS_STATE_DIR=str(tmp / "local"), SUBCONSCIOUS_HOST="alpha",
               HOME=str(tmp), PYTHONPATH=str(REPO))
    p = subprocess.run([sys.executable, "-c", MEASURE, sys.executable, "-m", "subconscious", "import", str(path)],
                       capture_output=True, text=True, env=env, timeout=300)
    out = json.loads(p.stdout)
    print(f"\nimport of {path.name} ({path.stat().st_size / 1024:.0f} KiB): exit {out['rc']}, "
          f"{out['seconds']:.2f} s, peak RSS {out['peak_mib']:.1f} MiB: {out['stderr'].strip()[:160]}")
    return out


def _refused(out: dict, why: str) -> None:
    assert out["rc"] == 1 and out["stderr"].startswith("subconscious import: refused: ") and why in out["stderr"], out
    assert "Traceback" not in out["stderr"]
    assert out["peak_mib"] < PEAK_BOUND_MIB, out["peak_mib"]


def test_the_gzip_bomb_of_seven_64_mib_members_is_refused_at_its_first_header(tmp_path):
    path = _bomb(tmp_path / "bomb.tar.gz", [(f"sessions/session-b{i}.json", 64 * MiB) for i in range(7)])
    assert path.stat().st_size < 600 * 1024  # 448 MiB inside
    _refused(_import(tmp_path, path), "is 67108864 bytes; at most 4194304 for it")
    assert not (tmp_path / "home" / ".letta").exists()  # nothing merged, nothing written


def test_members_each_within_their_cap_but_too_many_bytes_in_all_are_refused_while_streaming(tmp_path):
    members = [("conversations.json", 64 * MiB)] + [(f"sessions/session-b{i}.json", 4 * MiB) for i in range(40)]
    out = _import(tmp_path, _bomb(tmp_path / "total.tar.gz", members))
    _refused(out, f"the members add up to more than {archive.TOTAL_MAX} bytes")


def test_a_million_directory_entries_are_refused_at_the_second(tmp_path):
    path = tmp_path / "dirs.tar.gz"
    thousand = gzip.compress(_header("sessions/", 0, tarfile.DIRTYPE) * 1000)
    path.write_bytes(gzip.compress(_manifest()) + thousand * 999 + gzip.compress(bytes(1024)))
    _refused(_import(tmp_path, path), "member 'sessions/' appears twice")


def _numbered(n: int) -> bytes:
    """``n`` empty members sessions/session-x000000.json, ... (one header made, the others by changing its digits
    and checksum: tarfile would take seconds)."""
    template = bytearray(_header("sessions/session-x000000.json", 0))
    at = template.index(b"000000")
    template[148:156] = b" " * 8
    base = sum(template) - 6 * ord("0")
    out = []
    for i in range(n):
        digits = b"%06d" % i
        template[at:at + 6] = digits
        template[148:156] = b"%06o\0 " % (base + sum(digits))
        out.append(bytes(template))
        template[148:156] = b" " * 8
    return b"".join(out)


def test_more_members_than_a_home_holds_are_refused(tmp_path):
    blocks = _numbered(archive.MEMBERS_MAX + 1)
    path = tmp_path / "many.tar.gz"
    path.write_bytes(gzip.compress(_manifest() + blocks + bytes(1024), compresslevel=1))
    _refused(_import(tmp_path, path), f"more than {archive.MEMBERS_MAX} members")


def test_a_header_that_lies_about_its_size_is_refused_as_truncated(tmp_path, monkeypatch):
    """The header says 3 MiB, the stream holds one: read with a counter, never trusted."""
    path = tmp_path / "short.tar.gz"
    path.write_bytes(gzip.compress(_manifest()) + gzip.compress(_header("sessions/session-a.json", 3 * MiB)) + ZERO_MIB)
    with pytest.raises(ArchiveError, match="truncated"):
        read_archive(path)
    big_pax = tarfile.TarInfo("sessions/session-" + "a" * 120 + ".json")
    big_pax.pax_headers = {"comment": "x" * (archive.PAX_MAX + 1)}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        tar.addfile(big_pax, io.BytesIO(b""))
    path.write_bytes(buf.getvalue())
    with pytest.raises(ArchiveError, match="pax header of"):
        read_archive(path)


def test_long_session_names_in_pax_headers_round_trip(tmp_path):
    sid = "s" * 128
    state = SessionState(sid, conversation_id="c", last_processed_index=3).to_json()
    write_archive(tmp_path / "x.tar.gz", archive.Contents(MANIFEST, {}, {}, {sid: state}))
    assert read_archive(tmp_path / "x.tar.gz").sessions == {sid: state}


def test_versions_stamped_beyond_the_allowed_skew_are_refused_with_a_message(tmp_path):
    """An entry stamped in 2100 and a session with cursor 10**9 stamped in 2100 would win every merge and stay."""
    now = int(time.time() * 1000)
    future, near = "4102444800000:0", f"{now + ALLOWED_SKEW_MS // 2}:0"  # 2100-01-01; half a day ahead
    convs = {"evil": {"conversationId": "conv-x", "agentId": "agent-x", "host": "m", "hlc": future},
             "fine": {"conversationId": "conv-f", "agentId": "agent-f", "host": "m", "hlc": near}}
    sessions = {"evil": {**SessionState("evil", conversation_id="conv-x", last_processed_index=10**9).to_json(),
                         "hlc": future, "host": "m"}}
    path = tmp_path / "future.tar.gz"
    write_archive(path, archive.Contents(MANIFEST, convs, {"agentId": {"value": "agent-x", "hlc": future, "host": "m"}},
                                         sessions))
    out = _import(tmp_path, path)
    assert out["rc"] == 1, out
    lines = out["stdout"].splitlines()
    refused = [line for line in lines if "2100-01-01 00:00 UTC, more than 24 h after this machine's clock" in line]
    assert len(refused) == 3 and any("conversations 'evil'" in x for x in refused) and any(
        "session 'evil'" in x for x in refused) and any("settings 'agentId'" in x for x in refused), lines
    assert lines[0].startswith("subconscious import: 1 entries and 0 settings merged"), lines
    home = tmp_path / "home" / ".letta" / "claude"
    view = json.loads((home / "conversations.json").read_text())
    assert "evil" not in view and "fine" in view
    assert not (home / "session-evil.json").exists()


def test_a_flood_of_pax_headers_without_members_is_bounded_too(tmp_path):
    record = b"%d comment=%s\n"
    body = b"x" * 60_000
    rec = record % (len(record % (99999, body)), body)
    pax = tarfile.TarInfo("././@PaxHeader")
    pax.size, pax.type = len(rec), tarfile.XHDTYPE
    block = pax.tobuf(format=tarfile.USTAR_FORMAT) + rec + bytes(-len(rec) % 512)
    path = tmp_path / "pax.tar.gz"
    path.write_bytes(gzip.compress(_manifest()) + gzip.compress(block * 3000))  # 180 MB of pax headers
    with pytest.raises(ArchiveError, match="with pax headers"):
        read_archive(path)


def test_a_fifo_or_a_directory_given_as_the_archive_is_refused_at_once(tmp_path):
    fifo = tmp_path / "backup.tar.gz"
    os.mkfifo(fifo)
    for path in (fifo, tmp_path):
        with pytest.raises(ArchiveError, match="not a regular file|cannot read"):
            read_archive(path)


def _json_bomb(path: Path, members: list[tuple[str, bytes]]) -> Path:
    body = _manifest() + b"".join(_header(n, len(b)) + b + bytes(-len(b) % 512) for n, b in members) + bytes(1024)
    path.write_bytes(gzip.compress(body, compresslevel=9))
    return path


def test_json_made_of_tiny_values_within_the_caps_is_refused_before_it_is_parsed(tmp_path):
    """Red team: members within their byte caps whose JSON is all tiny values (``[],`` or ``{},`` or ``0,``
    repeated) parse to Python objects 20-30 times their size: a 63 KiB archive took 1.7 GB, one of 122 KiB
    3.1 GB and 63 s and was accepted (30 sessions merged). An export's JSON holds at most one value (an array,
    object or list item) per 16 bytes or so; more is refused before parsing."""
    lists = _json_bomb(tmp_path / "lists.tar.gz", [("conversations.json", b'{"a":[' + b"[]," * (21 * MiB) + b"[]]}")])
    out = _import(tmp_path / "a", lists)
    assert out["rc"] == 1 and "member 'conversations.json' holds 44040195 JSON values" in out["stderr"], out
    assert "Traceback" not in out["stderr"]
    assert out["peak_mib"] < 4 * archive.MEMBER_MAX / MiB, out["peak_mib"]  # the member, counted: ~210 MiB
    sessions = _json_bomb(tmp_path / "sessions.tar.gz", [(f"sessions/session-s{i}.json", b'{"x":[' + b"0," * (2 * MiB - 8) + b"0]}")
                                                          for i in range(30)])
    out = _import(tmp_path / "b", sessions)
    _refused(out, "holds")
    assert not (tmp_path / "b" / "home" / ".letta").exists()  # nothing merged


def test_a_real_export_of_many_entries_is_not_taken_for_a_bomb(tmp_path):
    from subconscious.state.records import SessionState as S

    convs = {f"s{i:06d}": {"conversationId": f"conv-{i:06d}", "agentId": "agent-a", "host": "m",
                           "hlc": f"{int(time.time() * 1000)}:0"} for i in range(20_000)}
    sessions = {f"s{i}": {**S(f"s{i}", conversation_id=f"conv-{i}", last_processed_index=i).to_json(),
                          "hlc": f"{int(time.time() * 1000)}:0", "host": "m"} for i in range(200)}
    write_archive(tmp_path / "x.tar.gz", archive.Contents(MANIFEST, convs, {}, sessions))
    got = read_archive(tmp_path / "x.tar.gz")
    assert len(got.conversations) == 20_000 and len(got.sessions) == 200


def test_an_archive_of_mostly_invalid_entries_is_refused_whole_without_checking_them_all(tmp_path):
    """Red team: 2.7 million entries with 20-byte keys and empty values (6.9 MB of gzip, each within every
    cap and the values bound) were checked one by one: 102 s, 600 MiB, and 2.7 million "skipped (invalid)"
    lines. More than INVALID_MAX invalid versions: not an export; refused whole, nothing merged."""
    now = int(time.time() * 1000)
    convs = {f"bad{i:05d}": "" for i in range(archive.INVALID_MAX + 1)}
    convs["fine"] = {"conversationId": "conv-f", "agentId": "agent-f", "host": "m", "hlc": f"{now}:0"}
    path = tmp_path / "invalid.tar.gz"
    write_archive(path, archive.Contents(MANIFEST, convs, {}, {}))
    out = _import(tmp_path, path)
    assert out["rc"] == 1 and out["stdout"] == "", out
    assert out["stderr"].startswith("subconscious import: refused: ") and "invalid" in out["stderr"], out
    assert len(out["stderr"].splitlines()) < 20
    assert not (tmp_path / "home" / ".letta" / "claude" / "conversations.json").exists()  # nothing merged
