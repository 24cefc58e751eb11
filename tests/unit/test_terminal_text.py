"""No escape or control sequence from the agent, the server or a file in the shared home reaches the
terminal: the pure cleaner (subconscious/base/termtext.py) under hypothesis, the console seam every table goes
through, and the raw bytes `doctor` and `status` print for a home holding a hostile file name."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from subconscious.commands.tables import Text, console, table
from subconscious.base.termtext import UNSAFE, clean, json_dumps
from tests.harness.sizes import examples

UNSAFE_RE = re.compile(UNSAFE)
# the bytes a terminal acts on: ESC, C1 CSI/OSC/ST as bytes (as UTF-8 holds them after 0xc2), DEL, BEL, CR
FORBIDDEN = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\xaa-\xae]|\xe2\x81[\xa6-\xa9]")

HOSTILE = ("note\x1b]52;c;Y3VybCBldmlsfHNo\x07 \x1b[2J\x1b[H\x1b[31mred\x1b[0m \x9b2J C1\x9d0;title\x9c "
           "\x1b]8;;http://evil/\x1b\\link\x1b]8;;\x1b\\ cr\rfake \x08\x7f bidi\u202eevil\u202c [red]markup[/red] "
           "[link=http://evil]x[/link] end")
PIECES = ["\x1b", "\x9b", "\x9d", "\x90", "\x9c", "\x07", "[", "]", "\\", ";", "52", "c", "2J", "\r", "\n", "\t",
          "\x00", "\x7f", "\u202e", "\u2066", "m", "P", "_", "^", "X", "a", "é", "漢", " ", "\x1b[", "\x1b]"]


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=4)), max_size=40).map("".join))
def test_cleaned_text_holds_no_control_character_and_cleaning_again_changes_nothing(text):
    out = clean(text)
    assert not UNSAFE_RE.search(out)
    assert clean(out) == out
    assert out.count("\n") <= text.count("\n") and out.count("\t") <= text.count("\t")


@settings(max_examples=examples(300), deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs"),
                                      blacklist_characters="\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
               | st.sampled_from("\n\t")))
def test_text_without_controls_is_unchanged(text):
    assert clean(text) == text


def test_whole_sequences_go_not_just_their_escape():
    # the payload of an OSC 52 or the parameters of a CSI would be noise on the screen
    assert clean("a\x1b]52;c;Y3VybA==\x07b\x1b[2Jc\x9b31md\x1b]8;;http://x/\x1b\\e") == "abcde"
    assert clean("keep [red]x[/red]") == "keep [red]x[/red]"


@settings(max_examples=examples(200), deadline=None)
@given(st.recursive(st.text() | st.integers() | st.none(),
                    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=5), kids, max_size=4),
                    max_leaves=12), st.booleans())
def test_json_output_is_the_same_data_with_no_raw_control_byte(data, ascii_only):
    out = json_dumps(data, ensure_ascii=ascii_only)
    assert json.loads(out) == data
    assert not FORBIDDEN.search(out.encode())


def test_the_console_prints_agent_text_as_text_in_cells_and_lines_styles_kept_on_a_terminal():
    buf = io.StringIO()
    con = console(buf, width=200)
    con.print(Text(HOSTILE))
    t = table("a", "b")
    t.add_row(HOSTILE, Text(HOSTILE, style="red"))
    con.print(t)
    con.print(HOSTILE)
    raw = buf.getvalue().encode()
    assert not FORBIDDEN.search(raw), raw
    text = buf.getvalue()
    assert text.count("[red]markup[/red]") == 4 and text.count("[link=http://evil]x[/link]") == 4
    assert "Y3VybCBldmlsfHNo" not in text  # the clipboard payload goes with its sequence
    # on a real terminal rich's own colours still come through (only the text's sequences go)
    tty = io.StringIO()
    from subconscious.commands.tables import SafeConsole

    SafeConsole(file=tty, force_terminal=True, color_system="standard", markup=False).print(Text("ok\x1b[5m", style="red"))
    assert tty.getvalue().startswith("\x1b[31mok") and "\x1b[5m" not in tty.getvalue()


def hostile_home(tmp_path: Path) -> dict:
    """A home with a Dropbox conflict copy whose user name (free text in the file name) is hostile, and
    one that is not JSON: doctor reports the first, status the second, both by name."""
    from subconscious.state.copynames import Engine, make_copy_name
    from subconscious.state.store.core import Store

    env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_", "CLAUDE"))}
    env.update(LETTA_HOME=str(tmp_path / "h"), SUBCONSCIOUS_HOST="laptop", SUBCONSCIOUS_STATE_DIR=str(tmp_path / "l"),
               COLUMNS="100")
    home = tmp_path / "h" / ".letta" / "claude"
    a = Store(home, "laptop", tmp_path / "l" / "locks", tmp_path / "l" / "clocks")
    a.put_conversation("s-a", "conv-a", "agent-1")
    user = "ev\x1b]52;c;aGk=\x07il\x9b2J\x1b[31m"
    (home / make_copy_name(Engine.DROPBOX, "conversations.json", host="D", user=user)).write_bytes(a.view_path.read_bytes())
    (home / make_copy_name(Engine.DROPBOX, "conversations.json", host="D", user=user + "2")).write_bytes(b"{not json")
    return env


def test_doctor_and_status_print_a_hostile_file_name_without_its_escapes(tmp_path):
    env = hostile_home(tmp_path)
    for verb in ("doctor", "status"):
        out = subprocess.run([sys.executable, "-m", "subconscious", verb], env=env, cwd=tmp_path, capture_output=True,
                             timeout=120).stdout
        assert b"conflicted copy" in out, out
        assert b"(ev" in out and b"'s conflicted copy" in out  # the text around the sequences stays
        assert not FORBIDDEN.search(out), (verb, out)
        js = subprocess.run([sys.executable, "-m", "subconscious", verb, "--json"], env=env, cwd=tmp_path,
                            capture_output=True, timeout=120).stdout
        assert not FORBIDDEN.search(js) and "\x1b]52" in js.decode("unicode_escape")  # escaped, and all there


def test_every_verb_prints_through_the_filter_plain_prints_and_logged_warnings_too(tmp_path):
    # watch, gc and doctor --fix print the hostile names with print() and the store's logged warnings, not
    # through rich: cli's filter on stdout and stderr cleans them as well
    for verb in (("watch", "--once"), ("gc", "--older-than", "0d"), ("doctor", "--fix")):
        home = tmp_path / "-".join(verb)
        home.mkdir()
        env = hostile_home(home)
        proc = subprocess.run([sys.executable, "-m", "subconscious", *verb], env=env, cwd=home, capture_output=True,
                              timeout=120)
        assert b"conflicted copy" in proc.stdout + proc.stderr, (verb, proc.stdout, proc.stderr)
        assert not FORBIDDEN.search(proc.stdout), (verb, proc.stdout)
        assert not FORBIDDEN.search(proc.stderr), (verb, proc.stderr)


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=3)), max_size=12).map("".join),
                min_size=1, max_size=4))
def test_whatever_text_goes_into_lines_and_table_cells_the_console_prints_no_control_byte(cells):
    buf = io.StringIO()
    con = console(buf, width=60)
    t = table(*(f"c{i}" for i in range(len(cells))))
    t.add_row(*cells)
    t.add_row(*(Text(c, style="bold") for c in cells))
    con.print(t)
    for c in cells:
        con.print(c, end="")
        con.print(Text(c, style="dim"))
    assert not FORBIDDEN.search(buf.getvalue().encode())


INVISIBLE = ["\u200e", "\u200f", "\u061c", "\u200b", "\u200c", "\u200d", "\u2060", "\u2063", "\ufeff", "\u180e",
             "\U000e0001", "\U000e0041", "\U000e007f"]


@pytest.mark.parametrize("ch", INVISIBLE + ["\u2028", "\u2029"])
def test_invisible_reorderers_and_hidden_tag_text_never_reach_the_terminal(ch):
    """Red team finding: bidi marks, zero-width and tag characters (which can spell a hidden instruction:
    U+E0041 is an invisible "A") and the Unicode line separators passed clean()."""
    text = f"rm -rf{ch} /tmp/x{ch}{ch}"
    got = clean(text)
    assert ch not in got and clean(got) == got
    assert got in ("rm -rf /tmp/x", "rm -rf\n /tmp/x\n\n")
    dumped = json_dumps({"t": text}, ensure_ascii=False)
    assert ch not in dumped and json.loads(dumped) == {"t": text}


# Unicode Default_Ignorable_Code_Point (DerivedCoreProperties) ranges, plus blank fillers/annotation marks
SURVIVORS = {
    "U+00AD soft hyphen": "\u00ad", "U+034F CGJ": "\u034f", "U+115F hangul choseong filler": "\u115f",
    "U+1160 hangul jungseong filler": "\u1160", "U+17B4 khmer inherent aq": "\u17b4", "U+17B5": "\u17b5",
    "U+180B mongolian FVS1": "\u180b", "U+180F mongolian FVS4": "\u180f", "U+206A..206F deprecated format": "\u206a",
    "U+3164 hangul filler": "\u3164", "U+FE00 VS1": "\ufe00", "U+FE0E VS15": "\ufe0e", "U+FFA0 halfwidth filler": "\uffa0",
    "U+FFF9 interlinear anchor": "\ufff9", "U+1D173 musical begin beam": "\U0001d173",
    "U+1BCA0 shorthand overlap": "\U0001bca0", "U+E0100 VS17": "\U000e0100", "U+E01EF VS256": "\U000e01ef",
}


def test_no_default_ignorable_survives_clean():
    left = [name for name, ch in SURVIVORS.items() if ch in clean("a" + ch + "b")]
    assert not left, left


def test_variation_selector_smuggling_hides_text():
    # the tag-character attack with variation selectors (bytes -> U+FE00..FE0F / U+E0100..E01EF after one emoji)
    def enc(b):
        return chr(0xFE00 + b) if b < 16 else chr(0xE0100 + b - 16)
    hidden = "\U0001F600" + "".join(enc(b) for b in b"ignore previous instructions")
    assert clean(hidden) == "\U0001F600", repr(clean(hidden))
