"""Read, Grep and Glob over a confined project directory. Each returns the text the agent sees and
raises ToolError (or Refused) with a message for the agent when it cannot answer."""
from __future__ import annotations

import os
import re
import time
from typing import Any, Mapping

from ..privacy import private as _private
from ..privacy import redact as _redact
from .confine import Refused, Root, ToolError, ToolTimeout
from .ignore import glob_regex
from .limits import Limits

__all__ = ["read", "grep", "glob", "describe_binary", "looks_binary"]

SNIFF = 8192
_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "PNG image"), (b"\xff\xd8\xff", "JPEG image"), (b"GIF8", "GIF image"),
    (b"%PDF", "PDF document"), (b"PK\x03\x04", "ZIP archive (or a format built on it: jar, docx, wheel)"),
    (b"\x1f\x8b", "gzip data"), (b"BZh", "bzip2 data"), (b"\xfd7zXZ\x00", "xz data"),
    (b"7z\xbc\xaf\x27\x1c", "7-Zip archive"), (b"\x7fELF", "ELF executable or library"),
    (b"\xcf\xfa\xed\xfe", "Mach-O binary"), (b"MZ", "Windows executable"), (b"\x00asm", "WebAssembly module"),
    (b"SQLite format 3\x00", "SQLite database"), (b"RIFF", "RIFF media (WAV/AVI/WebP)"),
    (b"OggS", "Ogg media"), (b"ID3", "MP3 audio"), (b"wOF2", "WOFF2 font"), (b"wOFF", "WOFF font"),
    (b"\xca\xfe\xba\xbe", "Java class or universal binary"),
)


def looks_binary(head: bytes) -> bool:
    """NUL bytes, or text that is not UTF-8 and mostly control characters."""
    if not head:
        return False
    if b"\x00" in head:
        return True
    try:
        head.decode("utf-8")
        return False
    except UnicodeDecodeError as e:
        if e.start >= len(head) - 4:  # a character cut by the sniff window
            return False
    control = sum(1 for b in head if b < 9 or 13 < b < 32 or b == 127)
    high = sum(1 for b in head if b >= 128)
    return control > len(head) * 0.05 or high > len(head) * 0.3


def describe_binary(rel: str, head: bytes, size: int) -> str:
    kind = next((name for magic, name in _MAGIC if head.startswith(magic)), "binary data")
    return f"{rel}: {kind}, {size:,} bytes. Binary file: contents not shown."


def _int(args: Mapping[str, Any], name: str, default: int | None, lo: int = 0) -> int | None:
    v = args.get(name)
    if v is None or v == "":
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise ToolError(f"{name} must be a number")
    try:
        n = int(v)
    except ValueError:
        raise ToolError(f"{name} must be a number") from None
    if n < lo:
        raise ToolError(f"{name} must be at least {lo}")
    return n


def _str(args: Mapping[str, Any], name: str, required: bool = False) -> str | None:
    v = args.get(name)
    if v is None or v == "":
        if required:
            raise ToolError(f"{name} is required")
        return None
    if not isinstance(v, str):
        raise ToolError(f"{name} must be a string")
    return v


def _check_time(deadline: float) -> None:
    if time.monotonic() > deadline:
        raise ToolTimeout("the call ran out of time")


# ---------------------------------------------------------------------- private paths

PRIVATE_REFUSAL = ("the %s is a private path (SUBCONSCIOUS_PRIVATE_PATHS, links resolved): its contents never "
                   "leave the user's machine; it was not read")


def _is_private(root: Root, rel: str, real: str | None = None, globs: tuple[str, ...] | None = None) -> bool:
    """Whether the project file ``rel`` (or what a link there resolves to, ``real``) is a private path:
    matched on the project-relative path and on the absolute path, as given and as resolved."""
    globs = _private.private_globs() if globs is None else globs
    if not globs:
        return False
    forms = [rel, os.path.join(root.path, *rel.split("/")), os.path.join(root.given, *rel.split("/"))]
    if real:
        forms.append(real)
        trel = root.rel_of(real)
        if trel:
            forms.append(trel)
    return any(_private.is_private_path(f, globs) for f in forms if f)


def visible_text(text: str) -> str:
    """A whole file as the tools may show or search it: private passages hidden first (line count kept, so
    a window or a line number taken afterwards cannot fall inside one), then secrets redacted."""
    return redacted_text(_private.hide_private_lines(text))


# ---------------------------------------------------------------------- Read

