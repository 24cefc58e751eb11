"""Private text (subconscious/privacy/private.py): what is between <private> tags, or in a tool result of a private
path, never reaches the update the worker sends — whatever the nesting, the tag's case and spacing, an
unclosed tag, or an answer split into several content blocks (lines)."""
from __future__ import annotations

import json

from hypothesis import given, settings, strategies as st

from subconscious.privacy.private import MARKER, hide_private, hide_private_parts, is_private_path, private_globs, private_result
from subconscious.delivery.transcript import build_update
from tests.harness.sizes import examples

PUBLIC = st.text(alphabet="abcdefghij klmnop.,;:!?()[]{}=/\n>", min_size=0, max_size=12)
SECRET = st.text(alphabet="ABCDEFGHJKLMNPQRSTUVWXYZ23456789", min_size=4, max_size=10).map(lambda s: "Q" + s)


def spelling(closing: bool):
    word = st.lists(st.booleans(), min_size=7, max_size=7).map(
        lambda up: "".join(c.upper() if u else c for c, u in zip("private", up)))
    space = st.sampled_from(["", " ", "\n", "\t "])
    attrs = st.sampled_from(["", ' id="x"', " note=1"]) if not closing else st.just("")
    return st.tuples(space, word, attrs, space).map(
        lambda t: "<%s%s%s%s%s>" % (t[0], "/" + t[0] if closing else "", t[1], t[2], t[3]))


# a document: public text and private sections, which may nest; rendered as tokens (text or a tag)
node = st.deferred(lambda: st.one_of(PUBLIC.map(lambda s: ("pub", s)),
                                     st.lists(st.one_of(SECRET.map(lambda s: ("sec", s)), node), max_size=2)
                                     .map(lambda xs: ("priv", xs))))
document = st.lists(node, max_size=4)


def tokens(nodes, draw_tag, inside=False) -> list[tuple[str, str]]:
    out = []
    for kind, v in nodes:
        if kind == "pub":
            out.append(("hid" if inside else "pub", v))
        elif kind == "sec":
            out.append(("sec", v))
        else:
            out.append(("tag", draw_tag(False)))
            out += tokens(v, draw_tag, True)
            out.append(("tag", draw_tag(True)))
    return out


def secrets_of(toks) -> list[str]:
    return [v for kind, v in toks if kind == "sec" and v.strip()]


@settings(max_examples=examples(150))
@given(document, st.data())
def test_no_private_text_survives_and_public_text_does(doc, data):
    toks = tokens(doc, lambda closing: data.draw(spelling(closing)))
    text = "".join(v for _, v in toks)
    out = hide_private(text)
    for s in secrets_of(toks):
        assert s not in out
    at = 0
    for kind, v in toks:  # every public piece is kept, in order
        if kind == "pub":
            i = out.find(v, at)
            assert i != -1, (v, out)
            at = i + len(v)
    assert hide_private(out) == out
    assert "rivate>" not in out.lower() or "private" in "".join(v for k, v in toks if k == "pub")


@settings(max_examples=examples(150))
@given(document, st.data(), st.lists(st.integers(min_value=0, max_value=60), max_size=4))
def test_an_answer_split_into_pieces_or_left_unclosed_keeps_its_secrets(doc, data, cuts):
    """Claude Code writes each content block of an answer on its own transcript line, so a private section
    can open in one text and close in a later one; a tag may also never be closed."""
    toks = tokens(doc, lambda closing: data.draw(spelling(closing)))
    if data.draw(st.booleans()):  # leave the last closing tag out
        last = max((i for i, (k, _) in enumerate(toks) if k == "tag"), default=None)
        if last is not None and "/" in toks[last][1]:
            toks = toks[:last] + toks[last + 1:]
    bounds = sorted({min(c, len(toks)) for c in cuts} | {0, len(toks)})
    pieces = ["".join(v for _, v in toks[a:b]) for a, b in zip(bounds, bounds[1:])]
    # hidden together, as the blocks of one answer are (hidden one by one, a piece with no tag of its own
    # after an unclosed tag, or between two pieces holding the tags, went out as it was)
    joint = hide_private_parts(pieces)
    assert len(joint) == len(pieces)
    for s in secrets_of(toks):
        assert not any(s in part for part in joint)
    for part in joint:
        assert hide_private(part) == part


def test_examples():
    assert hide_private("deploy with <private>hunter2</private> today") == f"deploy with {MARKER} today"
    assert hide_private("a <PRIVATE>x <private>y</private> z</Private> b") == f"a {MARKER} b"
    assert hide_private("keep <private>the rest is mine") == f"keep {MARKER}"
    assert hide_private("mine</private> the rest") == f"{MARKER} the rest"
    assert hide_private("no tags < here > at all") == "no tags < here > at all"


