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
from typing import Any, Mapping

from ..clock import COUNT_DIGITS, WALL_DIGITS
from ..jsontext import Unparseable, _brackets, loads_state
from ..textforms import _leaf, _s, dumps_canonical

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
    """The view's member lines: line → key and key → line, for a view parsed to ``value``.

    ``canonical``: every line is exactly what ``dumps_canonical(expand=1)`` writes for its entry, and
    every entry is a valid session id mapped to a live entry of the one shape we write (four string
    fields, a well-formed stamp): ``value`` may then stand in for validating equal entries elsewhere,
    and the lines of unchanged entries for rendering them again."""

    def __init__(self, by_line: dict[bytes, str], by_key: dict[str, bytes], value: dict | None = None,
                 canonical: bool = False):
        self.by_line, self.by_key = by_line, by_key
        self.value, self.canonical = value, canonical and value is not None


def member_lines(raw: bytes, value: Any, *, canonical_only: bool = False) -> ViewLines | None:
    """The lines of ``raw`` (which parsed to ``value``) if it holds one entry per line, each key once
    (``canonical_only``: only if it is canonical, see :class:`ViewLines`)."""
    if type(value) is not dict:
        return None
    if _CANONICAL_VIEW.fullmatch(raw) is not None:  # proves the form by itself (no skeleton needed)
        lines = raw[len(HEAD):-len(TAIL)].split(b",\n")
        canonical = True
    elif canonical_only:
        return None
    else:
        lines, canonical = _lines(raw), False
    if lines is None or len(lines) != len(value):  # a key given twice
        return None
    by_line = dict(zip(lines, value))
    if len(by_line) != len(lines):
        return None
    return ViewLines(by_line, dict(zip(value, lines)), value, canonical)


# One line of a canonical view: a session id (ids._SESSION_RE) mapped to {agentId, conversationId, hlc,
# host}, sorted, compact, every string free of quotes and backslashes — so its bytes are what
# ``encode_basestring`` gives for the parsed string (no escapes: JSON forbids raw control characters),
# the conversation id non-empty and the stamp of clock.STAMP_RE's form: what records.normalize_record
# and ids.is_session_id accept unchanged. A string can hold neither a quote nor a newline here, so the
# whole-file pattern proves one member per line on its own.
_STR = rb'"[^"\\\n]*"'
_LINE = (rb'  "[A-Za-z0-9][A-Za-z0-9_-]{0,127}": \{"agentId":' + _STR + rb',"conversationId":"[^"\\\n]+",'
         rb'"hlc":"[0-9]{1,%d}:[0-9]{1,%d}","host":' % (WALL_DIGITS, COUNT_DIGITS) + _STR + rb'\}')
_LINE_RE = re.compile(_LINE)
_CANONICAL_VIEW = re.compile(rb"\{\n(?:" + _LINE + rb",\n)*" + _LINE + rb"\n\}\n")


def _entry_lines(entries: Mapping[str, Any], view: ViewLines) -> list[bytes]:
    """``entries`` sorted, each as the line ``dumps_canonical(expand=1)`` writes for it (two-space
    indent): the canonical view's own line where the entry is unchanged (equal to a value whose
    fields are all strings, so equal as JSON too), else rendered."""
    old, by_key = view.value, view.by_key
    out = []
    append = out.append
    for key in sorted(entries):
        value = entries[key]
        have = old.get(key)  # type: ignore[union-attr]
        if have is value or (have is not None and have == value):
            append(by_key[key])
        else:
            append(f"  {_s(key)}: {_leaf(value)}".encode())
    return out


def render_view(value: dict[str, Any], view: ViewLines | None) -> bytes:
    """``dumps_canonical(value, expand=1).encode()``, re-using the lines of a canonical view."""
    if view is None or not view.canonical or not value:
        return dumps_canonical(value, expand=1).encode()
    return HEAD + b",\n".join(_entry_lines(value, view)) + TAIL