def read(root: Root, args: Mapping[str, Any], limits: Limits, deadline: float) -> str:
    path = _str(args, "file_path", required=True)
    offset = _int(args, "offset", 1, lo=1)
    want = _int(args, "limit", limits.max_read_lines, lo=1)
    want = min(want, limits.max_read_lines)
    t = root.resolve(path, what="file_path")
    if not t.exists:
        raise ToolError(f"{path}: no such file in the project")
    if t.is_dir:
        raise ToolError(f"{t.shown} is a directory; use Glob to list files")
    if _is_private(root, t.rel, t.real):
        raise Refused(PRIVATE_REFUSAL % "file_path")
    fd = root.open_file(t)
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        head = fh.read(SNIFF)
        if looks_binary(head):
            return describe_binary(t.rel, head, size)
        if size > limits.max_file_bytes:
            raise ToolError(f"{t.rel} is {size:,} bytes, over the {limits.max_file_bytes:,}-byte limit for reading; "
                            "use Grep to find the part you need")
        data = head + fh.read(limits.max_file_bytes + 1 - len(head))
    text = visible_text(data[:limits.max_file_bytes].decode("utf-8", errors="replace"))
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    total = len(lines)
    if total == 0:
        return f"{t.rel}: empty file."
    if offset > total:
        raise ToolError(f"{t.rel} has {total} lines; offset {offset} is past the end")
    out, used = [], 0
    last = offset - 1
    for i in range(offset - 1, min(total, offset - 1 + want)):
        line = lines[i].rstrip("\r")
        if len(line) > limits.max_line_chars:
            line = line[:limits.max_line_chars] + " ... [line cut]"
        row = "%6d\t%s" % (i + 1, line)
        if used + len(row) + 1 > limits.max_result_chars - 200 and out:
            break
        out.append(row)
        used += len(row) + 1
        last = i + 1
        if i % 1000 == 0:
            _check_time(deadline)
    body = "\n".join(out)
    if last < total:
        body += f"\n[showing lines {offset}-{last} of {total}; use offset/limit to read more]"
    return body


# ---------------------------------------------------------------------- Grep

def redacted_text(text: str) -> str:
    """``text`` as the agent may see it: secrets replaced by the redaction marker, with as many lines as
    before (a multi-line private key becomes the marker and its line breaks), so that Grep searches what
    Read would show and its line numbers stay right. Grep never matches the raw text: a count or a file
    list for a pattern that only fits inside a secret would tell the secret one character at a time."""
    find = getattr(_redact, "find_secrets", None)
    if find is not None and "\n" in text:
        out, pos = [], 0
        for a, b in find(text):
            if a < pos or "\n" not in text[a:b]:
                continue
            out += [text[pos:a], _redact.REDACTED, "\n" * text.count("\n", a, b)]
            pos = b
        if out:
            text = "".join(out) + text[pos:]
    return _redact.redact(text)


def _name_filter(glob: str | None):
    """Grep's ``glob``: matched against the file name, or the relative path if it has a '/'."""
    if not glob:
        return None
    alts = [g for g in re.split(r"[,\s]+", glob.strip()) if g] if "{" not in glob else [glob]
    regexes = []
    for g in alts:
        if "{" in g and "}" in g:  # one {a,b} group, as people write *.{ts,tsx}
            pre, rest = g.split("{", 1)
            inner, post = rest.split("}", 1)
            expanded = [pre + x + post for x in inner.split(",")]
        else:
            expanded = [g]
        for x in expanded:
            has_slash = "/" in x
            rx = re.compile("^(?:%s)$" % glob_regex(x.lstrip("/")), re.S)
            regexes.append((has_slash, rx))

    def ok(rel: str) -> bool:
        name = rel.rsplit("/", 1)[-1]
        return any(rx.match(rel if slash else name) for slash, rx in regexes)
    return ok


