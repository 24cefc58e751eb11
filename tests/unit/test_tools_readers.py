"""Read, Grep and Glob on real files: what the agent sees, and the caps."""
from __future__ import annotations

import os
import time

import pytest

from subconscious.agent_tools.confine import Refused, Root, ToolError
from subconscious.agent_tools.limits import Limits
from subconscious.agent_tools.readers import glob, grep, looks_binary, read

ENV = {"HOME": "/nonexistent-home"}
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


@pytest.fixture
def proj(tmp_path):
    p = tmp_path / "proj"
    (p / "src" / "pkg").mkdir(parents=True)
    (p / "src" / "app.py").write_text("import os\n\ndef main():\n    return 'MARKER'\n")
    (p / "src" / "pkg" / "util.py").write_text("def helper():\n    # TODO: marker here\n    pass\n")
    (p / "src" / "pkg" / "web.ts").write_text("const Marker = 1;\n")
    (p / "docs").mkdir()
    (p / "docs" / "notes.md").write_text("\n".join(f"line {i}" for i in range(1, 5001)) + "\n")
    (p / "logo.png").write_bytes(PNG)
    (p / "empty.txt").write_text("")
    (p / ".gitignore").write_text("dist/\n")
    (p / "dist").mkdir()
    (p / "dist" / "bundle.js").write_text("MARKER in a build output\n")
    return p


def call(fn, proj, limits=Limits(), **args):
    return fn(Root(str(proj), ENV), args, limits, time.monotonic() + 30)


def rows(out: str) -> list[str]:
    """The result lines, without the [notes]."""
    return [r for r in out.splitlines() if not r.startswith("[")]


def test_read_numbers_lines(proj):
    out = call(read, proj, file_path="src/app.py")
    assert out.splitlines()[0] == "     1\timport os"
    assert "     4\t    return 'MARKER'" in out


def test_read_offset_and_limit(proj):
    out = call(read, proj, file_path="docs/notes.md", offset=10, limit=3)
    assert out.splitlines()[:3] == ["    10\tline 10", "    11\tline 11", "    12\tline 12"]
    assert "[showing lines 10-12 of 5000" in out


def test_read_stops_at_the_result_cap_and_says_how_to_go_on(proj):
    out = call(read, proj, Limits(max_result_chars=1000), file_path="docs/notes.md")
    assert len(out) <= 1100
    assert "use offset/limit to read more" in out


def test_read_describes_binary_files(proj):
    out = call(read, proj, file_path="logo.png")
    assert "PNG image" in out and f"{len(PNG):,} bytes" in out
    assert "\x89" not in out and "\x00" not in out


def test_read_refuses_big_files(proj):
    (proj / "big.txt").write_text("x" * 5000)
    with pytest.raises(ToolError, match="over the 1,000-byte limit"):
        call(read, proj, Limits(max_file_bytes=1000), file_path="big.txt")


def test_read_errors(proj):
    with pytest.raises(ToolError, match="directory"):
        call(read, proj, file_path="src")
    with pytest.raises(ToolError, match="no such file"):
        call(read, proj, file_path="nope.py")
    with pytest.raises(ToolError, match="past the end"):
        call(read, proj, file_path="src/app.py", offset=99)
    with pytest.raises(ToolError, match="file_path is required"):
        call(read, proj)
    with pytest.raises(ToolError, match="must be a number"):
        call(read, proj, file_path="src/app.py", offset="abc")
    assert "empty file" in call(read, proj, file_path="empty.txt")
    with pytest.raises(Refused):
        call(read, proj, file_path="dist/bundle.js")


def test_long_lines_are_cut(proj):
    (proj / "wide.txt").write_text("y" * 5000 + "\n")
    out = call(read, proj, Limits(max_line_chars=100), file_path="wide.txt")
    assert "[line cut]" in out and len(out) < 200


def test_grep_content_mode(proj):
    out = call(grep, proj, pattern="MARKER")
    assert rows(out) == ["src/app.py:4:    return 'MARKER'"]  # dist/ is ignored, the rest differs in case
    assert "[1 binary file(s) not searched]" in out  # logo.png


def test_grep_case_insensitive_glob_and_modes(proj):
    out = call(grep, proj, pattern="marker", case_insensitive=True)
    assert set(rows(out)) == {"src/app.py:4:    return 'MARKER'", "src/pkg/util.py:2:    # TODO: marker here",
                                     "src/pkg/web.ts:1:const Marker = 1;"}
    assert call(grep, proj, pattern="marker", case_insensitive=True, glob="*.py", output_mode="files_with_matches"
                ).splitlines() == ["src/app.py", "src/pkg/util.py"]
    assert call(grep, proj, pattern="line", path="docs", output_mode="count").splitlines() == ["docs/notes.md:5000"]
    assert call(grep, proj, pattern="marker", case_insensitive=True, glob="*.{ts,md}",
                output_mode="files_with_matches").splitlines() == ["src/pkg/web.ts"]
    assert call(grep, proj, pattern="def", path="src/pkg/util.py").splitlines() == ["src/pkg/util.py:1:def helper():"]


def test_grep_caps_matches_and_skips_binaries(proj):
    out = call(grep, proj, Limits(max_matches=5), pattern=r"line \d+")
    assert len(rows(out)) == 5 and "stopped at the limit" in out
    (proj / "blob.bin").write_bytes(b"MARKER\x00\x01\x02")
    out = call(grep, proj, pattern="MARKER")
    assert rows(out) == ["src/app.py:4:    return 'MARKER'"] and "2 binary file(s) not searched" in out


def test_grep_errors(proj):
    with pytest.raises(ToolError, match="invalid regular expression"):
        call(grep, proj, pattern="(")
    with pytest.raises(ToolError, match="output_mode"):
        call(grep, proj, pattern="x", output_mode="lines")
    with pytest.raises(Refused):
        call(grep, proj, pattern="x", path="..")
    assert call(grep, proj, pattern="nothing-like-this").startswith("No matches")


def test_glob_patterns(proj):
    assert set(call(glob, proj, pattern="**/*.py").splitlines()) == {"src/app.py", "src/pkg/util.py"}
    assert call(glob, proj, pattern="*.py", path="src").splitlines() == ["src/app.py"]
    assert call(glob, proj, pattern="src/*/*.ts").splitlines() == ["src/pkg/web.ts"]
    assert call(glob, proj, pattern=str(proj / "src" / "*.py")).splitlines() == ["src/app.py"]
    assert call(glob, proj, pattern="**/*.js").startswith("No files match")  # dist/ is ignored
    with pytest.raises(Refused):
        call(glob, proj, pattern="../**")
    with pytest.raises(Refused):
        call(glob, proj, pattern="/etc/*")


def test_glob_sorts_newest_first_and_caps(proj):
    now = time.time()
    os.utime(proj / "src" / "pkg" / "util.py", (now + 100, now + 100))
    assert call(glob, proj, pattern="**/*.py").splitlines()[0] == "src/pkg/util.py"
    out = call(glob, proj, Limits(max_paths=2), pattern="**/*")
    assert len(rows(out)) == 2 and "showing the 2 most recently" in out


def test_binary_sniffing():
    assert looks_binary(b"abc\x00def")
    assert not looks_binary("héllo wörld\n".encode())
    assert not looks_binary("é".encode()[:1])  # a character cut by the sniff window
    assert looks_binary(bytes(range(128, 256)) * 10)
