"""Parsing the bytes of a state file (or a hook's stdin) as JSON, whatever they are.

Pure, no I/O. :func:`loads_state` either returns a JSON value or raises :class:`Unparseable` — never
anything else: not ``UnicodeDecodeError``, ``JSONDecodeError``, ``RecursionError`` (nesting is bounded by
a scan of the bytes before the parser runs), nor the ``ValueError`` of an integer over Python's digit
limit. Accepted beyond strict JSON: a leading UTF-8 byte-order mark (Windows Notepad writes one).
Refused although Python's ``json`` takes them: ``NaN``/``Infinity`` and lone UTF-16 surrogate escapes
(``"\\ud800"``), which no UTF-8 file can hold, so a value carrying one could never be written back.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

MAX_DEPTH = 512  # our files nest 3 deep; hook input a few more
BOM = b"\xef\xbb\xbf"

_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'[]{}"')
_STEP = tuple(1 if b in b"[{" else -1 if b in b"]}" else 0 for b in range(256))
_QUICK_ROUNDS = 8  # at least 8 levels: our files nest 3 or 4 deep, so these take them apart, whatever their size
_COUNT_MAX = 1 << 20  # brackets counted one by one (~0.1 s) when the rounds are not enough; more: refused
UNCOUNTED = 1 << 62  # depth_bound of a file with too many brackets to count
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


class Unparseable(ValueError):
    """The bytes are no JSON value we can use; ``reason`` says why in a few words (to follow
    "invalid JSON: ")."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _brackets(raw: bytes, drop: bytes = _NOT_STRUCTURE) -> bytes:
    """The brackets of ``raw`` outside JSON strings, in order, at C speed (no per-byte Python)
    (``drop``: the bytes to leave out; a caller may keep more than brackets and quotes).

    With escaped backslashes and quotes gone, the quotes left alternate open/close; dropping two
    adjacent ones (an empty string, or the empty gap between two strings) changes nothing outside the
    strings, and after that only strings that hold a bracket still have quotes around them.
    """
    if b"\\" in raw:
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    kept = raw.translate(None, drop).replace(b'""', b"")
    if b'"' in kept:
        kept = b"".join(kept.split(b'"')[::2])  # every odd piece is inside a string
    return kept


def depth_bound(raw: bytes, limit: int = MAX_DEPTH) -> int:
    """A bound on how deep arrays and objects nest in ``raw``: a JSON parser reading ``raw`` never has
    more of them open at once. For valid JSON of up to a million brackets it is over ``limit`` exactly
    when the depth is; beyond that it may be up to 16 over, or :data:`UNCOUNTED` when many brackets
    nest deeper than 8 (not worth counting one by one: no state file or hook input looks like that).
    """
    brackets = _brackets(raw)
    if brackets.count(b"[") + brackets.count(b"{") <= limit:
        return limit  # not even that many brackets
    rest, steps = brackets, 0
    while steps < 2 * _QUICK_ROUNDS:  # a round drops the innermost pairs: one or two levels
        shorter = rest.replace(b"[]", b"").replace(b"{}", b"")
        steps += 2
        if not shorter:  # at most ``steps`` deep: enough unless the limit is lower (then count)
            return steps if steps <= limit or len(brackets) > _COUNT_MAX else _most_open(brackets)
        if len(shorter) == len(rest):
            break  # what is left does not pair up: no JSON, but bounded below all the same
        if len(shorter) > _COUNT_MAX and len(rest) - len(shorter) < len(rest) // 16:
            return UNCOUNTED  # a level is under 1/16 of the brackets: deeper than 8, no need to go on
        rest = shorter
    if len(brackets) <= _COUNT_MAX:
        return _most_open(brackets)  # exact
    if len(rest) <= _COUNT_MAX:
        return steps + _most_open(rest)  # a replace drops disjoint pairs: one more open level at most
    return UNCOUNTED


def _most_open(brackets: bytes) -> int:
    return max(0, max(accumulate(map(_STEP.__getitem__, brackets))))


def _no_constant(name: str) -> Any:
    raise Unparseable(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_no_constant)  # one for every read (json.loads makes one per call)


def loads_state(raw: bytes | str, *, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value ``raw`` holds; :class:`Unparseable` for anything else (see the module docstring)."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    if raw.startswith(BOM):
        raw = raw[len(BOM):]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unparseable(f"not UTF-8 text (byte {exc.start})") from None
    depth = depth_bound(raw, max_depth)
    if depth == UNCOUNTED:
        raise Unparseable(f"over {_COUNT_MAX:,} brackets, nested unlike any state file")
    if depth > max_depth:
        raise Unparseable(f"nested deeper than {max_depth} levels")
    try:
        value = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise Unparseable(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except Unparseable:
        raise
    except RecursionError:  # unreachable after the depth scan; kept so the promise holds regardless
        raise Unparseable("nested too deep for the parser") from None
    except ValueError as exc:  # "Exceeds the limit (4300 digits) for integer string conversion: ..."
        text = str(exc)
        raise Unparseable(text.split(":")[0] if "integer string conversion" in text else text[:120]) from None
    if _SURROGATE_ESCAPE.search(raw):
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise Unparseable("holds a lone UTF-16 surrogate (\\ud800-\\udfff) that UTF-8 cannot carry") from None
    return value