_CONVERSATIONS_LINE = b'\n  "conversations": {}'


def render_shard(shard: dict[str, Any], view: ViewLines | None) -> bytes:
    """``dumps_canonical(shard, expand=2).encode()``, re-using the lines of a canonical view for the
    entries of the shard's ``conversations`` map (one level deeper: two more spaces before each)."""
    convs = shard.get("conversations")
    if view is None or not view.canonical or type(convs) is not dict or not convs:
        return dumps_canonical(shard, expand=2).encode()
    rest = dumps_canonical({**shard, "conversations": {}}, expand=2).encode()
    if rest.count(_CONVERSATIONS_LINE) != 1:  # pragma: no cover - raw newlines are structure only
        return dumps_canonical(shard, expand=2).encode()
    head, _, tail = rest.partition(_CONVERSATIONS_LINE)
    body = b",\n  ".join(_entry_lines(convs, view))
    return head + b'\n  "conversations": {\n  ' + body + b"\n  }" + tail


def read_against(raw: bytes, view: ViewLines) -> dict[str, Any] | None:
    """What the file ``raw`` says beyond the view's lines: the entries of its other lines (the lines
    it shares with the view are left out), or None when that cannot be told without parsing it all."""
    known = view.by_line
    lines = rest = None
    if view.canonical and raw.startswith(HEAD) and raw.endswith(TAIL):
        # each line the canonical view has is of the canonical line form; if every other line is too,
        # the whole file is (_CANONICAL_VIEW), which proves one member per line without the skeleton
        pieces = raw[len(HEAD):-len(TAIL)].split(b",\n")
        others = [line for line in pieces if line not in known]
        if all(map(_LINE_RE.fullmatch, others)):
            lines, rest = pieces, others
    if lines is None:
        lines = _lines(raw)
        if lines is None:
            return None
    present = set(lines)
    if len(present) != len(lines):
        return None  # a line given twice: let the full parse decide
    if rest is None:
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


_SHARD_OPEN, _SHARD_CLOSE = b'\n  "conversations": {\n', b"\n  }"
_SHARD_EMPTY = b'\n  "conversations": {}'


def shard_against(raw: bytes, view: ViewLines) -> dict[str, Any] | None:
    """The value of the shard file ``raw`` when every line of its ``conversations`` map is a line of
    the canonical ``view`` indented two more spaces (what :func:`render_shard` writes): the entries are
    then the view's parsed ones, and only the rest of the file is parsed. None when that cannot be told.

    Exact: view lines are flat members with no quote, backslash or newline inside a string, so the
    block is a valid object of exactly those members; what is left, with the block emptied, must parse
    and be ``dumps_canonical(expand=2)`` of its value, where a line indented two spaces is a top-level
    member — so the block is the top-level ``conversations`` value, and the file that value with it."""
    if not view.canonical:
        return None
    start = raw.find(_SHARD_OPEN)
    if start < 0:
        return None
    body_start = start + len(_SHARD_OPEN)
    end = raw.find(_SHARD_CLOSE, body_start)
    if end < 0 or raw[body_start:body_start + 2] != b"  ":
        return None
    body = raw[body_start:end]
    pieces = body[2:].split(b",\n  ")
    keys = list(map(view.by_line.get, pieces))
    if None in keys or b"  " + b",\n  ".join(pieces) != body:
        return None
    old = view.value
    convs = {key: old[key] for key in keys}  # type: ignore[index]
    if len(convs) != len(pieces):
        return None  # a key given twice: let the full parse decide
    rest = raw[:start] + _SHARD_EMPTY + raw[end + len(_SHARD_CLOSE):]
    try:
        value = loads_state(rest)
    except Unparseable:
        return None
    if (type(value) is not dict or value.get("conversations") != {}
            or dumps_canonical(value, expand=2).encode() != rest):
        return None
    value["conversations"] = convs
    return value
