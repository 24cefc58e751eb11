"""Private text found by its words (privacy/textindex.py, privacy/projectindex.py), whichever tool printed it:
an MCP server's read or write, Bash ``cat`` and ``sed -n``, a subagent quoting a file, Claude repeating it.

The index is built from the project's files; every line of anything the worker sends that holds a private
line is withheld with a visible marker, while public lines pass untouched."""
from __future__ import annotations

import json
import os
import threading

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from subconscious.delivery.lines import ToolResult, ToolUse, AssistantText, UserText
from subconscious.delivery.update_xml import INPUT_NOTE, RESULT_CUT, format_entries
from subconscious.privacy.private import MARKER, PATH_NOTE, private_result, tool_paths
from subconscious.privacy.projectindex import project_index
from subconscious.privacy.textindex import PrivateLines, file_lines, meaningful
from tests.harness.sizes import examples

NOTES = ("intro public line\n<private>\nthe vault word is PRIV-BLOCK swordfish\n  second PRIV-BLOCK2 line here\n"
         "import os.path\nx = 1\n</private>\npublic after the block\nimport os.path\n")
DB = 'PRIV-PATH db password line\n{"k": "quoted \\"PRIV-Q\\" value"}\n'


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "notes.md").write_text(NOTES)
    (root / "secrets").mkdir()
    (root / "secrets" / "db.txt").write_text(DB)
    (root / "src.py").write_text("def f():\n    return 'public code line'\n")
    return root


def index_of(root, tmp_path, **kw) -> PrivateLines:
    return project_index(str(root), ["secrets/**"], tmp_path / "cache", **kw)


# --- the pure core --------------------------------------------------------------------------------------

def test_a_files_private_lines_are_its_block_lines_and_a_private_files_lines():
    priv, pub = file_lines(NOTES, False)
    assert priv == ["the vault word is PRIV-BLOCK swordfish", "second PRIV-BLOCK2 line here", "import os.path"]
    assert "public after the block" in pub and "import os.path" in pub
    assert file_lines(DB, True)[0] == DB.strip().split("\n") and file_lines(DB, True)[1] == []
    assert file_lines("one <private>inline PRIV-INLINE words</private> two\n", False)[0] == ["inline PRIV-INLINE words"]


def test_short_and_symbol_lines_mean_nothing_and_are_left_out():
    assert meaningful("x = 1") is None and meaningful("}}}}}}}}}}") is None and meaningful("--------") is None
    assert meaningful("  hunter22  ") == "hunter22"


def test_a_line_that_is_also_public_is_left_out():
    idx = PrivateLines.of(["import os.path", "the vault word is swordfish"], ["import os.path"])
    assert not idx.hit("import os.path") and idx.hit("the vault word is swordfish")


WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGH0123456789 .,:;=-_/\"'\\{}()é✓", min_size=0, max_size=30)
SECRET = st.text(alphabet="ABCDEFGHJKLMNPQRSTUVWXYZ23456789", min_size=8, max_size=20)


@settings(max_examples=examples(300), deadline=None)
@given(secrets=st.lists(SECRET, min_size=1, max_size=4), pre=WORD, post=WORD,
       lines=st.lists(st.one_of(WORD, st.just("@")), max_size=8), at=st.integers(0, 8))
def test_no_private_line_survives_the_scrub_and_public_lines_pass_whole(secrets, pre, post, lines, at):
    idx = PrivateLines.of(secrets)
    public = [ln for ln in lines if not any(s in ln for s in secrets)]
    chosen = secrets[at % len(secrets)]
    text_lines = public[:at] + [pre + chosen + post] + public[at:]
    out = idx.scrub("\n".join(text_lines))
    assert not any(s in out for s in secrets)
    assert MARKER in out
    kept = out.split("\n")
    assert [ln for ln in kept if ln != MARKER] == [ln for ln in public[:at] + public[at:] if ln != MARKER]


@settings(max_examples=examples(200), deadline=None)
@given(secret=SECRET.map(lambda s: 'say "%s" \\ done' % s))
def test_a_private_line_escaped_inside_a_json_string_is_found_too(secret):
    idx = PrivateLines.of([secret])
    printed = json.dumps({"content": "first\n" + secret + "\nlast"})  # one line, the text escaped in it
    assert idx.hit(printed) and secret not in idx.scrub(printed)
    printed_ascii = json.dumps({"content": secret + " ✓"}, ensure_ascii=True)
    assert idx.hit(printed_ascii)


