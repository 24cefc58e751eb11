"""Red team of issue 23, Claude Code's own tool results: the paths the first fix did not cover.

- Edit/MultiEdit/Write show a numbered snippet of the file around the change (``cat -n``): a snippet inside a
  private block carries no tag, so it is checked against the file as a Read window is;
- a UTF-16 file (Claude Code's Read and ripgrep decode it by its BOM) is read the same way by the worker, so
  its tags count; a file whose lines do not match the window (another encoding, changed since: the block
  edited out) withholds the window even when the file holds no tag now;
- Grep's file names and counts (files_with_matches, the default, and count) are an oracle on a block: whether
  ``password is s`` matched says what the block holds. A file with blocks is listed and counted on its public
  text only.
"""
from __future__ import annotations

from tests.unit.test_private_transcript import T, update

LINES = ["line 1 public", "line 2 public", "<private>", "QZSECRET-A one", "QZSECRET-B two", "QZSECRET-C three",
         "</private>", "line 8 public"]


def numbered(lines: list[str], a: int, b: int) -> str:
    return "\n".join(f"{i:6}\t{lines[i - 1]}" for i in range(a, b + 1))


def snippet(path, lines, a, b) -> str:
    return (f"The file {path} has been updated. Here's the result of running `cat -n` on a snippet of the edited "
            f"file:\n" + numbered(lines, a, b))


def test_an_edit_snippet_inside_a_private_block_sends_nothing_of_it(tmp_path):
    f = tmp_path / "notes.md"
    f.write_text("\n".join(LINES) + "\n")
    t = T()
    t.tool("Edit", {"file_path": str(f), "old_string": "QZSECRET-B", "new_string": "QZSECRET-B"}, snippet(f, LINES, 4, 5))
    t.tool("MultiEdit", {"file_path": str(f), "edits": []}, snippet(f, LINES, 5, 6))
    t.tool("Write", {"file_path": str(f), "content": "…"}, snippet(f, LINES, 1, 8))
    t.tool("Edit", {"file_path": str(f), "old_string": "8", "new_string": "8"}, snippet(f, LINES, 7, 8))
    out = update(t, tmp_path)
    assert "QZSECRET-" not in out
    assert "line 8 public" in out and "line 1 public" in out and "has been updated" in out


def test_a_utf16_file_is_checked_in_its_own_encoding(tmp_path):
    f = tmp_path / "notes.md"
    f.write_bytes(("\n".join(LINES) + "\n").encode("utf-16"))  # with its BOM, as Windows editors write it
    t = T()
    t.tool("Read", {"file_path": str(f), "offset": 4, "limit": 2}, numbered(LINES, 4, 5))
    t.tool("Grep", {"pattern": "SECRET-", "output_mode": "content", "-n": True, "path": str(f)},
           "4:QZSECRET-A one\n5:QZSECRET-B two")
    t.tool("Read", {"file_path": str(f), "offset": 8, "limit": 1}, numbered(LINES, 8, 8))
    out = update(t, tmp_path)
    assert "QZSECRET-" not in out
    assert "line 8 public" in out  # decoded as Claude Code decoded it: the public line is recognised and sent


def test_a_window_of_a_file_whose_block_was_edited_out_since_is_withheld(tmp_path):
    f = tmp_path / "notes.md"
    t = T()
    t.tool("Read", {"file_path": str(f), "offset": 4, "limit": 2}, numbered(LINES, 4, 5))
    t.tool("Grep", {"pattern": "SECRET-", "output_mode": "content", "-n": True}, "notes.md:4:QZSECRET-A one")
    f.write_text("\n".join(LINES[:2] + LINES[7:]) + "\n")  # Claude then removed the block: no tag left
    out = update(t, tmp_path)
    assert "QZSECRET-" not in out
    assert out.count("withheld: could not check it for private text") == 2


