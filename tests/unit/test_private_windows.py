"""Property tests (issue 23): whatever window, match or count is taken of a file with private blocks — by the
agent's own Read and Grep, or by Claude Code's Read and Grep as the worker checks them — no private text
comes out, and the public lines do."""
from __future__ import annotations

import os
import re
import tempfile
import time

from hypothesis import given, settings, strategies as st

from subconscious.privacy.results import checked_result
from subconscious.agent_tools.confine import Root
from subconscious.agent_tools.limits import Limits
from subconscious.agent_tools.readers import grep, read
from tests.harness.sizes import examples

PUBLIC = st.text(alphabet="abcdefgh ijk.,", min_size=1, max_size=12).map(lambda s: "p" + s)
SECRET = st.text(alphabet="QWXZ0123456789", min_size=6, max_size=10).map(lambda s: "QQ" + s)
OPEN = st.sampled_from(["<private>", "<PRIVATE>", "< private id=1>", "<Private >"])
CLOSE = st.sampled_from(["</private>", "</PRIVATE>", "< /private >"])


@st.composite
def documents(draw):
    """(file text, its secrets): public lines, and blocks whose tags stand alone or inside a line."""
    lines, secrets = [], []
    for _ in range(draw(st.integers(1, 6))):
        if draw(st.booleans()):
            lines += draw(st.lists(PUBLIC, min_size=1, max_size=4))
            continue
        body = draw(st.lists(SECRET, min_size=1, max_size=4))
        secrets += body
        o, c = draw(OPEN), draw(CLOSE)
        if draw(st.booleans()):
            lines += [o, *body, c]
        else:  # inline: "public <private>secret" … "secret</private> public"
            lines += [draw(PUBLIC) + " " + o + body[0], *body[1:], c + " " + draw(PUBLIC)] if len(body) > 1 else \
                     [draw(PUBLIC) + o + body[0] + c + draw(PUBLIC)]
    return "\n".join(lines) + "\n", secrets


def project(text: str) -> str:
    d = tempfile.mkdtemp(prefix="privwin-")
    os.makedirs(os.path.join(d, "p"))
    with open(os.path.join(d, "p", "f.md"), "w") as fh:
        fh.write(text)
    return os.path.join(d, "p")


@settings(max_examples=examples(60), deadline=None)
@given(documents(), st.integers(1, 30), st.integers(1, 10), st.data())
def test_the_agents_read_and_grep_show_nothing_private_in_any_window(doc, offset, limit, data):
    text, secrets = doc
    p = project(text)
    root, lim, far = Root(p, {"HOME": "/nonexistent"}), Limits(), time.monotonic() + 30
    n = text.count("\n")
    try:
        out = read(root, {"file_path": "f.md", "offset": min(offset, n), "limit": limit}, lim, far)
    except Exception as e:  # noqa: BLE001 - an error names no file text either
        out = str(e)
    for s in secrets:
        assert s not in out
    if secrets:
        s = data.draw(st.sampled_from(secrets))
        a = data.draw(st.integers(0, len(s) - 2))
        piece = re.escape(s[a:a + data.draw(st.integers(2, len(s) - a))])
        for mode in ("content", "count", "files_with_matches"):
            got = grep(root, {"pattern": piece, "output_mode": mode}, lim, far)
            assert got.startswith("No matches"), (piece, mode, got)


@settings(max_examples=examples(80), deadline=None)
@given(documents(), st.integers(1, 30), st.integers(1, 10))
def test_claude_codes_read_window_checked_against_the_file_holds_nothing_private(doc, offset, limit):
    text, secrets = doc
    lines = text.split("\n")[:-1]
    offset = min(offset, len(lines))
    window = "\n".join(f"{i}\t{lines[i - 1]}" for i in range(offset, min(len(lines), offset + limit - 1) + 1))
    out = checked_result("Read", {"file_path": "/p/f.md", "offset": offset, "limit": limit}, window,
                         lambda path: text if path == "/p/f.md" else None)
    assert out is not None
    for s in secrets:
        assert s not in out
    for i in range(offset, min(len(lines), offset + limit - 1) + 1):  # untouched public lines are all there
        if lines[i - 1].startswith("p") and "<" not in lines[i - 1] and not any(s in lines[i - 1] for s in secrets):
            inside = _inside_block(lines, i)
            assert inside or f"{i}\t{lines[i - 1]}" in out


def _inside_block(lines, i) -> bool:
    depth = 0
    for ln in lines[:i - 1]:
        depth += len(re.findall(r"<\s*private", ln, re.I)) - len(re.findall(r"<\s*/\s*private", ln, re.I))
    return depth > 0


@settings(max_examples=examples(60), deadline=None)
@given(documents(), st.data())
def test_claude_codes_grep_lines_checked_against_the_file_hold_nothing_private(doc, data):
    text, secrets = doc
    lines = text.split("\n")[:-1]
    picked = sorted(set(data.draw(st.lists(st.integers(1, len(lines)), min_size=1, max_size=6))))
    result = "\n".join(f"f.md:{i}:{lines[i - 1]}" for i in picked)
    out = checked_result("Grep", {"pattern": "x", "output_mode": "content"}, result,
                         lambda path: text if path == "/p/f.md" else None, "/p")
    assert out is not None
    for s in secrets:
        assert s not in out
