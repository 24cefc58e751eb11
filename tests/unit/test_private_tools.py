"""The agent's own Read, Grep and Glob (issue 23): ``<private>`` blocks are hidden on the whole file before
any window, match or count is taken, and files of SUBCONSCIOUS_PRIVATE_PATHS — matched on the resolved path,
so a link to them does not help — are neither read, searched nor listed, and a search says nothing about what
it left out. Checked through execute(), the entry the worker uses (the tools run in a child process)."""
from __future__ import annotations

import json
import os

import pytest

from subconscious.letta.messages import ToolCallRequest
from subconscious.agent_tools.registry import ToolContext, execute

SECRET = "PRIV-L-agent-grep swordfish"
NOTES = ("intro line\n"
         "<private>\n"
         "the vault word is %s\n"
         "second hidden line ZZHIDDEN-2\n"
         "</private>\n"
         "public after the block\n") % SECRET
PLAN = "PRIV-PATH-plan launch codes 4711\n"


@pytest.fixture
def proj(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("SUBCONSCIOUS_PRIVATE_PATHS", "secrets/**")
    p = tmp_path / "proj"
    (p / "secrets").mkdir(parents=True)
    (p / "notes.md").write_text(NOTES)
    (p / "secrets" / "plan.txt").write_text(PLAN)
    (p / "readme.txt").write_text("launch the public site\n")
    return p


def text_of(proj, name, **args) -> str:
    """What the agent is sent for one call, less the echo of its own pattern ("No matches for 'x'")."""
    ctx = ToolContext.for_session("read-only", str(proj))
    o = execute(ToolCallRequest("c1", name, args, json.dumps(args)), ctx)
    out = o.result.output
    return out.replace(repr(args["pattern"]), "<pattern>") if "pattern" in args else out


def assert_clean(out: str) -> None:
    for s in ("swordfish", "PRIV-L", "ZZHIDDEN", "PRIV-PATH", "launch codes", "4711"):
        assert s not in out, (s, out)


def test_read_with_an_offset_inside_a_block_returns_no_private_text(proj):
    for offset in (2, 3, 4):
        out = text_of(proj, "Read", file_path="notes.md", offset=offset, limit=2)
        assert_clean(out)
    whole = text_of(proj, "Read", file_path="notes.md")
    assert_clean(whole)
    assert "intro line" in whole and "public after the block" in whole and "[private text removed]" in whole
    assert "     6\tpublic after the block" in whole  # line numbers are the file's


def test_grep_never_matches_inside_a_block_and_count_mode_is_no_oracle(proj):
    out = text_of(proj, "Grep", pattern="swordfish")
    assert_clean(out)
    assert "No matches" in out
    assert_clean(text_of(proj, "Grep", pattern="vault", output_mode="content"))
    # a yes/no oracle on the hidden text: the right guess and a wrong one must look the same
    right = text_of(proj, "Grep", pattern="word is s", output_mode="count")
    wrong = text_of(proj, "Grep", pattern="word is x", output_mode="count")
    assert right == wrong
    files = text_of(proj, "Grep", pattern="ZZHIDDEN", output_mode="files_with_matches")
    assert "notes.md" not in files
    assert "notes.md:6:public after the block" in text_of(proj, "Grep", pattern="public after")


def test_private_files_are_not_searched_and_the_search_does_not_say_so(proj, tmp_path):
    out = text_of(proj, "Grep", pattern="launch")
    assert_clean(out)
    assert "readme.txt" in out
    assert "private" not in out.lower() and "not sent" not in out
    none = text_of(proj, "Grep", pattern="4711")
    # the same answer as in a project without the private file
    (proj / "secrets" / "plan.txt").unlink()
    assert none == text_of(proj, "Grep", pattern="4711")
    assert "(2 files searched)" in none


def test_a_link_to_a_private_directory_reaches_nothing(proj):
    os.symlink("secrets", proj / "docs")  # ln -s secrets docs
    assert_clean(text_of(proj, "Read", file_path="docs/plan.txt"))
    assert_clean(text_of(proj, "Grep", pattern="launch", path="docs"))
    assert_clean(text_of(proj, "Grep", pattern="launch", path="docs/plan.txt"))
    assert_clean(text_of(proj, "Grep", pattern="launch", path="docs", output_mode="count"))
    listed = text_of(proj, "Glob", pattern="**/*")
    assert "plan.txt" not in listed and "readme.txt" in listed
    assert "plan.txt" not in text_of(proj, "Glob", pattern="*", path="docs")


def test_a_link_to_a_private_file_reaches_nothing(proj):
    os.symlink("secrets/plan.txt", proj / "plan-link.txt")
    assert_clean(text_of(proj, "Read", file_path="plan-link.txt"))
    out = text_of(proj, "Grep", pattern="launch")
    assert_clean(out)
    assert "plan-link" not in out
    assert "plan-link" not in text_of(proj, "Glob", pattern="*.txt")


def test_a_private_file_reached_by_its_absolute_path_or_dot_dot_is_refused(proj):
    for p in (str(proj / "secrets" / "plan.txt"), "readme.txt/../secrets/plan.txt", "./secrets//plan.txt"):
        assert_clean(text_of(proj, "Read", file_path=p))


def test_full_modes_edit_and_write_through_a_link_to_a_private_file_are_refused(proj):
    """An Edit's answer ("old_string was not found" / "occurs 2 times") is an oracle on the file: through a
    link to a private path it must not run either."""
    os.symlink("secrets", proj / "docs")
    ctx = ToolContext.for_session("full", str(proj))
    for name, args in (("Edit", {"file_path": "docs/plan.txt", "old_string": "launch", "new_string": "x"}),
                       ("Write", {"file_path": "docs/new.txt", "content": "x"})):
        o = execute(ToolCallRequest("c1", name, args, json.dumps(args)), ctx)
        assert o.ran is False and "private path" in o.result.output, o.result.output
    assert (proj / "secrets" / "plan.txt").read_text() == PLAN and not (proj / "secrets" / "new.txt").exists()