def test_private_paths():
    globs = private_globs({"SUBCONSCIOUS_PRIVATE_PATHS": "*.env:secrets/**::/home/me/notes/*"})
    assert globs == ("*.env", "secrets/**", "/home/me/notes/*")
    for p in ["/w/app/.env", "/w/app/prod.ENV", "/w/app/secrets/db/pass.txt", "secrets/a", "/home/me/notes/x.md",
              "C:\\w\\secrets\\k.txt"]:
        assert is_private_path(p, globs), p
    for p in ["/w/app/main.py", "/w/app/env.py", "/w/secretsanta/x", "/home/me/other/x.md", ""]:
        assert not is_private_path(p, globs), p
    assert private_result("Read", {"file_path": "/w/secrets/k"}, "TOPSECRET", globs).startswith("[the result of Read")
    grep = "src/a.py:3:x = 1\nsecrets/k.txt:1:TOPSECRET\nconfig/.env:2:TOKEN=TOPSECRET"
    kept = private_result("Grep", {"pattern": "x"}, grep, globs)
    assert "TOPSECRET" not in kept and "src/a.py:3:x = 1" in kept and "2 lines naming private paths" in kept
    assert private_result("Read", {"file_path": "/w/a.py"}, "fine", globs) == "fine"
    assert private_result("Read", {"file_path": "/w/secrets/k"}, "x", ()) == "x"


@given(st.lists(st.text(alphabet="abcXYZ._-", min_size=1, max_size=6), max_size=4),
       st.lists(st.text(alphabet="abcXYZ._-", min_size=1, max_size=6), max_size=3), st.booleans())
def test_anything_under_a_private_directory_is_private(prefix, rest, upper):
    name = "Secrets" if upper else "secrets"
    path = "/".join(["", *prefix, name, *rest, "f.txt"])
    assert is_private_path(path, ("secrets/**",))


def _line(kind: str, content) -> str:
    return json.dumps({"type": kind, "uuid": "u-%s" % abs(hash(str(content))), "isSidechain": False,
                       "message": {"role": kind, "content": content}})


def test_the_update_has_neither_private_text_nor_private_files():
    lines = [
        _line("user", "please deploy; the key is <private>QZZPRIVATEPROMPT</private>, thanks"),
        _line("assistant", [{"type": "text", "text": "ok <private>QZZPRIVATE"},
                            {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/w/secrets/db.txt"}}]),
        _line("assistant", [{"type": "text", "text": "ANSWER</private> reading it"}]),
        _line("user", [{"type": "tool_result", "tool_use_id": "t1", "content": "QZZFILECONTENT"}]),
        _line("assistant", [{"type": "tool_use", "id": "t2", "name": "Read", "input": {"file_path": "/w/main.py"}}]),
        _line("user", [{"type": "tool_result", "tool_use_id": "t2", "content": "print('<private>QZZINFILE</private>')"}]),
    ]
    u = build_update(lines, -1, "s", private_paths=("secrets/**",))
    for s in ("QZZPRIVATEPROMPT", "QZZPRIVATE", "ANSWER", "QZZFILECONTENT", "QZZINFILE"):
        assert s not in u.payload
    for s in ("please deploy; the key is", "thanks", "reading it", "/w/secrets/db.txt", "print("):
        assert s in u.payload
    assert "[the result of Read on a private path" in u.payload
    # a result whose call came before the cursor is judged by that call's path too
    later = build_update(lines, 2, "s", private_paths=("secrets/**",))
    assert "QZZFILECONTENT" not in later.payload
    assert "QZZFILECONTENT" in build_update(lines, 2, "s").payload  # without the setting, files are sent


def test_the_agents_own_tools_keep_private_text_and_paths_on_the_machine(tmp_path, monkeypatch):
    """The agent reads the project through client tools (LETTA_SDK_TOOLS): their results leave the machine too."""
    from subconscious.letta.messages import ToolCallRequest
    from subconscious.agent_tools.registry import ToolContext, execute

    proj = tmp_path / "proj"
    (proj / "secrets").mkdir(parents=True)
    (proj / "secrets" / "plan.txt").write_text("QZZPRIVFILE launch date\n")
    (proj / "notes.md").write_text("public line\n<private>QZZPRIVTAG</private>\nlaunch date too\n")
    monkeypatch.setenv("SUBCONSCIOUS_PRIVATE_PATHS", "secrets/**")
    ctx = ToolContext.for_session("read-only", str(proj))

    def run(name, args):
        return execute(ToolCallRequest("c", name, args, json.dumps(args)), ctx).result

    read = run("Read", {"file_path": "notes.md"})
    assert "public line" in read.output and "QZZPRIVTAG" not in read.output and MARKER in read.output
    refused = run("Read", {"file_path": "secrets/plan.txt"})
    assert refused.status == "error" and "private path" in refused.output and "QZZPRIVFILE" not in refused.output
    grep = run("Grep", {"pattern": "launch"})
    assert "notes.md" in grep.output and "QZZPRIVFILE" not in grep.output and "plan.txt" not in grep.output