def test_grep_names_and_counts_say_nothing_about_what_a_block_holds(tmp_path):
    (tmp_path / "notes.md").write_text("\n".join(LINES) + "\n")
    (tmp_path / "open.md").write_text("QZSECRET-A is public here\n")
    outs = {}
    for probe in ("QZSECRET-A", "QZSECRET-X"):  # one in the block, one nowhere: the same answer
        t = T()
        t.tool("Grep", {"pattern": probe, "path": str(tmp_path / "notes.md")}, "Found 1 file\nnotes.md"
               if probe.endswith("A") else "No files found")
        t.tool("Grep", {"pattern": probe, "output_mode": "count"},
               "notes.md:1\n\nFound 1 total occurrence across 1 file." if probe.endswith("A") else "No matches found")
        t.tool("Grep", {"pattern": probe, "output_mode": "files_with_matches"},
               "Found 1 file\nnotes.md" if probe.endswith("A") else "No files found")
        outs[probe] = update(t, tmp_path).split("<transcript>")[1].replace(probe, "PROBE")
    assert outs["QZSECRET-A"] == outs["QZSECRET-X"]
    # a file with blocks whose public text matches is still listed and counted on that text
    t = T()
    t.tool("Grep", {"pattern": "public", "output_mode": "count"},
           "notes.md:3\nopen.md:1\n\nFound 4 total occurrences across 2 files.")
    t.tool("Grep", {"pattern": "line . public|QZSECRET"}, "Found 2 files\nnotes.md\nopen.md")
    out = update(t, tmp_path)
    assert "notes.md:3\nopen.md:1" in out and "notes.md\nopen.md" in out
    t = T()
    t.tool("Grep", {"pattern": "QZSECRET", "output_mode": "count"}, "notes.md:3\nopen.md:1\n\nFound 4 total occurrences")
    out = update(t, tmp_path)
    assert "notes.md" not in out and "open.md:1" in out and "Found 4" not in out


def test_through_the_worker_no_private_byte_reaches_the_server(tmp_path, monkeypatch):
    """The same paths through the real worker (``worker.deliver``) to a recording Letta stand-in: what the
    server receives is what the user sees leave."""
    from subconscious.local import sessions as localsession
    from subconscious.delivery import worker
    from subconscious.local.runtime import runtime
    from subconscious.state.records import SessionState
    from tests.harness.fake_letta_conv import FakeLetta

    for k, v in {"LETTA_HOME": str(tmp_path / "shared"), "SUBCONSCIOUS_HOST": "laptop", "HOME": str(tmp_path),
                 "SUBCONSCIOUS_STATE_DIR": str(tmp_path / "local"), "LETTA_API_KEY": "k"}.items():
        monkeypatch.setenv(k, v)
    for var in ("SUBCONSCIOUS_DAILY_CHARS", "SUBCONSCIOUS_DAILY_TURNS", "SUBCONSCIOUS_DAILY_CHARS_TOTAL",
                "SUBCONSCIOUS_DAILY_TURNS_TOTAL", "SUBCONSCIOUS_PRIVATE_PATHS"):
        monkeypatch.delenv(var, raising=False)
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "notes.md").write_text("\n".join(LINES) + "\n")
    (proj / "win.md").write_bytes(("\r\n".join(LINES) + "\r\n").encode("utf-16"))
    t = T()
    t.user("public-prompt-1")
    t.tool("Edit", {"file_path": str(proj / "notes.md"), "old_string": "a", "new_string": "b"},
           snippet(proj / "notes.md", LINES, 4, 6))
    t.tool("Read", {"file_path": str(proj / "win.md"), "offset": 5, "limit": 1}, numbered(LINES, 5, 5))
    t.tool("Grep", {"pattern": "Q.SECRET-C", "output_mode": "count"}, "notes.md:1\n\nFound 1 total occurrence across 1 file.")
    t.tool("Grep", {"pattern": "Q.SECRET-C"}, "Found 1 file\n" + str(proj / "notes.md"))
    (tmp_path / "t.jsonl").write_text("\n".join(t.lines) + "\n")
    rt = runtime()
    sid, sessions = "s1", tmp_path / "local" / "sessions"
    rt.store().put_conversation(sid, "conv-1", "agent-1")
    rt.store().update_session(sid, lambda cur: SessionState(sid, conversation_id="conv-1", agent_id="agent-1"))
    local = localsession.load(sessions, sid)
    local.transcript_path, local.start_for, local.cwd, local.project_root = \
        str(tmp_path / "t.jsonl"), "conv-1", str(proj), str(proj)
    localsession.save(sessions, local)
    server = FakeLetta()
    assert worker.deliver(rt, sid, client=server).error is None
    sent = "\n".join(str(m.get("content")) for m, _ in server.turns() if m.get("message_type") == "user_message")
    assert "public-prompt-1" in sent and "[Tool Result: Edit]" in sent
    assert "QZSECRET-" not in sent
    # the block's text matched, its public text does not: no count, no name, as if nothing had matched
    assert "[Tool Result: Grep]\nNo matches found" in sent and "[Tool Result: Grep]\nNo files found" in sent
    assert "notes.md:1" not in sent and "Found 1" not in sent


