"""Claude Code's own Read and Grep results: which of their lines fall inside a ``<private>`` block of the file
they came from. Pure, given a way to read a file.

Hiding tags in a tool result alone is exact only when the result starts where the file starts: Claude Code's
Read pages files (``offset``; over 2,000 lines it always does) and its Grep returns single lines, so a window
or a match inside a block carries no tag at all. For those results the worker reads the file itself
(:func:`project_reader`: a regular file inside the session's project, opened without following a link that
leads anywhere else) and works out the private lines of the *whole* file:

- the file holds no private tag (and neither does the result): the result passes as it is;
- it does: each result line is checked against the file's line of that number and replaced by what is left
  of it once the whole file's private blocks are hidden (a line wholly inside a block is dropped; a run of
  dropped lines becomes one :data:`~subconscious.privacy.private.MARKER`);
- it cannot decide (the file is gone, unreadable, outside the project, or its lines no longer match the
  result's): a window that does not start at line 1, or a Grep line of such a file, is withheld —
  :func:`checked_result` returns None and the update says so.

A Read from line 1 whose file cannot be read is judged on its own text (its tags are all in it). The numbered
snippet of an Edit/MultiEdit/Write result is such a window too. A window's lines are checked against the file
even when it holds no tag now (its block may have been edited out since). A Grep's file names and counts
(files_with_matches, count) list a file with blocks only when its public text matches, counted on that text.
"""
from __future__ import annotations

import os
import re
import stat
from typing import Any, Callable, Optional

from .private import MARKER, has_tag, hide_private_lines

__all__ = ["checked_result", "project_reader", "resolved_input", "WITHHELD", "Reader"]

Reader = Callable[[str], Optional[str]]
WITHHELD = "withheld: could not check it for private text"
MAX_FILE_BYTES = 16 * 1024 * 1024
SCAN_CHARS = 16_384   # result text looked at (the update cuts a result at 1,500 characters anyway)
MAX_FILES = 64        # files a Grep result may make the worker read
MAX_TOTAL_CHARS = 64 * 1024 * 1024  # and their size together
_READ_LINE = re.compile(r"^(\s*)(\d+)(\t|\u2192)(.*)$", re.S)
_GREP_NUMBERED = (re.compile(r"^(.*?)(:)(\d+)(:)(.*)$", re.S), re.compile(r"^(.*?)(-)(\d+)(-)(.*)$", re.S))
_NOTE = re.compile(r"^(?:|--|\[[^\n]*\]|Found \d+ (?:files?|lines?|matches?)[^\n]*|No (?:matches|files) found[^\n]*)$")
_GREP_BARE = (re.compile(r"^()()(\d+)([:\-])(.*)$", re.S),)


class _File:
    """A file's lines as sent (private blocks hidden, line count kept) and whether it has tags at all."""

    def __init__(self, text: str):
        self.raw = text.split("\n")
        self.tagged = has_tag(text)
        self.shown = hide_private_lines(text).split("\n") if self.tagged else self.raw

    def line(self, n: int, seen: str) -> "str | None":
        """Line ``n`` (1-based) as it may be sent, if ``seen`` is that line of the file (else None)."""
        if n < 1 or n > len(self.raw):
            return None
        raw = self.raw[n - 1].rstrip("\r")
        if seen.rstrip("\r") != raw and not (len(raw) > 1000 and len(seen) >= 500 and raw.startswith(seen[:500])):
            return None
        return self.shown[n - 1].rstrip("\r") if self.tagged else seen

    def public_text(self, seen: str) -> bool:
        """Whether ``seen`` is the whole of a line that no private block touches."""
        return any(r.rstrip("\r") == seen.rstrip("\r") and s == r for r, s in zip(self.raw, self.shown))


def _fully_private(shown: str) -> bool:
    return shown in ("", MARKER)


def checked_result(tool: str, tool_input: Any, content: str, read: "Reader | None",
                   cwd: "str | None" = None) -> "str | None":
    """``content`` of Claude Code's ``tool`` result with the lines inside private blocks of the file(s) it
    came from taken out; None when that cannot be decided and it must be withheld. Other tools' results,
    and results without numbered lines, are returned as they are (tags in them are hidden later)."""
    if tool in ("Read", "Edit", "MultiEdit", "Write", "NotebookEdit"):
        # an Edit's or a Write's result shows a numbered snippet of the file around the change: a window too
        return _read_result(tool_input, content, read)
    if tool == "Grep":
        return _grep_result(tool_input, content, read, cwd)
    if tool == "unknown":  # its call is not in the file any more: a window that may start inside a block
        numbered = [m for ln in content.split("\n") if (m := _READ_LINE.match(ln))]
        if numbered and int(numbered[0].group(2)) > 1:
            return None
    return content


