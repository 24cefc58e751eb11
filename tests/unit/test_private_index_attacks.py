"""Red team of the private-text index (issue 37): each case leaked on the first version and holds now.

Private text here is text that secret redaction does not catch ("meet Alice at the Blue Heron cafe"): with a
password-looking line a case would pass for the wrong reason."""
from __future__ import annotations

import json
import os

import pytest

from subconscious.delivery.lines import ToolResult, ToolUse
from subconscious.delivery.update_xml import format_entries, render_message
from subconscious.privacy.projectindex import project_index
from subconscious.privacy.results import project_reader

GLOBS = ["secrets/**"]
LINE = "meet Alice at the Blue Heron cafe on Friday"


def run(entries, idx, root, globs=GLOBS):
    names = {e.id: e.name for e in entries if isinstance(e, ToolUse)}
    inputs = {e.id: e.input for e in entries if isinstance(e, ToolUse)}
    msgs = format_entries(entries, names, True, globs, inputs, project_reader(str(root)), str(root), idx)
    return "\n".join(render_message(m) for m in msgs)


@pytest.fixture
def proj(tmp_path):
    root = tmp_path / "proj"
    (root / "secrets").mkdir(parents=True)
    return root


@pytest.mark.parametrize("shown", [
    "notes.md:2:meet Alice at the \x1b[01;31m\x1b[KBlue Heron\x1b[m\x1b[K cafe on Friday",   # grep --color=always
    "\x1b[38;5;231mmeet\x1b[0m \x1b[38;5;231mAlice at the Blue Heron cafe on Friday\x1b[0m",  # bat / delta
    "meet Alice at the Blue\x00 Heron cafe on Friday",                                     # a NUL
])
def test_coloured_output_is_checked_as_it_will_be_sent(tmp_path, shown):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "notes.md").write_text("public intro\n<private>\n%s\n</private>\n" % LINE)
    idx = project_index(str(root), [], tmp_path / "cache")
    entries = [ToolUse("t1", "Bash", {"command": "grep --color=always -n Heron notes.md"}), ToolResult("t1", shown, False)]
    assert LINE not in run(entries, idx, root, [])
def test_a_long_private_line_with_no_newline_is_checked_whole(proj, tmp_path):
    secret = json.dumps({"note": "meet Alice at the Blue Heron cafe", "pad": "lorem ipsum " * 1000})
    (proj / "secrets" / "creds.json").write_text(secret + "\n")
    idx = project_index(str(proj), GLOBS, tmp_path / "cache")
    assert idx.hit(secret)
    entries = [ToolUse("t1", "Bash", {"command": "cat creds.bak"}), ToolResult("t1", secret, False)]
    out = run(entries, idx, proj)
    assert "Blue Heron cafe" not in out, out[:400]

# 2. A nested path field ({"arguments": {"path": ...}}, {"edits": [{"path": ...}]}) is not a path field: the call is
#    not seen as naming a private path, its result passes, and a short private line (not indexed) goes out.
@pytest.mark.parametrize("inp", [
    {"name": "read_file", "arguments": {"path": "secrets/pin.txt"}},
    {"edits": [{"path": "secrets/pin.txt"}]},
])
def test_nested_path_field(proj, tmp_path, inp):
    (proj / "secrets" / "pin.txt").write_text("Zq7#xK2\n")  # 7 bytes: too short for the index
    idx = project_index(str(proj), GLOBS, tmp_path / "cache")
    entries = [ToolUse("t1", "mcp__proxy__call", inp), ToolResult("t1", "Zq7#xK2", False)]
    out = run(entries, idx, proj)
    assert "Zq7#xK2" not in out, out


# 3. "~" in a path against an absolute glob: not expanded, the call does not name a private path.
def test_tilde_path_absolute_glob(proj, tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / "notes").mkdir(parents=True)
    (home / "notes" / "pin.txt").write_text("Zq7#xK2\n")
    monkeypatch.setenv("HOME", str(home))
    globs = [str(home / "notes") + "/*"]
    idx = project_index(str(proj), globs, tmp_path / "cache")
    entries = [ToolUse("t1", "mcp__fs__read_text_file", {"path": "~/notes/pin.txt"}), ToolResult("t1", "Zq7#xK2", False)]
    out = run(entries, idx, proj, globs)
    assert "Zq7#xK2" not in out, out


# 4. A "url": "file:///..." field (not a path key; "uri" is).
def test_file_url_field(proj, tmp_path):
    (proj / "secrets" / "pin.txt").write_text("Zq7#xK2\n")
    idx = project_index(str(proj), GLOBS, tmp_path / "cache")
    entries = [ToolUse("t1", "mcp__fetch__fetch", {"url": "file://" + str(proj / "secrets" / "pin.txt")}),
               ToolResult("t1", "Zq7#xK2", False)]
    out = run(entries, idx, proj)
    assert "Zq7#xK2" not in out, out


# 5. An HTML/XML-escaped private line (an MCP server returning HTML/XML, a notebook, a web page).
def test_html_escaped_private_line(proj, tmp_path):
    (proj / "notes.md").write_text("<private>\nif Alice < Bob && Carol: divorce papers filed\n</private>\n")
    idx = project_index(str(proj), GLOBS, tmp_path / "cache")
    esc = "if Alice &lt; Bob &amp;&amp; Carol: divorce papers filed"
    entries = [ToolUse("t1", "mcp__web__get", {"id": 3}), ToolResult("t1", "<p>%s</p>" % esc, False)]
    out = run(entries, idx, proj)
    assert "divorce papers" not in out, out




