"""``json.loads`` and ``json.dumps`` for the hot path, without importing :mod:`json`.

``import json`` costs a hook process 6-8 ms here: its decoder and scanner import :mod:`re`, which imports
``enum``, ``functools`` and ``collections`` — about as much as the interpreter's own start-up spends on
everything else. The work itself is done by CPython's C accelerator ``_json`` in both cases: ``json.loads``
and ``json.dumps`` (default arguments) are its scanner and encoder behind a Python layer. This module
builds the same scanner and encoder from ``_json`` directly, with the arguments :mod:`json` gives them, so
the results are the same object for every input (``tests/unit/test_fastjson.py`` checks that against
:mod:`json` on generated documents and on arbitrary text).

Anything outside what the C parts decide alone goes to :mod:`json` itself: bytes that are not plain UTF-8
JSON (a BOM, UTF-16/32), a document :mod:`json` would reject (its error, with its message and position,
comes from :mod:`json`), an interpreter without ``_json``.
"""

from __future__ import annotations

try:
    import _json
except ImportError:  # pragma: no cover - an interpreter without the accelerator: json does it all
    _json = None

_WS = " \t\n\r"  # json.decoder.WHITESPACE


class _Context:
    """What ``_json.make_scanner`` reads from a ``json.JSONDecoder()`` with no arguments."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__
    memo: dict = {}


_scan = _json.make_scanner(_Context()) if _json is not None else None


def loads(data: bytes | bytearray | str):
    """``json.loads(data)``: the same value for every document json accepts; for any other input json's own
    exception (:class:`json.JSONDecodeError` is a ``ValueError``, bad UTF-8 a ``UnicodeDecodeError``)."""
    if _scan is not None:
        text = _plain_text(data)
        if text is not None:
            start = len(text) - len(text.lstrip(_WS))
            try:
                value, end = _scan(text, start)
            except StopIteration:
                value, end = None, -1  # no value: json raises "Expecting value"
            except ValueError:
                end = -1  # json raises it again, with its own message
            if end >= 0 and not text[end:].strip(_WS):
                return value
    import json

    return json.loads(data)


def _plain_text(data) -> str | None:
    """``data`` as json.loads would decode it, when that is plain UTF-8 (or already text without a BOM);
    None for anything json must decide itself."""
    if isinstance(data, str):
        return None if data.startswith("\ufeff") else data
    if not isinstance(data, (bytes, bytearray)):
        return None
    head = bytes(data[:4])
    # json.detect_encoding: a BOM, or a NUL among the first bytes (UTF-16/32), is not plain UTF-8
    if head.startswith(b"\xef\xbb\xbf") or b"\x00" in head:
        return None
    try:
        return data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return None


def dumps(value, separators: tuple[str, str] = (", ", ": ")) -> str:
    """``json.dumps(value, separators=separators)`` with json's other defaults (ASCII, NaN allowed, circular
    check); what it cannot encode raises as json would (TypeError, ValueError)."""
    if _json is not None:
        item, key = separators
        encode = _json.make_encoder({}, _cannot_encode, _json.encode_basestring_ascii, None, key, item,
                                    False, False, True)
        try:
            return "".join(encode(value, 0))
        except (TypeError, ValueError):
            pass  # json raises the same, with its own message
    import json

    return json.dumps(value, separators=separators)


def _cannot_encode(value):
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
