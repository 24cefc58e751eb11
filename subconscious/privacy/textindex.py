"""Private text found by its words, whichever tool printed it: an index of a project's private lines and the
scrub that withholds every line of a text holding one of them. Pure.

Tags and path rules (private.py, results.py) hide what a tool result *says* is private. A Bash ``cat``, an
MCP server's read, a ``sed -n 3p`` of a line inside a ``<private>`` block or a subagent quoting a file carry no
tag and name no path the rules know. So the worker also knows the private text itself (projectindex.py reads
the files): the lines inside ``<private>`` blocks of the project's files and every line of the files under
``SUBCONSCIOUS_PRIVATE_PATHS``, and any line of anything it sends — a prompt, an answer, a tool call's input,
a tool result — that *contains* one of them is replaced by :data:`~subconscious.privacy.private.MARKER`
(a run of such lines by one marker).

Left out of the index, because they mean nothing alone or are not private after all (the docs say so):

- a line shorter than :data:`MIN_BYTES` bytes once its surrounding blanks are stripped, or with fewer than
  :data:`MIN_ALNUM` letters or digits (``}``, ``---``, ``x = 1``);
- a line that is also public text of the project: outside every block of a file that is not private
  (``import os``, a license header), counted over the whole project.

What no verbatim check can see is not covered: a paraphrase, an encoding (base64, hex, a translation), a
part of a line shorter than the whole (``cut -c1-5``, ``head -c``), text that a tool reflowed.

Nothing private is kept: the index holds 64-bit digests of the lines (and their JSON-escaped forms, as an
MCP server may print them inside a JSON string) and a 32-bit digest of their first :data:`ANCHOR` bytes.
A text is looked at byte by byte (its UTF-8): where an anchor digest matches, the digest of the candidate
line's length from there is compared.
"""
from __future__ import annotations

import json
import re
import zlib
from hashlib import blake2b
from typing import Any, Iterable, Iterator

from .private import MARKER, private_spans

__all__ = ["MIN_BYTES", "MIN_ALNUM", "ANCHOR", "Entry", "PrivateLines", "file_lines", "meaningful", "entries_of",
           "split_lines"]

MIN_BYTES = 8   # a shorter private line is left out: it would withhold half of every text
MIN_ALNUM = 4   # ... and one of fewer letters or digits
ANCHOR = 8      # bytes an entry is first looked up by (every entry is at least this long)
MAX_ENTRIES = 500_000  # past this the index is partial (about 100 MiB of memory)

Entry = tuple[int, int, int]  # (anchor digest, length in bytes, digest of the whole)


def _digest(b: bytes) -> int:
    return int.from_bytes(blake2b(b, digest_size=8).digest(), "big")


def meaningful(line: str) -> "str | None":
    """``line`` stripped of its surrounding blanks, if it is worth indexing (see the module docstring)."""
    s = line.strip()
    if len(s) < MIN_BYTES // 4 or len(s.encode("utf-8", "surrogatepass")) < MIN_BYTES:
        return None
    alnum = 0
    for c in s:
        if c.isalnum():
            alnum += 1
            if alnum >= MIN_ALNUM:
                return s
    return None