def test_a_tool_input_is_scrubbed_at_any_depth_and_a_too_deep_one_whole():
    idx = PrivateLines.of(["the vault word is swordfish"])
    got = idx.scrub_value({"a": [{"b": "x\nthe vault word is swordfish\ny"}], "the vault word is swordfish": 1})
    assert "swordfish" not in json.dumps(got) and "x\n" + MARKER + "\ny" == got["a"][0]["b"]
    deep: object = "the vault word is swordfish"
    for _ in range(5000):
        deep = [deep]
    assert idx.scrub_value(deep) == MARKER


# --- the project's files --------------------------------------------------------------------------------

def test_the_index_holds_block_lines_and_private_files_but_not_public_or_common_lines(project, tmp_path):
    idx = index_of(project, tmp_path)
    assert idx.hit("cat: the vault word is PRIV-BLOCK swordfish") and idx.hit("     3\tsecond PRIV-BLOCK2 line here")
    assert idx.hit("PRIV-PATH db password line") and idx.hit('{"k": "quoted \\"PRIV-Q\\" value"}')
    assert not idx.hit("import os.path") and not idx.hit("public after the block")
    assert not idx.hit("    return 'public code line'") and idx.partial is None


def test_the_cache_holds_no_private_text_and_follows_a_change(project, tmp_path):
    first = index_of(project, tmp_path)
    blobs = b"".join(p.read_bytes() for p in (tmp_path / "cache").iterdir())
    for word in (b"PRIV-BLOCK", b"swordfish", b"PRIV-PATH", b"password"):
        assert word not in blobs
    assert oct((tmp_path / "cache").stat().st_mode & 0o777) == "0o700"
    assert all(oct(p.stat().st_mode & 0o777) == "0o600" for p in (tmp_path / "cache").iterdir())
    (project / "notes.md").write_text(NOTES + "<private>\nnewly added PRIV-NEW words\n</private>\n")
    again = index_of(project, tmp_path)
    assert again.hit("newly added PRIV-NEW words") and not first.hit("newly added PRIV-NEW words")
    (project / "secrets" / "db.txt").unlink()  # a line printed before it went is sent later: still found
    assert index_of(project, tmp_path).hit("PRIV-PATH db password line")


def test_a_cache_that_is_garbage_or_a_link_is_rebuilt_not_trusted(project, tmp_path):
    index_of(project, tmp_path)
    for p in (tmp_path / "cache").iterdir():
        p.write_bytes(b'{"v": 1, "files": {"x": [1, 2, 3, 4, "!!", "??"]}, "deep": ' + b"[" * 100000)
    assert index_of(project, tmp_path).hit("PRIV-PATH db password line")
    for p in (tmp_path / "cache").iterdir():
        p.unlink()
        os.symlink(tmp_path / "elsewhere.json", p)
    assert index_of(project, tmp_path).hit("PRIV-PATH db password line")
    assert not (tmp_path / "elsewhere.json").exists()