def test_grep_and_glob_lines_naming_a_link_into_a_private_path_are_not_sent(tmp_path):
    """``ln -s secrets docs`` (or a link to one private file): Grep and Glob name the file by the path they
    walked; it is matched against SUBCONSCIOUS_PRIVATE_PATHS as resolved too."""
    from subconscious.privacy.results import project_reader
    from subconscious.delivery.transcript import build_update

    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "plan.txt").write_text("QZPRIVFILE-1\nQZPRIVFILE-2\n")
    (tmp_path / "docs").symlink_to("secrets")
    (tmp_path / "plan-link.txt").symlink_to("secrets/plan.txt")
    (tmp_path / "open.txt").write_text("public-open-line\n")
    t = T()
    t.tool("Grep", {"pattern": "Q.PRIVFILE|public", "output_mode": "content", "-n": True},
           "docs/plan.txt:1:QZPRIVFILE-1\nplan-link.txt:2:QZPRIVFILE-2\nopen.txt:1:public-open-line")
    t.tool("Grep", {"pattern": "Q.PRIVFILE", "output_mode": "content", "-C": 1},
           "secrets/plan.txt:QZPRIVFILE-1\ndocs/plan.txt-QZPRIVFILE-2")
    t.tool("Glob", {"pattern": "**/*.txt"}, f"{tmp_path}/docs/plan.txt\n{tmp_path}/open.txt")
    u = build_update(t.lines, -1, "s1", files=project_reader(str(tmp_path)), cwd=str(tmp_path),
                     private_paths=("secrets/**",))
    assert "QZPRIVFILE" not in u.payload and "docs/plan.txt" not in u.payload.split("[Tool: Glob]")[1]
    assert "open.txt:1:public-open-line" in u.payload and f"{tmp_path}/open.txt" in u.payload


def test_an_edit_error_echoing_the_string_it_looked_for_hides_a_blocks_lines(tmp_path):
    """Claude Code's Edit error repeats ``old_string`` ("Found 2 matches of the string to replace … String:
    …"); an edit inside a private block copies its lines, without their tags."""
    f = tmp_path / "notes.md"
    f.write_text("\n".join(LINES + ["line 8 public"]) + "\n")
    err = ("<tool_use_error>Found 2 matches of the string to replace, but replace_all is false. To replace all "
           "occurrences, set replace_all to true.\nString: %s</tool_use_error>")
    t = T()
    for old in ("QZSECRET-A one\nQZSECRET-B two", "line 8 public"):
        tid = "toolu_" + old[:4].replace(" ", "")
        t.add({"type": "assistant", "message": {"id": "msg_" + tid, "role": "assistant", "content": [
            {"type": "tool_use", "id": tid, "name": "Edit",
             "input": {"file_path": str(f), "old_string": old, "new_string": "x"}}]}})
        t.add({"type": "user", "message": {"role": "user", "content": [
            {"tool_use_id": tid, "type": "tool_result", "content": err % old, "is_error": True}]}})
    out = update(t, tmp_path)
    assert "QZSECRET-" not in out and "[Tool Error: Edit]" in out
    assert "String: line 8 public" in out  # public text of the file is echoed as it was
    assert "QZSECRET-" not in update(t, None)  # no file to check: hidden
