"""Private text: what the user marked, or the files they named, never leaves this machine. Pure.

- ``<private>…</private>`` in a prompt, an answer, a tool call or a tool result is replaced by
  :data:`MARKER` before redaction runs. Tags are matched in any case and with spaces inside the angle
  brackets (``<PRIVATE>``, ``< /private >``); nested tags hide up to the closing tag of the outermost one;
  an opening tag that is never closed hides everything after it in that text; a closing tag with no
  opening tag before it hides everything before it (its opening tag was in an earlier piece of the same
  answer: Claude Code writes each content block of an answer on a line of its own).
- ``SUBCONSCIOUS_PRIVATE_PATHS`` (globs separated by ``:``, e.g. ``*.env:secrets/**:/home/me/notes/*``):
  the result of a tool call naming a matching path (any tool — Claude Code's, an MCP server's — in any path
  field of its input: :func:`tool_paths`) is replaced by a note saying so, and Grep/Glob result lines naming a matching file
  are dropped. A glob without ``/`` matches a file name anywhere; one with ``/`` matches the end of the
  path (``secrets/**`` is any file under any directory named ``secrets``) or, when absolute, the path.
  ``*`` also matches ``/``. Case is ignored (a wider match is the safe side).

Text that carries neither a tag nor a path (a Bash ``cat``, an MCP read of a window inside a block, Claude
quoting a file) is found by its words: textindex.py.
"""

from __future__ import annotations

import fnmatch
import os
import re
from functools import lru_cache
from typing import Any, Iterable, Mapping, Sequence

__all__ = ["MARKER", "PATH_NOTE", "hide_private", "hide_private_lines", "hide_private_parts", "private_spans",
           "has_tag", "private_globs", "is_private_path", "tool_paths", "path_fields",
           "private_result", "ENV_PRIVATE_PATHS"]

MARKER = "[private text removed]"
ENV_PRIVATE_PATHS = "SUBCONSCIOUS_PRIVATE_PATHS"
PATH_NOTE = "[the result of %s on a private path (SUBCONSCIOUS_PRIVATE_PATHS) was not sent]"
LINES_NOTE = "[%d lines naming private paths (SUBCONSCIOUS_PRIVATE_PATHS) were not sent]"
_TAG = re.compile(r"<\s*(/?)\s*private(?:\s[^<>]*)?>", re.I)
_LISTING_TOOLS = frozenset({"Grep", "Glob", "LS"})


