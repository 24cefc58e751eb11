"""Reading a copy of ``conversations.json`` by what it does not share with the view.

A sync engine's conflict copy of the view, or a version a publish displaced, repeats the view in all
but a few entries; parsing and validating its 100,000 identical entries again is most of what folding
three copies costs. The view is written one entry per line (``dumps_canonical(expand=1)``), and so are
its copies: :func:`member_lines` proves that a parsed file really holds exactly one entry per line,
and :func:`read_against` then parses only the lines of a copy that the view does not have, byte for
byte. Pure; no I/O.

Why this is exact: JSON strings cannot hold a raw newline, so every line starts outside any string.
Reduced to its structure (strings emptied, only ``{}[]:,`` and newlines kept), a file that is
``{``, then lines ``:{…},``, then ``}`` with nothing nested inside the ``{…}`` has exactly one member
per middle line, whose value is the flat object on that line. A copy of that form whose lines the
view has (verified members, hence valid JSON) and whose other lines parse, with no key given twice,
is exactly the object those members make — so entries repeated from the view can be left out: read
from the view, they merge to the same result (the caller merges the view first, with the same rules
for copies and displaced versions entry by entry). Anything else — another layout, a byte-order mark,
a key given twice — returns None and the caller parses the whole file, errors and all.
"""

from __future__ import annotations

import re
from typing import Any

from .jsontext import Unparseable, _brackets, loads_state

_KEEP = b'{}[]":,\n'
_DROP = bytes(b for b in range(256) if b not in _KEEP)
_ONE_PER_LINE = re.compile(rb"\{\n(?::\{[:,]*\},\n)*:\{[:,]*\}\n\}\n")
HEAD, TAIL = b"{\n", b"\n}\n"


def _skeleton(raw: bytes) -> bytes:
    """``raw``'s structure outside strings: only ``{}[]:,`` and newlines."""
    return _brackets(raw, _DROP)


def _lines(raw: bytes) -> list[bytes] | None:
    """The member lines (without their commas) of a file in the one-entry-per-line form, else None."""
    if not (raw.startswith(HEAD) and raw.endswith(TAIL)) or _ONE_PER_LINE.fullmatch(_skeleton(raw)) is None:
        return None
    return raw[len(HEAD):-len(TAIL)].split(b",\n")


class ViewLines:
    """The view's member lines: line → key and key → line, for a view parsed to ``value``."""

    def __init__(self, by_line: dict[bytes, str], by_key: dict[str, bytes]):
        self.by_line, self.by_key = by_line, by_key


def member_lines(raw: bytes, value: Any) -> ViewLines | None:
    """The lines of ``raw`` (which parsed to ``value``) if it holds one entry per line, each key once."""
    if type(value) is not dict:
        return None
    lines = _lines(raw)
    if lines is None or len(lines) != len(value):  # a key given twice
        return None
    by_line = dict(zip(lines, value))
    if len(by_line) != len(lines):
        return None
    return ViewLines(by_line, dict(zip(value, lines)))


def read_against(raw: bytes, view: ViewLines) -> dict[str, Any] | None:
    """What the file ``raw`` says beyond the view's lines: the entries of its other lines (the lines
    it shares with the view are left out), or None when that cannot be told without parsing it all."""
    lines = _lines(raw)
    if lines is None:
        return None
    present = set(lines)
    if len(present) != len(lines):
        return None  # a line given twice: let the full parse decide
    known = view.by_line
    rest = [line for line in lines if line not in known]
    if not rest:
        return {}
    try:
        value = loads_state(b"{" + b",".join(rest) + b"}")
    except Unparseable:
        return None
    if type(value) is not dict or len(value) != len(rest):
        return None
    for key in value:  # the same key on a line shared with the view too: the full parse orders them
        line = view.by_key.get(key)
        if line is not None and line in present:
            return None
    return value