_ECHOED = ("old_string", "new_string", "content", "new_source")


def checked_error(tool: str, tool_input: Any, content: str, read: "Reader | None") -> str:
    """An error of Claude Code's Edit/MultiEdit/Write/NotebookEdit with the text of the call it echoes
    (``Found 2 matches of the string to replace … String: <old_string>``) hidden where that text is not
    public text of the file: an edit inside a private block copies lines of the block, without their tags.
    A file that cannot be read hides every echoed string (it cannot be decided)."""
    if tool not in ("Edit", "MultiEdit", "Write", "NotebookEdit") or not isinstance(tool_input, dict):
        return content
    wanted = [tool_input.get(k) for k in _ECHOED]
    edits = tool_input.get("edits")
    if isinstance(edits, list):
        wanted += [e.get(k) for e in edits if isinstance(e, dict) for k in _ECHOED]
    echoed = sorted({w for w in wanted if isinstance(w, str) and len(w.strip()) >= 3 and w in content},
                    key=len, reverse=True)
    if not echoed:
        return content
    f = _load(read, _path(tool_input, "file_path") or _path(tool_input, "notebook_path"), {})
    public = None if f is None else ("\n".join(f.shown) if f.tagged else None)
    if f is not None and not f.tagged:
        return content
    for w in echoed:
        if public is None or w not in public:
            content = content.replace(w, MARKER)
    return content


def _path(tool_input: Any, key: str) -> "str | None":
    v = tool_input.get(key) if isinstance(tool_input, dict) else None
    return v if isinstance(v, str) and v else None


def _load(read: "Reader | None", path: "str | None", cache: dict) -> "_File | None":
    if path is None or read is None:
        return None
    if path not in cache:
        used = cache.setdefault("\0size", [0])
        if len(cache) > MAX_FILES or used[0] > MAX_TOTAL_CHARS:
            return None  # cannot decide: withheld rather than read without end
        try:
            text = read(path)
        except (OSError, ValueError):
            text = None
        if text is not None:
            used[0] += len(text)
        cache[path] = None if text is None else _File(text)
    return cache[path]


def _read_result(tool_input: Any, content: str, read: "Reader | None") -> "str | None":
    lines = content.split("\n")
    numbered = [(i, m) for i, ln in enumerate(lines) if (m := _READ_LINE.match(ln))]
    if not numbered:
        return content
    first = int(numbered[0][1].group(2))
    f = _load(read, _path(tool_input, "file_path") or _path(tool_input, "notebook_path"), {})
    if f is None:  # cannot read it: exact on its own text only if the window starts at the file's start
        return content if first == 1 else None
    out = list(lines)
    for i, m in numbered:
        # checked even when the file holds no tag now: a file changed since (its block edited away, lines
        # moved) or read in another encoding than Claude Code's says nothing about the window it showed
        shown = f.line(int(m.group(2)), m.group(4))
        if shown is None:  # the file changed since Claude Code read it
            return content if first == 1 else None  # from line 1, the result's own tags tell
        out[i] = None if _fully_private(shown) else m.group(1) + m.group(2) + m.group(3) + shown
    if not f.tagged and not has_tag(content):
        return content
    return _join(out)


def _join(lines: list) -> str:
    """Lines, with each run of dropped ones (None) as one marker line."""
    out: list[str] = []
    for ln in lines:
        if ln is None:
            if not out or out[-1] != MARKER:
                out.append(MARKER)
        else:
            out.append(ln)
    return "\n".join(out)


def _grep_result(tool_input: Any, content: str, read: "Reader | None", cwd: "str | None") -> "str | None":
    mode = (tool_input or {}).get("output_mode") if isinstance(tool_input, dict) else None
    strict = mode == "content"  # without a mode (file names by default), a line no file explains is a name
    base = _path(tool_input, "path") or cwd
    if base and cwd and not os.path.isabs(base):
        base = os.path.join(cwd, base)
    if mode in ("files_with_matches", "count") or (mode is None and not _has_numbered(content)):
        return _listing_result(tool_input, content, read, base, cwd, mode == "count")
    head = content[:SCAN_CHARS]
    if len(content) > SCAN_CHARS:
        head = head.rsplit("\n", 1)[0]
    cache: dict = {}
    single = _load(read, base, cache) if base else None  # the Grep searched one file: lines are "N:text"
    out: list = []
    for ln in head.split("\n"):
        numbered = any(rx.match(ln) for rx in _GREP_NUMBERED + (_GREP_BARE if single is not None else ()))
        own_words = not numbered and (ln in ("", "--") or (_NOTE.match(ln) and not (single and single.tagged)))
        if own_words:  # Claude Code's own lines ("Found 3 files", "[Showing results …]", "--")
            out.append(ln)
            continue
        shown = _grep_line(ln, single, base, cwd, read, cache)
        if shown is False:
            if numbered or strict:
                return None
            shown = ln  # without a mode, a line no file explains is a file name
        out.append(shown)
    return _join(out)