def test_many_public_files_never_crowd_out_the_private_ones(proj, tmp_path):
    (proj / "secrets" / "db.env").write_text("acquisition target: Umbrella Corp\n")
    (proj / "target").mkdir()
    for i in range(50):
        (proj / "target" / f"f{i}").write_text("x")
    idx = project_index(str(proj), GLOBS, tmp_path / "cache", max_files=40)
    entries = [ToolUse("t1", "Bash", {"command": "cat secrets/db.env"}),
               ToolResult("t1", "acquisition target: Umbrella Corp", False)]
    assert "Umbrella" not in run(entries, idx, proj) and idx.partial


def test_a_private_directory_linked_into_the_project_is_indexed(tmp_path):
    root, vault = tmp_path / "proj", tmp_path / "vault"
    root.mkdir()
    vault.mkdir()
    (vault / "db.txt").write_text("acquisition target: Initech in Q3\n")
    os.symlink(vault, root / "secrets")
    os.symlink(vault, vault / "loop")  # a loop under it: walked once
    idx = project_index(str(root), GLOBS, tmp_path / "cache")
    entries = [ToolUse("t1", "Bash", {"command": "cat secrets/db.txt"}),
               ToolResult("t1", "acquisition target: Initech in Q3", False)]
    assert "Initech" not in run(entries, idx, root)


def test_a_private_calls_summary_shows_only_its_private_paths(proj, tmp_path):
    idx = project_index(str(proj), GLOBS, tmp_path / "cache")
    inp = {"notebook_path": "secrets/a.ipynb", "source": "patients = ['John Doe, HIV+', 'Jane Roe, HCV']"}
    entries = [ToolUse("t1", "mcp__jupyter__insert_cell", inp), ToolResult("t1", "cell inserted", False)]
    out = run(entries, idx, proj)
    assert "John Doe" not in out and "secrets/a.ipynb" in out


def test_a_line_printed_before_its_file_changed_is_still_withheld(proj, tmp_path):
    f = proj / "secrets" / "db.env"
    f.write_text("acquisition target: Initech in Q3\n")
    project_index(str(proj), GLOBS, tmp_path / "cache")  # an earlier delivery built the index
    f.write_text("acquisition target: Globex in Q4 now\n")  # rotated before this delivery
    idx = project_index(str(proj), GLOBS, tmp_path / "cache")
    entries = [ToolUse("t1", "Bash", {"command": "cat secrets/db.env"}),
               ToolResult("t1", "acquisition target: Initech in Q3", False)]
    assert "Initech" not in run(entries, idx, proj)


def test_a_file_with_carriage_returns_only_is_indexed_line_by_line(proj, tmp_path):
    (proj / "notes.md").write_text("intro\r<private>\rmeet Alice at the Blue Heron cafe\rsecond line here ok\r</private>\r")
    idx = project_index(str(proj), GLOBS, tmp_path / "cache")
    assert idx.hit("meet Alice at the Blue Heron cafe") and idx.hit("second line here ok")


def test_lines_sharing_their_first_bytes_are_indexed_each_once(tmp_path):
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "events.csv").write_text("".join(f"2026-01-01T{i:08d},ok\n" for i in range(20000)))
    idx = project_index(str(tmp_path), ["secrets/**"], tmp_path / "cache")
    assert idx.count == 20000 and idx.hit("x 2026-01-01T00012345,ok y") and not idx.hit("2026-01-01T00099999,ok")


def test_a_private_directory_on_a_file_system_without_a_change_time_is_read_again(tmp_path, monkeypatch):
    """Red team finding: the index asked the project root's file system only; a private directory on sshfs (an
    absolute glob's) kept its cached identity through a same-size rewrite with the mtime put back."""
    import types

    from subconscious.privacy import projectindex as pi

    proj, mnt = tmp_path / "proj", tmp_path / "mnt"  # mnt stands for an sshfs mount
    proj.mkdir()
    mnt.mkdir()
    (proj / "a.py").write_text("print(1)\n")
    secret = mnt / "secret.txt"
    secret.write_text("password = hunter2-AAAA\n")
    m = str(mnt)
    monkeypatch.setattr(pi, "keeps_change_time", lambda p, dev=None: not os.fspath(p).startswith(m))
    real_walk = pi._walk

    def sshfs_walk(top, limit, follow):  # on sshfs st_ctime == st_mtime
        for full, st, linked in real_walk(top, limit, follow):
            if st is not None and full.startswith(m):
                st = types.SimpleNamespace(**{k: getattr(st, k) for k in dir(st) if k.startswith("st_")})
                st.st_ctime_ns = st.st_mtime_ns
            yield full, st, linked
    monkeypatch.setattr(pi, "_walk", sshfs_walk)

    globs = (m + "/**",)
    cache = tmp_path / "cache"
    first = pi.project_index(str(proj), globs, cache)
    assert first.hit("password = hunter2-AAAA")
    st = os.stat(secret)
    secret.write_text("password = hunter2-BBBB\n")           # same size
    os.utime(secret, ns=(st.st_atime_ns, st.st_mtime_ns))     # mtime put back (rsync -a, unison)
    again = pi.project_index(str(proj), globs, cache)
    assert again.hit("password = hunter2-BBBB"), "new private line not indexed: cached identity trusted"