def test_links_fifos_and_binaries_are_not_read(project, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("<private>\nOUTSIDE-PRIV words here\n</private>\n")
    os.symlink(outside, project / "link.md")
    os.mkfifo(project / "pipe.md")
    (project / "blob.bin").write_bytes(b"\x00\x01<private>\nBINARY-PRIV words here\n</private>\n")
    done: list = []
    t = threading.Thread(target=lambda: done.append(index_of(project, tmp_path)), daemon=True)
    t.start()
    t.join(20)
    assert done, "the index build hung on a FIFO"
    idx = done[0]
    assert not idx.hit("OUTSIDE-PRIV words here") and not idx.hit("BINARY-PRIV words here")
    assert idx.hit("the vault word is PRIV-BLOCK swordfish")


def test_past_its_bounds_the_index_says_it_is_partial(project, tmp_path):
    for i in range(5):
        (project / f"f{i}.md").write_text(f"<private>\nline of file {i} PRIV\n</private>\n")
    idx = index_of(project, tmp_path, max_files=3)
    assert idx.partial and "files" in idx.partial


def test_an_absolute_glob_outside_the_project_is_indexed(project, tmp_path):
    notes = tmp_path / "mynotes"
    notes.mkdir()
    (notes / "diary.txt").write_text("ABSOLUTE-PRIV diary entry words\n")
    idx = project_index(str(project), [str(notes) + "/*"], tmp_path / "cache")
    assert idx.hit("ABSOLUTE-PRIV diary entry words")


# --- what the update carries ----------------------------------------------------------------------------

def update_text(entries, idx, names, inputs, globs=("secrets/**",), cwd=None) -> str:
    return "\n".join(m.text for m in format_entries(entries, names, True, globs, inputs, None, cwd, idx))


def test_every_tool_of_any_name_withholds_its_private_lines(project, tmp_path):
    idx = index_of(project, tmp_path)
    calls = {
        "1": ("mcp__filesystem__read_text_file", {"path": str(project / "notes.md"), "tail": 6},
              "the vault word is PRIV-BLOCK swordfish\nsecond PRIV-BLOCK2 line here\nimport os.path\n"
              "public after the block"),
        "2": ("Bash", {"command": "cat secrets/db.txt"}, DB),
        "3": ("Bash", {"command": "sed -n 3p notes.md"}, "the vault word is PRIV-BLOCK swordfish"),
        "4": ("Task", {"description": "look", "prompt": "read the notes"},
              "The notes say: the vault word is PRIV-BLOCK swordfish\nNothing else."),
        "5": ("mcp__other__fetch", {"q": "x"}, json.dumps({"text": "a\nsecond PRIV-BLOCK2 line here\nb"})),
    }
    entries = []
    for k, (name, inp, result) in calls.items():
        entries += [ToolUse(k, name, inp), ToolResult(k, result, False)]
    entries.append(AssistantText("As the file says, the vault word is PRIV-BLOCK swordfish.\nDone."))
    entries.append(UserText("echo 'the vault word is PRIV-BLOCK swordfish' please"))
    names = {k: v[0] for k, v in calls.items()}
    inputs = {k: v[1] for k, v in calls.items()}
    text = update_text(entries, idx, names, inputs)
    for word in ("PRIV-BLOCK", "PRIV-PATH", "PRIV-Q", "swordfish"):
        assert word not in text, text
    assert text.count(MARKER) >= 6 and "public after the block" in text and "Nothing else." in text


def test_an_mcp_call_naming_a_private_path_sends_neither_its_input_nor_its_result(project, tmp_path):
    idx = PrivateLines()  # the path rule alone, without the index
    entries = [ToolUse("1", "mcp__filesystem__write_file",
                       {"path": str(project / "secrets" / "new.txt"), "content": "PRIV-WRITE brand new words"}),
               ToolResult("1", "Successfully wrote to secrets/new.txt", False),
               ToolUse("2", "mcp__filesystem__read_multiple_files",
                       {"paths": [str(project / "src.py"), str(project / "secrets" / "db.txt")]}),
               ToolResult("2", DB, False),
               ToolUse("3", "mcp__filesystem__read_text_file", {"filePath": "file://" + str(project / "secrets/db.txt")}),
               ToolResult("3", DB, False)]
    names = {"1": "mcp__filesystem__write_file", "2": "mcp__filesystem__read_multiple_files",
             "3": "mcp__filesystem__read_text_file"}
    inputs = {e.id: e.input for e in entries if isinstance(e, ToolUse)}
    text = update_text(entries, idx, names, inputs)
    assert "PRIV-WRITE" not in text and "PRIV-PATH" not in text, text
    assert INPUT_NOTE in text and str(project / "secrets" / "new.txt") in text
    assert text.count(PATH_NOTE % "mcp__filesystem__read_text_file") == 1


def test_a_link_to_a_private_dir_makes_an_mcp_read_private(project, tmp_path):
    os.symlink("secrets", project / "docs")
    entries = [ToolUse("1", "mcp__fs__read", {"path": "docs/db.txt"}), ToolResult("1", DB, False)]
    from subconscious.privacy.results import project_reader

    msgs = format_entries(entries, {"1": "mcp__fs__read"}, True, ("secrets/**",), {"1": entries[0].input},
                          project_reader(str(project)), str(project))
    assert "PRIV-PATH" not in "\n".join(m.text for m in msgs)


def test_withheld_lines_never_pull_half_a_private_line_under_the_cut(tmp_path):
    secret = "PRIVATE-TAIL " + "z" * 40
    idx = PrivateLines.of([secret, "EARLY-PRIVATE line words"])
    body = "\n".join(["EARLY-PRIVATE line words " + "y" * 200] * 60)  # ~13,000 characters, all withheld
    room = RESULT_CUT + 8192
    body = body[:room - 30] + "\n" + secret  # the private line straddles the first cut: 29 of its characters before it
    text = update_text([ToolUse("1", "Bash", {"command": "x"}), ToolResult("1", body, False)], idx,
                       {"1": "Bash"}, {"1": {"command": "x"}})
    assert "PRIVATE-TAIL" not in text


def test_tool_paths_knows_the_path_fields_mcp_servers_use():
    inp = {"path": "a", "filePath": "b", "paths": ["c", 3, "d"], "source": "e", "destination": "f",
           "target_path": "g", "uri": "file:///h", "content": "not a path", "pattern": "*.py"}
    assert sorted(tool_paths(inp)) == ["/h", "a", "b", "c", "d", "e", "f", "g"]
    assert private_result("mcp__x__y", {"path": "/p/secrets/k"}, "body", ["secrets/**"]) == PATH_NOTE % "mcp__x__y"
    assert private_result("Bash", {"command": "cat secrets/k"}, "body", ["secrets/**"]) == "body"