def _has_numbered(content: str) -> bool:
    return any(rx.match(ln) for ln in content[:SCAN_CHARS].split("\n") for rx in _GREP_NUMBERED)


_COUNT_LINE = re.compile(r"^(.*?):?(\d+)$")


def _public_matches(tool_input: Any, f: _File) -> int:
    """How many lines of ``f``'s public text (its private blocks hidden) the Grep's pattern matches, in
    Python's dialect of the pattern (0 when it does not compile): a figure of the public text alone."""
    pattern = _path(tool_input, "pattern")
    if pattern is None:
        return 0
    flags = re.I if tool_input.get("-i") is True else 0
    try:
        rx = re.compile(pattern, flags | (re.S if tool_input.get("multiline") is True else 0))
    except (re.error, RecursionError, OverflowError):
        return 0
    if tool_input.get("multiline") is True:
        return len(rx.findall("\n".join(f.shown)))
    return sum(1 for ln in f.shown if rx.search(ln))


def _listing_result(tool_input: Any, content: str, read, base, cwd, count: bool) -> str:
    """A Grep's file names or counts, with each file that holds private blocks listed only when its public
    text matches, and counted on that text: whether, or how often, the pattern matched inside a block would
    tell the agent what the block says (ask Claude to Grep ``password is s``, then ``password is t`` …).
    Claude Code's own totals ("Found 3 files") are left out once a figure changed; a file it cannot read is
    listed as it was."""
    cache: dict = {}
    single = _load(read, base, cache) if base else None
    out: list[str] = []
    changed = False
    for ln in content.split("\n"):
        m = _COUNT_LINE.match(ln) if count else None
        name = (m.group(1) if m else ln) if count else ln
        f = single if (single is not None and (not name or name == base)) else \
            (_load_any(read, name, base, cwd, cache) if name and not _NOTE.match(name) else None)
        if f is None or not f.tagged:
            out.append(ln)
            continue
        n = _public_matches(tool_input, f)
        changed = True
        if n:
            out.append(ln[:m.start(2)] + str(n) if count else ln)
    if changed:
        out = [ln for ln in out if not re.match(r"^(?:Found \d+|No (?:matches|files) found)", ln)]
        if not any(ln.strip() for ln in out):  # what Claude Code says when nothing matched at all
            return "No matches found" if count else "No files found"
    return "\n".join(out)


def _grep_line(ln: str, single: "_File | None", base: "str | None", cwd, read, cache) -> "str | None | bool":
    """One Grep output line as it may be sent; None to drop it; False when it cannot be decided."""
    for rx in (_GREP_BARE if single is not None else ()) + _GREP_NUMBERED:
        m = rx.match(ln)
        if not m:
            continue
        name = m.group(1)
        f = single if not name else _load_any(read, name, base, cwd, cache)
        if f is None:
            continue
        shown = f.line(int(m.group(3)), m.group(5))
        if shown is None:  # not that line of the file (changed since, or another encoding): undecided
            continue
        if not f.tagged:
            return ln
        return None if _fully_private(shown) else name + m.group(2) + m.group(3) + m.group(4) + shown
    # no line number (-n false): "path:text", or "text" for one file
    for f, text in _unnumbered(ln, single, base, cwd, read, cache):
        if f.public_text(text):
            return ln
        if f.tagged:
            return None
        break  # a file without tags now that does not hold that line: changed since, or another encoding
    return False  # a line of no file it can read: cannot be decided


def _unnumbered(ln: str, single, base, cwd, read, cache):
    if single is not None:
        yield single, ln
        return
    at = ln.find(":")
    while at > 0:
        f = _load_any(read, ln[:at], base, cwd, cache)
        if f is not None:
            yield f, ln[at + 1:]
            return
        at = ln.find(":", at + 1)


def _candidates(name: str, base: "str | None", cwd: "str | None") -> list[str]:
    """Where a path a Grep line names may be: as it is if absolute, else relative to the directory Claude
    Code ran in (2.1.332 writes paths so) or to the Grep's own path."""
    if os.path.isabs(name):
        return [name]
    return [os.path.join(d, name) for d in dict.fromkeys((cwd, base)) if d]