def _forms(s: str) -> Iterator[bytes]:
    """The byte forms a line may be printed in: as it is, escaped inside a JSON string, escaped as HTML/XML."""
    seen = {s}
    yield s.encode("utf-8", "surrogatepass")
    for esc in (json.dumps(s, ensure_ascii=False)[1:-1], json.dumps(s, ensure_ascii=True)[1:-1],
                s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")):
        if esc not in seen:
            seen.add(esc)
            yield esc.encode("utf-8", "surrogatepass")


def entries_of(s: str) -> list[Entry]:
    """The index entries of one meaningful line ``s``."""
    return [(zlib.crc32(b[:ANCHOR]), len(b), _digest(b)) for b in _forms(s)]


def public_digest(s: str) -> int:
    """The digest a public line is known by (to leave a private line that is also public out)."""
    return _digest(s.encode("utf-8", "surrogatepass"))


_BREAK = re.compile("\r\n|\r|\n")


def split_lines(text: str) -> list[str]:
    """The lines of a file's text, whatever its line ends (CRLF, CR alone, LF)."""
    return _BREAK.split(text)


def file_lines(text: str, private_file: bool) -> tuple[list[str], list[str]]:
    """``(private, public)``: the meaningful lines of a file's ``text``. A private file's lines are all private;
    otherwise the text inside its ``<private>`` blocks (tags taken out, line by line) is private and the rest
    public."""
    if private_file:
        return [m for ln in split_lines(text) if (m := meaningful(ln))], []
    spans = private_spans(text)
    if not spans:
        return [], [m for ln in split_lines(text) if (m := meaningful(ln))]
    from .private import _TAG  # the tag grammar is private.py's

    private: list[str] = []
    public_parts: list[str] = []
    at = 0
    for a, b in spans:
        public_parts.append(text[at:a])
        private += [m for ln in split_lines(_TAG.sub("\n", text[a:b])) if (m := meaningful(ln))]
        at = b
    public_parts.append(text[at:])
    public = [m for part in public_parts for ln in split_lines(part) if (m := meaningful(ln))]
    return private, public


class PrivateLines:
    """The private lines of a project as digests, and the scrub. Empty: :meth:`scrub` changes nothing."""

    __slots__ = ("_anchors", "count", "partial")

    def __init__(self, entries: Iterable[Entry] = (), partial: str | None = None, limit: int = MAX_ENTRIES):
        # anchor -> length -> digests: a lookup costs one digest per distinct length, however many lines share
        # their first bytes (a dated log, a CSV)
        self._anchors: dict[int, dict[int, set[int]]] = {}
        count = 0
        for anchor, length, digest in entries:
            slot = self._anchors.setdefault(anchor, {}).setdefault(length, set())
            if digest not in slot:
                if count >= limit:
                    partial = partial or f"over {limit} private lines"
                    break
                slot.add(digest)
                count += 1
        self.count = count
        self.partial = partial  # why the project was not read whole (None: it was)

    @classmethod
    def of(cls, private: Iterable[str], public: Iterable[str] = ()) -> "PrivateLines":
        """The index of the meaningful ``private`` lines that are not also ``public`` (both as given)."""
        common = {public_digest(m) for s in public if (m := meaningful(s))}
        lines = {m for p in private if (m := meaningful(p))}
        return cls(e for s in lines if public_digest(s) not in common for e in entries_of(s))

    def __bool__(self) -> bool:
        return bool(self._anchors)

    def hit(self, line: str) -> bool:
        """Whether ``line`` holds a private line anywhere in it."""
        anchors = self._anchors
        if not anchors or len(line) < MIN_BYTES // 4:
            return False
        b = line.encode("utf-8", "surrogatepass")
        n = len(b)
        crc = zlib.crc32
        for i in range(n - ANCHOR + 1):
            found = anchors.get(crc(b[i:i + ANCHOR]))
            if found:
                for length, digests in found.items():
                    if i + length <= n and _digest(b[i:i + length]) in digests:
                        return True
        return False

    def scrub(self, text: str) -> str:
        """``text`` with every line holding a private line replaced by :data:`MARKER` (a run of them by one)."""
        if not self._anchors or len(text) < MIN_BYTES // 4:
            return text
        out: list[str] = []
        changed = False
        for line in text.split("\n"):
            if self.hit(line):
                if not (changed and out and out[-1] == MARKER):
                    out.append(MARKER)
                changed = True
            else:
                out.append(line)
        return "\n".join(out) if changed else text

    def scrub_value(self, value: Any, prepare=None) -> Any:
        """A tool call's input with :meth:`scrub` applied to every string in it (keys too), at any depth (an
        input nested too deep to walk becomes :data:`MARKER` whole); ``prepare`` first turns each string into
        what will be sent of it."""
        if not self._anchors:
            return value
        try:
            return self._scrub_value(value, prepare or (lambda t: t))
        except RecursionError:
            return MARKER

    def _scrub_value(self, value: Any, prepare) -> Any:
        if isinstance(value, str):
            return self.scrub(prepare(value))
        if isinstance(value, dict):
            return {self.scrub(prepare(k)) if isinstance(k, str) else k: self._scrub_value(v, prepare)
                    for k, v in value.items()}
        if isinstance(value, list):
            return [self._scrub_value(v, prepare) for v in value]
        return value


EMPTY = PrivateLines()
