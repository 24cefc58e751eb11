"""`subconscious merge-driver %O %A %B [%P]` keeps git's contract: result in %A, exit 0 when merged,
1 only when no side can be read (both kept between markers), 2 for usage errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from subconscious.state.conflicts.filemerge import SESSION, SHARD, VIEW, render
from subconscious.state.records import SessionState


def entry(n: int, hlc: int, host: str = "alpha") -> dict:
    return {"agentId": "agent-1", "conversationId": f"conv-{n}", "hlc": f"{hlc}:0", "host": host}


def driver(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "subconscious", "merge-driver", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=60)


def files(tmp: Path, o: bytes, a: bytes, b: bytes) -> tuple[str, str, str]:
    names = (".merge_file_O", ".merge_file_A", ".merge_file_B")
    for name, data in zip(names, (o, a, b)):
        (tmp / name).write_bytes(data)
    return names


def test_a_three_way_merge_of_the_view_goes_to_ours_and_exits_0(tmp_path):
    o = {"s1": entry(1, 1), "gone": entry(9, 1)}
    a = {"s1": entry(1, 1), "s2": entry(2, 2)}  # ours added s2 and deleted "gone"
    b = {"s1": entry(11, 3, "beta"), "gone": entry(9, 1), "s3": entry(3, 3, "beta")}  # theirs edited s1, added s3
    names = files(tmp_path, *(render(VIEW, v).encode() for v in (o, a, b)))
    r = driver(tmp_path, *names, ".letta/claude/conversations.json")
    assert r.returncode == 0, r.stderr
    merged = (tmp_path / names[1]).read_text()
    assert json.loads(merged) == {"s1": entry(11, 3, "beta"), "s2": entry(2, 2), "s3": entry(3, 3, "beta")}
    assert merged == render(VIEW, json.loads(merged))  # canonical: the next diff stays small
    assert r.stdout == "" and r.stderr == ""


def test_without_path_the_kind_is_read_from_the_content(tmp_path):
    s = SessionState("abc", conversation_id="c", last_processed_index=4, stamp=None or SessionState("abc").stamp)
    a = render(SESSION, s.to_json()).encode()
    b = render(SESSION, dict(s.to_json(), lastProcessedIndex=12, hlc="1:0")).encode()
    names = files(tmp_path, b"", a, b)  # an add/add conflict: git passes an empty ancestor
    r = driver(tmp_path, *names)
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / names[1]).read_text())["lastProcessedIndex"] == 12


def test_shards_keep_tombstones_and_the_newest_clock(tmp_path):
    def shard(convs: dict, clock: str) -> bytes:
        return render(SHARD, {"format": 1, "host": "alpha", "name": "alpha", "clock": clock, "written": 5,
                              "conversations": convs, "settings": {}}).encode()

    tomb = {"deleted": True, "hlc": "7:0", "host": "alpha"}
    names = files(tmp_path, shard({"s1": entry(1, 1)}, "1:0"), shard({"s1": tomb}, "7:0"),
                  shard({"s1": entry(1, 1), "s2": entry(2, 3)}, "3:0"))
    r = driver(tmp_path, *names, "home/.letta/claude/hosts/alpha.json")
    assert r.returncode == 0, r.stderr
    merged = json.loads((tmp_path / names[1]).read_text())
    assert merged["conversations"] == {"s1": tomb, "s2": entry(2, 3)} and merged["clock"] == "7:0"


def test_an_unreadable_side_is_merged_around_and_kept_in_quarantine(tmp_path):
    state = tmp_path / ".letta" / "claude"
    state.mkdir(parents=True)
    theirs = {"s1": entry(1, 1), "s2": entry(2, 2)}
    names = files(tmp_path, render(VIEW, {"s1": entry(1, 1)}).encode(), b"\x00garbage", render(VIEW, theirs).encode())
    r = driver(tmp_path, *names, ".letta/claude/conversations.json")
    assert r.returncode == 0
    assert json.loads((tmp_path / names[1]).read_text()) == theirs
    assert "ours could not be read" in r.stderr and "kept a copy at" in r.stderr
    kept = [p for p in (state / "quarantine").iterdir() if not p.name.endswith(".about.json")]
    assert [p.read_bytes() for p in kept] == [b"\x00garbage"]


def test_nothing_readable_exits_1_with_both_versions_between_markers(tmp_path):
    names = files(tmp_path, b"{}", b"{ours broken", b"theirs broken")
    r = driver(tmp_path, *names, "conversations.json")
    assert r.returncode == 1
    text = (tmp_path / names[1]).read_text()
    assert text.startswith("<<<<<<< ours\n{ours broken\n=======\ntheirs broken\n>>>>>>> theirs")


def test_conflict_markers_left_by_an_earlier_merge_count_as_both_sides(tmp_path):
    earlier = ("{\n<<<<<<< HEAD\n" + '  "s1": ' + json.dumps(entry(1, 1)) + "\n=======\n"
               + '  "s2": ' + json.dumps(entry(2, 2)) + "\n>>>>>>> other\n}\n")
    names = files(tmp_path, b"{}\n", earlier.encode(), render(VIEW, {"s3": entry(3, 3)}).encode())
    r = driver(tmp_path, *names, "conversations.json")
    assert r.returncode == 0, r.stderr
    assert set(json.loads((tmp_path / names[1]).read_text())) == {"s1", "s2", "s3"}


def test_usage_errors_exit_2(tmp_path):
    assert driver(tmp_path).returncode == 2
    names = files(tmp_path, b"{}", b"{}", b"{}")
    r = driver(tmp_path, names[0], "missing-ours", names[2])
    assert r.returncode == 2 and "does not exist" in r.stderr