def _load_any(read, name: str, base, cwd, cache) -> "_File | None":
    for path in _candidates(name, base, cwd):
        f = _load(read, path, cache)
        if f is not None:
            return f
    return None


def resolved_input(tool_input: Any, cwd: "str | None") -> Any:
    """``tool_input`` with the paths it names resolved (links followed, to decide only: nothing is read), so
    that SUBCONSCIOUS_PRIVATE_PATHS match where a call really went (``docs/plan.txt`` after
    ``ln -s secrets docs``)."""
    if not isinstance(tool_input, dict):
        return tool_input
    from .private import path_fields

    out = dict(tool_input)

    def real(v: Any) -> Any:
        if isinstance(v, str) and v and "\x00" not in v and (cwd or os.path.isabs(v)):
            try:
                return os.path.realpath(os.path.join(cwd or "", v[7:] if v.startswith("file://") else v))
            except (OSError, ValueError):
                pass
        return v

    for k in path_fields(out):
        v = out[k]
        out[k] = [real(x) for x in v] if isinstance(v, list) else real(v)
    return out


def resolved_listing(tool: str, content: str, cwd: "str | None", globs) -> str:
    """A Grep/Glob/LS result without the lines naming a file that *resolves* to a private path: ripgrep and
    Glob name a file by the path they walked (``docs/plan.txt`` after ``ln -s secrets docs``, or a link
    ``plan.txt -> secrets/plan.txt``), which :func:`~subconscious.privacy.private.private_result` matched as written
    only. Links are followed to decide, nothing is read; the count of lines left out is said, as there."""
    from .private import LINES_NOTE, _listed_path, is_private_path

    globs = tuple(globs)
    if not globs or tool not in ("Grep", "Glob", "LS", "unknown") or not cwd:
        return content
    seen: dict = {}

    def private(line: str) -> bool:
        name = _listed_path(line.strip())
        if name not in seen:
            try:
                seen[name] = "\x00" not in name and len(name) < 4096 and is_private_path(
                    os.path.realpath(os.path.join(cwd, name)), globs)
            except (OSError, ValueError):
                seen[name] = False
        return seen[name]

    lines = content.split("\n")
    kept = [ln for ln in lines if not (ln.strip() and private(ln))]
    if len(kept) == len(lines):
        return content
    return "\n".join(kept + [LINES_NOTE % (len(lines) - len(kept))])


# ---------------------------------------------------------------------- reading a file of the project

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def project_reader(root: "str | None") -> Reader:
    """A reader of the files inside the project directory ``root`` for :func:`checked_result`: the path's
    links are resolved to decide where it leads; a file that resolves outside ``root``, is not a regular
    file, or is over 16 MiB gives None. The resolved path is then opened component by component from
    ``root`` without following any link, so a link swapped in meanwhile is not read through."""
    real_root = os.path.realpath(root) if root else None

    def read(path: str) -> "str | None":
        if not real_root or not isinstance(path, str) or "\x00" in path:
            return None
        full = os.path.realpath(os.path.join(real_root, path))
        rel = os.path.relpath(full, real_root)
        if rel == "." or rel.startswith(".." + os.sep) or rel == ".." or os.path.isabs(rel):
            return None
        parts = rel.split(os.sep)
        try:
            fd = os.open(real_root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
        except OSError:
            return None
        try:
            for part in parts[:-1]:
                nxt = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
                os.close(fd)
                fd = nxt
            ffd = os.open(parts[-1], os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC, dir_fd=fd)
        except OSError:
            return None
        finally:
            os.close(fd)
        try:
            st = os.fstat(ffd)
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
                return None
            os.set_blocking(ffd, True)
            chunks, left = [], MAX_FILE_BYTES + 1
            while left > 0:
                b = os.read(ffd, min(left, 1 << 20))
                if not b:
                    break
                chunks.append(b)
                left -= len(b)
        except OSError:
            return None
        finally:
            os.close(ffd)
        data = b"".join(chunks)
        return None if len(data) > MAX_FILE_BYTES else decode(data)
    return read


def decode(data: bytes) -> str:
    """A file's text as Claude Code's Read and ripgrep see it: UTF-16 (either order) or UTF-8 by its byte
    order mark, else UTF-8 (bytes that are not become U+FFFD, so their lines match no result line)."""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return data.decode("utf-16", errors="replace")
    return data.decode("utf-8-sig" if data[:3] == b"\xef\xbb\xbf" else "utf-8", errors="replace")
