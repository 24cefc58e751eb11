"""Claude Code's own tool results and answers in the transcript (issue 23): a Read window with an offset
inside a private block, Grep lines inside one, and a private passage spread over several content blocks of
one answer never reach the update; where the worker cannot decide, the result is withheld and the update
says so; a result of a file without any private tag passes exactly as it was."""
from __future__ import annotations

import json
import os
import uuid

import pytest

from subconscious.privacy.results import project_reader
from subconscious.delivery.transcript import build_update

WITHHELD = "withheld: could not check it for private text"


class T:
    """Transcript lines in Claude Code 2.1.332's shapes (one line per content block, same message id)."""

    def __init__(self):
        self.lines: list[str] = []

    def add(self, obj: dict) -> None:
        self.lines.append(json.dumps({"uuid": str(uuid.uuid4()), "sessionId": "s1", **obj}))

    def user(self, text: str) -> None:
        self.add({"type": "user", "message": {"role": "user", "content": text}})

    def blocks(self, *texts: str) -> None:
        mid = "msg_" + uuid.uuid4().hex[:10]
        for t in texts:
            self.add({"type": "assistant", "message": {"id": mid, "role": "assistant", "content": [
                {"type": "text", "text": t}]}})

    def tool(self, name: str, tool_input: dict, result: str) -> None:
        tid = "toolu_" + uuid.uuid4().hex[:10]
        self.add({"type": "assistant", "message": {"id": "msg_" + uuid.uuid4().hex[:10], "role": "assistant",
                                                   "content": [{"type": "tool_use", "id": tid, "name": name,
                                                                "input": tool_input}]}})
        self.add({"type": "user", "message": {"role": "user", "content": [
            {"tool_use_id": tid, "type": "tool_result", "content": result}]}})


def update(t: T, project=None, cursor: int = -1) -> str:
    files = project_reader(str(project)) if project is not None else None
    u = build_update(t.lines, cursor, "s1", files=files, cwd=str(project) if project else None)
    return u.payload or ""


def long_file(project, n=2600, block=(2500, 2510)) -> tuple[str, list[str]]:
    lines = [f"line {i} public" for i in range(1, n + 1)]
    a, b = block
    lines[a - 1] = "<private>"
    for i in range(a, b - 1):
        lines[i] = f"PRIV-F-read-with-offset {i + 1}"
    lines[b - 1] = "</private>"
    path = project / "big.md"
    path.write_text("\n".join(lines) + "\n")
    return str(path), lines


def read_result(lines: list[str], offset: int, limit: int) -> str:
    """Claude Code's Read result: "N\\tline" for the window (2.1.332 writes no padding)."""
    return "\n".join(f"{i}\t{lines[i - 1]}" for i in range(offset, min(len(lines), offset + limit - 1) + 1))


@pytest.fixture
def project(tmp_path):
    p = tmp_path / "project"
    p.mkdir()
    return p


def test_a_read_with_an_offset_inside_a_block_sends_no_private_line(project):
    path, lines = long_file(project)
    t = T()
    t.user("read the big file")
    t.tool("Read", {"file_path": path, "offset": 2502, "limit": 5}, read_result(lines, 2502, 5))  # no tag in it
    t.tool("Read", {"file_path": path, "offset": 2503, "limit": 20}, read_result(lines, 2503, 20))
    out = update(t, project)
    assert "PRIV-F" not in out
    assert "2511\tline 2511 public" in out and "[private text removed]" in out


def test_without_the_file_a_window_that_may_be_private_is_withheld_and_says_so(project):
    path, lines = long_file(project)
    t = T()
    t.tool("Read", {"file_path": path, "offset": 2503, "limit": 5}, read_result(lines, 2503, 5))
    os.unlink(path)  # gone since Claude Code read it
    out = update(t, project)
    assert "PRIV-F" not in out and f"[Tool Result: Read {WITHHELD}]" in out


def test_a_file_changed_since_the_read_is_withheld(project):
    path, lines = long_file(project)
    t = T()
    t.tool("Read", {"file_path": path, "offset": 2503, "limit": 5}, read_result(lines, 2503, 5))
    with open(path, "w") as fh:  # an edit above the window moved every line
        fh.write("new first line\n" + "\n".join(lines) + "\n")
    out = update(t, project)
    assert "PRIV-F" not in out and WITHHELD in out


def test_a_result_of_a_file_without_tags_passes_as_it_is(project):
    plain = project / "plain.md"
    plain.write_text("\n".join(f"row {i}" for i in range(1, 3001)) + "\n")
    rows = plain.read_text().splitlines()
    t = T()
    t.tool("Read", {"file_path": str(plain), "offset": 2001, "limit": 3}, read_result(rows, 2001, 3))
    t.tool("Grep", {"pattern": "row 2", "output_mode": "content", "-n": True, "path": str(project)},
           f"{plain}:2:row 2\n{plain}:20:row 20")
    out = update(t, project)
    assert "2001\trow 2001\n2002\trow 2002\n2003\trow 2003" in out
    assert f"{plain}:2:row 2\n{plain}:20:row 20" in out
    assert WITHHELD not in out


def test_grep_lines_inside_a_block_are_dropped(project):
    notes = project / "notes.md"
    notes.write_text("public one\n<private>\nthe word is PRIV-G-grep swordfish\n</private>\npublic swordfish two\n")
    t = T()
    t.tool("Grep", {"pattern": "swordfish", "output_mode": "content", "path": str(project)},
           f"{notes}:3:the word is PRIV-G-grep swordfish\n{notes}:5:public swordfish two")
    t.tool("Grep", {"pattern": "swordfish", "output_mode": "content", "path": str(notes)},
           "3:the word is PRIV-G-grep swordfish\n5:public swordfish two")
    t.tool("Grep", {"pattern": "swordfish", "output_mode": "content", "path": "notes.md", "-n": False},
           "the word is PRIV-G-grep swordfish\npublic swordfish two")
    out = update(t, project)
    assert "PRIV-G" not in out
    assert f"{notes}:5:public swordfish two" in out and "5:public swordfish two" in out
    assert out.count("public swordfish two") == 3


