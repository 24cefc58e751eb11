"""Text for a terminal: what the agent, the Letta server or a file in the shared home wrote, with nothing
left that a terminal would act on.

The agent's text comes from a model that reads transcripts, so a prompt injection anywhere in a session
can make it write escape sequences: an OSC 52 clipboard write, a clear-screen, a fake prompt, colours,
a hyperlink, a title change. :func:`clean` removes every escape and control sequence whole (ESC and 8-bit
C1 forms: CSI, OSC, DCS, SOS, PM, APC, the two- and three-byte escapes), then every C0 control but ``\\n``
and ``\\t`` (a ``\\r`` rewrites the line), DEL, every C1 character, the bidirectional embeddings,
overrides and isolates (U+202A-202E, U+2066-2069: "Trojan source" text that reads other than it is), the
bidi marks (U+200E/F, U+061C), Unicode's default-ignorable characters (zero-width ones, U+2060-206F, the soft
hyphen, variation selectors, U+FEFF, U+180B-180F, tag characters U+E0000-E0FFF…) and the Hangul fillers, which
hide text or reorder it (a run of variation selectors after an emoji can spell a hidden instruction); the line and paragraph
separators U+2028/2029 become ``\\n`` (what they mean, and what a terminal would not show).
Pure, idempotent, and text without those characters comes back unchanged.

:func:`json_dumps` is ``json.dumps`` whose output holds none of them either (JSON escapes C0 itself; DEL,
C1 and the bidi controls are written as ``\\uXXXX`` too, also with ``ensure_ascii=False``).

Only ``re`` and ``json`` are imported. Used at the output seams: every verb's stdout and stderr
(cli._filtered_main) and rich's console (commands/tables.py, which writes past that filter to keep its
own colours).
"""

from __future__ import annotations

import json
import re

__all__ = ["clean", "json_dumps", "json_escape", "UNSAFE"]

# every character clean() removes when it stands alone (the sequences are removed whole first)
# Unicode's default-ignorable code points (shown as nothing, so they can hide or smuggle text: a variation
# selector a byte, tag characters a letter) and the Hangul fillers, which render blank
_INVISIBLE = ("\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u2060-\u206f\u3164"
              "\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
              "\U000e0000-\U000e0fff")
UNSAFE = "[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029" + _INVISIBLE + "]"

_SEQUENCE = re.compile(
    # CSI: ESC [ or C1 CSI, parameters, intermediates, the final byte (a cut sequence goes as far as it got)
    "(?:\x1b\\[|\x9b)[0-?]*[ -/]*[@-~]?"
    # OSC, DCS, SOS, PM, APC: their string up to BEL or ST (ESC \\ or C1 ST); an unterminated one ends at the
    # next control character (a newline: the text after it stays)
    "|(?:\x1b[\\]PX^_]|[\x9d\x90\x98\x9e\x9f])[^\x00-\x1f\x7f-\x9f]*(?:\x07|\x1b\\\\|\x9c)?"
    # every other escape: ESC, intermediates, a final byte
    "|\x1b[ -/]*[0-~]?"
)
_UNSAFE = re.compile(UNSAFE)
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029" + _INVISIBLE + "]")
_SEPARATORS = re.compile("[\u2028\u2029]")


def clean(text: str) -> str:
    """``text`` with every terminal control sequence and control character removed (``\\n``, ``\\t`` kept)."""
    if not _UNSAFE.search(text):
        return text
    return _UNSAFE.sub("", _SEPARATORS.sub("\n", _SEQUENCE.sub("", text)))


def json_escape(text: str) -> str:
    """JSON text with DEL, C1 and bidi controls written as ``\\uXXXX``: they can only stand in its strings,
    where the escape means the same character (so the data is unchanged)."""
    if not _JSON_UNSAFE.search(text):
        return text
    return _JSON_UNSAFE.sub(lambda m: _u(ord(m.group())), text)


def _u(code: int) -> str:
    if code <= 0xFFFF:
        return "\\u%04x" % code
    code -= 0x10000  # past the BMP: a JSON string spells it as its UTF-16 surrogate pair
    return "\\u%04x\\u%04x" % (0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF))


def json_dumps(obj, **kw) -> str:
    """``json.dumps(obj, **kw)`` through :func:`json_escape`."""
    return json_escape(json.dumps(obj, **kw))