def private_spans(text: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` spans of ``text`` that are private (tags included), in order, not overlapping
    (see the module docstring for the rules)."""
    if "<" not in text:
        return []
    tags = list(_TAG.finditer(text))
    if not tags:
        return []
    # a closing tag without an opening tag before it: everything up to it is private
    depth, start = 0, 0
    for i, m in enumerate(tags):
        if m.group(1):
            if depth == 0:
                start = i + 1
            else:
                depth -= 1
        else:
            depth += 1
    spans: list[tuple[int, int]] = []
    if start:
        spans.append((0, tags[start - 1].end()))
    depth, opened = 0, 0
    for m in tags[start:]:
        if m.group(1):  # closing (never unmatched here)
            depth -= 1
            if depth == 0:
                spans.append((opened, m.end()))
        else:
            if depth == 0:
                opened = m.start()
            depth += 1
    if depth:  # an unclosed opening tag: hidden to the end
        spans.append((opened, len(text)))
    return spans


def _replace(text: str, spans: Iterable[tuple[int, int]], keep_lines: bool) -> str:
    out: list[str] = []
    at = 0
    for a, b in spans:
        out += [text[at:a], MARKER]
        if keep_lines:
            out.append("\n" * text.count("\n", a, b))
        at = b
    out.append(text[at:])
    return "".join(out)


def hide_private(text: str) -> str:
    """``text`` with every private passage replaced by :data:`MARKER` (see the module docstring).
    Idempotent; the result holds no private tag."""
    spans = private_spans(text)
    return _replace(text, spans, False) if spans else text


def hide_private_lines(text: str) -> str:
    """:func:`hide_private` that keeps the line count: a private passage becomes :data:`MARKER` followed by
    as many line breaks as it held, so line ``N`` of the result is what is left of line ``N`` of ``text``.
    For a whole file, before any window, match or count is taken from it."""
    spans = private_spans(text)
    return _replace(text, spans, True) if spans else text


def hide_private_parts(parts: Sequence[str]) -> list[str]:
    """Hide private text on the joined text of ``parts`` (the content blocks of one message, in order) and
    give each part back: a passage that opens in one part and closes in a later one is hidden in every part
    it touches, the middle ones included."""
    joined = "".join(parts)
    spans = private_spans(joined)
    if not spans:
        return list(parts)
    out, at = [], 0
    for part in parts:
        lo, hi = at, at + len(part)
        local = [(max(a, lo) - lo, min(b, hi) - lo) for a, b in spans if a < hi and b > lo]
        out.append(_replace(part, local, False) if local else part)
        at = hi
    return out


def has_tag(text: str) -> bool:
    """Whether ``text`` holds a private tag (opening or closing)."""
    return "<" in text and _TAG.search(text) is not None


def private_globs(env: Mapping[str, str] = os.environ) -> tuple[str, ...]:
    """The globs of ``SUBCONSCIOUS_PRIVATE_PATHS`` (``:``-separated; also ``;`` on Windows)."""
    raw = env.get(ENV_PRIVATE_PATHS) or ""
    parts = re.split(r"[:;]" if os.name == "nt" else r":", raw)
    return tuple(p.strip() for p in parts if p.strip())


@lru_cache(maxsize=256)
def _pattern(glob: str) -> re.Pattern[str]:
    return re.compile(fnmatch.translate(glob.replace("\\", "/").lower()))


def is_private_path(path: str, globs: Iterable[str]) -> bool:
    """Whether ``path`` matches one of ``globs`` (see the module docstring)."""
    globs = tuple(globs)
    if not globs or not path:
        return False
    p = path.replace("\\", "/").lower()
    parts = [x for x in p.split("/") if x]
    for g in globs:
        pat = _pattern(g)
        if g.startswith("/"):
            if pat.match(p.rstrip("/")):
                return True
            continue
        if "/" not in g.strip("/"):
            if parts and pat.match(parts[-1]):
                return True
            if any(pat.match(x) for x in parts[:-1]):  # a directory name: everything under it
                return True
            continue
        for i in range(len(parts)):
            if pat.match("/".join(parts[i:])):
                return True
    return False


def _path_key(key: Any) -> bool:
    """Whether an input field names a path: ``path``, ``file_path``, ``filePath``, ``notebook_path``, ``paths``,
    ``source``, ``destination``, any ``…_path``/``…Path``/``…_paths``, ``file``/``files``/``filename``,
    ``dir``/``directory`` (MCP servers name them as they like)."""
    if not isinstance(key, str):
        return False
    k = key.replace("_", "").replace("-", "").lower()
    return k.endswith(("path", "paths")) or k in _PATH_NAMES


_PATH_NAMES = frozenset({"source", "destination", "file", "files", "filename", "filenames", "dir", "directory",
                         "target", "src", "dst", "dest", "uri"})


def path_fields(tool_input: Any) -> list[str]:
    """The names of the path fields at the top of a tool call's input (:func:`_path_key`)."""
    return [k for k in tool_input if _path_key(k)] if isinstance(tool_input, dict) else []


def tool_paths(tool_input: Any, depth: int = 4) -> list[str]:
    """The paths a tool call names: the string (or list of strings) values of its path fields (see
    :func:`_path_key`) and ``file:`` URLs in ``url``/``href`` fields, at the top of its input and inside it
    (``{"arguments": {"path": …}}``, ``{"edits": [{"path": …}]}``), ``~`` expanded, ``file://`` taken off."""
    out: list[str] = []

    def walk(value: Any, left: int) -> None:
        if left < 0:
            return
        if isinstance(value, dict):
            for k, v in value.items():
                if _path_key(k) or (isinstance(k, str) and k.lower() in ("url", "href")):
                    for x in (v if isinstance(v, list) else [v]):
                        if isinstance(x, str) and x and (_path_key(k) or x[:5].lower() == "file:"):
                            out.append(_as_path(x))
                if isinstance(v, (dict, list)):
                    walk(v, left - 1)
        elif isinstance(value, list):
            for v in value[:1000]:
                if isinstance(v, (dict, list)):
                    walk(v, left - 1)

    walk(tool_input, depth)
    return out


def _as_path(v: str) -> str:
    if v[:5].lower() == "file:":
        from urllib.parse import unquote

        v = unquote(v[5:])
        if v.startswith("//"):
            v = v[2:]
            v = v[v.find("/"):] if not v.startswith("/") and "/" in v else v  # file://host/path
    if v.startswith("~"):
        v = os.path.expanduser(v)
    return v


def _listed_path(line: str) -> str:
    """The file a Grep/Glob result line names: the whole line, or what comes before ``:N:``/``:``."""
    m = re.match(r"(.+?)(?::\d+[:\-]|-\d+-|:)", line)
    return m.group(1) if m else line.strip()


def private_result(tool: str, tool_input: Any, content: str, globs: Iterable[str], note: bool = True) -> str:
    """A tool result as it may leave the machine under ``globs``: a note instead of the result of a call on a
    private path; a listing without the lines naming private files (with ``note``, a line saying how many
    went; the agent's own tools pass ``note=False``: they never searched those files, and a count of what
    was left out would tell it what it may not see)."""
    globs = tuple(globs)
    if not globs:
        return content
    if any(is_private_path(p, globs) for p in tool_paths(tool_input)):  # any tool: an MCP server's too
        return PATH_NOTE % tool
    if tool in _LISTING_TOOLS or tool == "unknown":
        lines = content.split("\n")
        kept = [ln for ln in lines if not (ln.strip() and is_private_path(_listed_path(ln.strip()), globs))]
        if len(kept) != len(lines):
            return "\n".join(kept + ([LINES_NOTE % (len(lines) - len(kept))] if note else []))
    return content