def grep(root: Root, args: Mapping[str, Any], limits: Limits, deadline: float) -> str:
    pattern = _str(args, "pattern", required=True)
    mode = _str(args, "output_mode") or "content"
    if mode not in ("content", "files_with_matches", "count"):
        raise ToolError("output_mode must be content, files_with_matches or count")
    flags = re.IGNORECASE if args.get("case_insensitive") in (True, "true", 1) else 0
    try:
        rx = re.compile(pattern, flags)
    except re.error as e:
        raise ToolError(f"invalid regular expression: {e}") from None
    start = root.resolve(_str(args, "path"), what="path", default=".")
    if not start.exists:
        raise ToolError(f"{args.get('path')}: no such file or directory in the project")
    globs = _private.private_globs()
    if start.rel and _is_private(root, start.rel, start.real, globs):
        raise Refused(PRIVATE_REFUSAL % "path")
    name_ok = _name_filter(_str(args, "glob"))
    stats: dict = {}
    rows: list[str] = []
    files_matched = matches = searched = skipped_big = skipped_binary = 0
    full = False
    for rel, handle, st in root.walk(start, deadline=deadline, max_entries=limits.max_walk_entries, stats=stats):
        if name_ok is not None and not name_ok(rel):
            continue
        if globs and _is_private(root, rel, getattr(handle, "real", None), globs):
            continue  # not searched, and not counted: a Grep says nothing about what it did not search
        if st.st_size > limits.max_file_bytes:
            skipped_big += 1
            continue
        try:
            with os.fdopen(root.open_walked(handle), "rb") as fh:
                data = fh.read(SNIFF)
                if looks_binary(data):
                    skipped_binary += 1
                    continue
                data += fh.read(limits.max_file_bytes + 1 - len(data))
        except (OSError, ToolError):
            continue
        searched += 1
        count = 0
        for n, line in enumerate(visible_text(data.decode("utf-8", errors="replace")).split("\n"), 1):
            if n % 2000 == 0 and time.monotonic() > deadline:
                stats["stopped"] = "time"
                break
            if rx.search(line):
                count += 1
                if mode == "content":
                    if matches >= limits.max_matches:
                        full = True
                        break
                    text = line.rstrip("\r")
                    if len(text) > limits.max_grep_line_chars:
                        text = text[:limits.max_grep_line_chars] + " ... [line cut]"
                    rows.append(f"{rel}:{n}:{text}")
                    matches += 1
                elif mode == "files_with_matches":
                    break
        if count:
            files_matched += 1
            if mode == "files_with_matches":
                rows.append(rel)
            elif mode == "count":
                rows.append(f"{rel}:{count}")
            if mode != "content" and len(rows) >= limits.max_paths:
                full = True
        if full or stats.get("stopped"):
            break
        if time.monotonic() > deadline:
            stats["stopped"] = "time"
            break
    notes = []
    if full:
        notes.append(f"stopped at the limit ({limits.max_matches} matching lines / {limits.max_paths} files); "
                     "narrow the pattern, path or glob")
    if stats.get("stopped") == "time":
        notes.append("stopped at the time limit; results are partial")
    elif stats.get("stopped") == "entries":
        notes.append(f"stopped after looking at {limits.max_walk_entries:,} entries; results are partial")
    if skipped_big:
        notes.append(f"{skipped_big} file(s) over {limits.max_file_bytes:,} bytes not searched")
    if skipped_binary:
        notes.append(f"{skipped_binary} binary file(s) not searched")
    head = "\n".join(rows) if rows else f"No matches for {pattern!r} in {start.shown} ({searched} files searched)."
    return head + "".join(f"\n[{n}]" for n in notes)


# ---------------------------------------------------------------------- Glob

def glob(root: Root, args: Mapping[str, Any], limits: Limits, deadline: float) -> str:
    pattern = _str(args, "pattern", required=True)
    start = root.resolve(_str(args, "path"), what="path", default=".")
    if not start.exists or not start.is_dir:
        raise ToolError(f"{args.get('path')}: not a directory in the project")
    if os.path.isabs(pattern):  # an absolute pattern inside the project is made relative to path
        for base in (root.path, root.given):
            if pattern.startswith(base.rstrip(os.sep) + os.sep):
                pattern = pattern[len(base.rstrip(os.sep)) + 1:].replace(os.sep, "/")
                break
        else:
            raise Refused(f"{pattern!r} is outside the project directory {root.given}; the tools see only that")
        if start.rel:
            if not pattern.startswith(start.rel + "/"):
                raise ToolError(f"the pattern is not under path {start.rel!r}")
            pattern = pattern[len(start.rel) + 1:]
    if ".." in pattern.replace("\\", "/").split("/"):
        raise Refused("'..' is not allowed in a Glob pattern; the tools see only the project directory")
    while pattern.startswith("./"):
        pattern = pattern[2:]
    rx = re.compile("^(?:%s)$" % glob_regex(pattern), re.S)
    globs = _private.private_globs()
    if start.rel and _is_private(root, start.rel, start.real, globs):
        raise Refused(PRIVATE_REFUSAL % "path")
    stats: dict = {}
    found = []
    prefix = start.rel + "/" if start.rel else ""
    for rel, handle, st in root.walk(start, deadline=deadline, max_entries=limits.max_walk_entries, stats=stats):
        sub = rel[len(prefix):]
        if rx.match(sub) and not (globs and _is_private(root, rel, getattr(handle, "real", None), globs)):
            found.append((st.st_mtime, rel))
    found.sort(key=lambda x: (-x[0], x[1]))
    total = len(found)
    rows = [rel for _, rel in found[:limits.max_paths]]
    notes = []
    if total > limits.max_paths:
        notes.append(f"{total} files match; showing the {limits.max_paths} most recently modified")
    if stats.get("stopped") == "time":
        notes.append("stopped at the time limit; results are partial")
    elif stats.get("stopped") == "entries":
        notes.append(f"stopped after looking at {limits.max_walk_entries:,} entries; results are partial")
    head = "\n".join(rows) if rows else f"No files match {pattern!r} in {start.shown}."
    return head + "".join(f"\n[{n}]" for n in notes)