def test_grep_lines_of_a_file_that_cannot_be_read_are_withheld(project):
    t = T()
    t.tool("Grep", {"pattern": "x", "output_mode": "content", "path": str(project)},
           f"{project}/gone.md:3:PRIV-G-gone")
    out = update(t, project)
    assert "PRIV-G" not in out and f"[Tool Result: Grep {WITHHELD}]" in out


def test_a_read_from_the_start_of_an_unreadable_file_is_judged_on_its_text(project):
    t = T()
    t.tool("Read", {"file_path": "/nonexistent/x.md"}, "1\tpublic head\n2\t<private>\n3\tPRIV-R\n4\t</private>\n5\ttail")
    out = update(t, project)
    assert "PRIV-R" not in out and "public head" in out and "tail" in out and WITHHELD not in out


def test_a_private_passage_over_three_answer_blocks_hides_the_middle_one_too():
    t = T()
    t.user("tell me")
    t.blocks("public start <private>PRIV-A-one", "PRIV-A-middle", "PRIV-A-three</private> public end")
    out = update(t)
    assert "PRIV-A" not in out and "public start" in out and "public end" in out
    for cursor in (1, 2):  # the cursor cut the answer: its earlier blocks still count
        part = update(t, cursor=cursor)
        assert "PRIV-A" not in part, cursor


def test_the_project_reader_does_not_read_through_a_link_out_of_the_project(project, tmp_path):
    outside = tmp_path / "outside.md"
    outside.write_text("outside\n")
    os.symlink(outside, project / "link.md")
    (project / "in.md").write_text("inside\n")
    os.symlink("in.md", project / "alias.md")
    read = project_reader(str(project))
    assert read(str(project / "link.md")) is None
    assert read(str(outside)) is None and read("/etc/hostname") is None
    assert read(str(project / "alias.md")) == "inside\n" and read("in.md") == "inside\n"


def test_grep_lines_with_paths_relative_to_the_session_directory(project):
    """Claude Code 2.1.332 names files relative to its directory: "sub/notes.md:3:text"."""
    (project / "sub").mkdir()
    (project / "sub" / "notes.md").write_text("<private>\nPRIV-G-rel swordfish\n</private>\nok swordfish\n")
    t = T()
    t.tool("Grep", {"pattern": "swordfish", "output_mode": "content", "path": "sub"},
           "sub/notes.md:2:PRIV-G-rel swordfish\nsub/notes.md:4:ok swordfish")
    t.tool("Grep", {"pattern": "swordfish", "output_mode": "content"},
           "sub/notes.md:2:PRIV-G-rel swordfish\nsub/notes.md:4:ok swordfish")
    out = update(t, project)
    assert "PRIV-G" not in out and out.count("sub/notes.md:4:ok swordfish") == 2 and WITHHELD not in out


def test_a_grep_line_that_only_looks_like_a_note_is_checked_too(project):
    (project / "[x].md").write_text("<private>\nPRIV-G-bracket\n</private>\n")
    t = T()
    t.tool("Grep", {"pattern": "PRIV", "output_mode": "content"}, "[x].md:2:PRIV-G-bracket\nFound 1 line")
    t.tool("Grep", {"pattern": "PRIV"}, "[x].md:2:PRIV-G-bracket")  # no mode given
    out = update(t, project)
    assert "PRIV-G" not in out and "Found 1 line" in out


def test_a_read_from_line_one_of_a_file_edited_since_is_judged_on_its_text(project):
    f = project / "n.md"
    f.write_text("a\n<private>\nPRIV-E\n</private>\nb\n")
    t = T()
    t.tool("Read", {"file_path": str(f)}, "1\ta\n2\t<private>\n3\tPRIV-E\n4\t</private>\n5\tb")
    f.write_text("edited\n" + f.read_text())
    out = update(t, project)
    assert "PRIV-E" not in out and "5\tb" in out and WITHHELD not in out


def test_claude_codes_read_through_a_link_to_a_private_path_is_not_sent(project):
    (project / "secrets").mkdir()
    (project / "secrets" / "plan.txt").write_text("PRIV-PATH-link\n")
    os.symlink("secrets", project / "docs")  # ln -s secrets docs
    t = T()
    t.tool("Read", {"file_path": str(project / "docs" / "plan.txt")}, "1\tPRIV-PATH-link")
    u = build_update(t.lines, -1, "s1", files=project_reader(str(project)), cwd=str(project),
                     private_paths=("secrets/**",))
    assert "PRIV-PATH" not in u.payload
    assert "[the result of Read on a private path (SUBCONSCIOUS_PRIVATE_PATHS) was not sent]" in u.payload


def test_a_read_shaped_result_whose_call_is_unknown_is_withheld_if_it_may_start_inside_a_block(project):
    tid = "toolu_lost"
    t = T()
    t.add({"type": "user", "message": {"role": "user", "content": [
        {"tool_use_id": tid, "type": "tool_result", "content": "41\tPRIV-U-lost\n42\tPRIV-U-lost"}]}})
    t.add({"type": "user", "message": {"role": "user", "content": [
        {"tool_use_id": "toolu_other", "type": "tool_result", "content": "1\tfrom the top"}]}})
    out = update(t, project)
    assert "PRIV-U" not in out and f"[Tool Result: unknown {WITHHELD}]" in out and "1\tfrom the top" in out
