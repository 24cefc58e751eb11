"""``subconscious export`` / ``import``: a home's state as one versioned archive, merged back through the
store.

The archive is a gzipped tar (the file mode 0600: it names conversations) holding::

    manifest.json                   {"format": "subconscious-export", "version": 1, "exported_at", "host", "counts"}
    conversations.json              every entry's winning version, tombstones included (so a delete travels)
    settings.json                   the home's settings (the pinned agent, the sealing policy, ...)
    sessions/session-<id>.json      each live session's merged state

Values are written exactly as the store holds them: sealed values (cached memory blocks, see
``state/seal.py``) stay sealed, and the archive holds no key. Import merges every version with its own
stamp through the store's merge (``Store.merge_in``, ``SessionFiles.merge_in``): a version wins only where
it is newer than what the home holds, a cursor never moves back, a delete stays a delete — so importing
twice is importing once, and an old archive never overwrites newer state.

Reading an archive never extracts anything to disk, and never trusts its headers alone: it is read as a
stream twice, by a small tar reader of its own (:func:`_walk`). The first pass checks every header (name,
kind, size against the member's cap, the count, the running total) *before* reading the member, and reads
each member through a byte counter in fixed chunks, keeping nothing: a compression bomb, a member over its
cap, too many members or a total over :data:`TOTAL_MAX` is refused there in constant memory, having read at
most :data:`TOTAL_MAX` decompressed bytes. Only an archive that passed is read again, one member at a time
(at most its cap), each parsed at once, unless its JSON holds more values than one per
:data:`BYTES_PER_VALUE` bytes (tiny values parse to objects many times their size: refused unparsed). Anything else in it (a path outside the layout, ``..``, an absolute
name, a link, a device, a member twice, a global or GNU header) or an unknown format version is refused
whole, before anything is merged. Versions stamped more than :data:`~subconscious.state.clock.ALLOWED_SKEW_MS`
after this machine's clock are refused one by one (they would win every later merge).
"""

from __future__ import annotations

import io
import json
import os
import re
import tarfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FORMAT = "subconscious-export"
VERSION = 1
MEMBER_MAX = 64 * 1024 * 1024  # conversations.json: as any state file (fs.READ_CAP)
SESSION_MAX = 4 * 1024 * 1024  # one session's file (a few KiB: cursors, ids, cached memory blocks)
SETTINGS_MAX = 4 * 1024 * 1024
MANIFEST_MAX = 1024 * 1024
TOTAL_MAX = 128 * 1024 * 1024  # all members' bytes together
MEMBERS_MAX = 100_000  # a home's live sessions (gc retires them after 30 days), and the three files
ARCHIVE_MAX = 256 * 1024 * 1024  # the file itself
PAX_MAX = 64 * 1024  # one pax extended header (a long name)
# A member's JSON values (arrays, objects, items): an export's entries, settings and sessions take 30 bytes or
# more each; ``[],`` or ``0,`` repeated parse to Python objects 20-30 times their size (a JSON bomb)
BYTES_PER_VALUE = 16
INVALID_MAX = 1000  # invalid versions reported one by one; more: not an export (refused whole, unchecked)
_CHUNK = 1024 * 1024
_SESSION_MEMBER = re.compile(r"sessions/session-([A-Za-z0-9_-]{1,128})\.json")
_TOP = ("manifest.json", "conversations.json", "settings.json")


class ArchiveError(ValueError):
    """An archive refused; the message says why and what to do."""


@dataclass
class Contents:
    manifest: dict
    conversations: dict[str, dict] = field(default_factory=dict)
    settings: dict[str, dict] = field(default_factory=dict)
    sessions: dict[str, dict] = field(default_factory=dict)


# ---------------------------------------------------------------------------- export


def collect(store, host: str) -> Contents:
    """What the home holds, merged (read only)."""
    snap = store.read()
    sessions = {sid: state.to_json() for sid, state, _ in store.sessions() if state is not None}
    manifest = {"format": FORMAT, "version": VERSION, "host": host,
                "exported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "counts": {"conversations": len(snap.live), "tombstones": len(snap.raw) - len(snap.live),
                           "settings": len(snap.settings), "sessions": len(sessions)}}
    return Contents(manifest, dict(snap.raw), {k: v.to_json() for k, v in snap.settings.items()}, sessions)


def _dumps(value: Any) -> bytes:
    return (json.dumps(value, sort_keys=True, indent=1, ensure_ascii=False) + "\n").encode()


def write_archive(path: Path, contents: Contents) -> None:
    """Write the archive to ``path`` atomically (a temp beside it, then renamed), mode 0600."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        members = [("manifest.json", contents.manifest), ("conversations.json", contents.conversations),
                   ("settings.json", contents.settings)]
        members += [(f"sessions/session-{sid}.json", v) for sid, v in sorted(contents.sessions.items())]
        for name, value in members:
            data = _dumps(value)
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o600, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    from ..state.files import atomic_write

    atomic_write(Path(path), buf.getvalue())


# ---------------------------------------------------------------------------- import


def _cap(name: str) -> int:
    return {"manifest.json": MANIFEST_MAX, "settings.json": SETTINGS_MAX,
            "conversations.json": MEMBER_MAX}.get(name, SESSION_MAX)


def _octal(field: bytes, what: str) -> int:
    text = field.split(b"\0", 1)[0].strip(b" ")
    if not text:
        return 0
    if not all(c in b"01234567" for c in text):  # base-256 sizes (> 8 GiB) included
        raise ArchiveError(f"a tar header's {what} field is not an octal number")
    return int(text, 8)


def _pax(raw: bytes) -> dict[str, str]:
    """A pax extended header's records (``<len> key=value\\n``), strictly."""
    out, pos = {}, 0
    while pos < len(raw):
        space = raw.find(b" ", pos, pos + 20)
        if space < 0 or not raw[pos:space].isdigit():
            raise ArchiveError("a damaged pax header")
        end = pos + int(raw[pos:space])
        record = raw[space + 1:end]
        if end > len(raw) or end <= space or not record.endswith(b"\n") or b"=" not in record:
            raise ArchiveError("a damaged pax header")
        key, _, value = record[:-1].partition(b"=")
        out[key.decode("utf-8", "replace")] = value.decode("utf-8", "surrogateescape")
        pos = end
    return out


class _Counted:
    """The decompressed stream, read in exact amounts; a short read (a truncated archive) is an ArchiveError."""

    def __init__(self, stream):
        self.stream, self.read_bytes = stream, 0

    def exactly(self, n: int) -> bytes:
        parts, left = [], n
        while left:
            got = self.stream.read(min(left, _CHUNK))
            if not got:
                raise ArchiveError("the archive is truncated (a member is shorter than its header says)")
            parts.append(got)
            left -= len(got)
        self.read_bytes += n
        return b"".join(parts)

    def skip(self, n: int) -> None:
        while n:
            step = min(n, _CHUNK)
            self.exactly(step)
            n -= step


def _open_stream(f, path: Path):
    f.seek(0)
    magic = f.read(6)
    f.seek(0)
    if magic[:2] == b"\x1f\x8b":
        import gzip

        return gzip.GzipFile(fileobj=f, mode="rb")
    if magic[:3] == b"BZh" or magic == b"\xfd7zXZ\x00":
        raise ArchiveError(f"{path} is bzip2 or xz compressed; an export is a .tar.gz (or a plain .tar)")
    return f


def _walk(f, path: Path, keep: bool):
    """Each member of the archive open as ``f`` (read from its start) as (name, bytes), checked as the module
    docstring says. ``keep`` False: the checking pass (nothing kept or yielded: the data is read and dropped
    in chunks)."""
    raw, stream = f, _open_stream(f, path)
    seen: set[str] = set()
    count = members = total = 0
    try:
        src = _Counted(stream)
        pax: dict[str, str] = {}
        while True:
            header = src.stream.read(512)
            if len(header) < 512:
                if not count and not seen:
                    raise ArchiveError(f"{path} is not a subconscious export (not a tar archive: "
                                       f"{'empty' if not header else 'too short'})")
                raise ArchiveError("the archive is truncated (it ends inside a header)")
            if header == bytes(512):
                return  # the end-of-archive block: what follows is never read
            stored = _octal(header[148:156], "checksum")
            unsigned = sum(header[:148]) + 256 + sum(header[156:])
            if stored != unsigned:
                raise ArchiveError(f"{path} is not a subconscious export (not a readable tar archive: a header's "
                                   "checksum does not match)")
            kind = header[156:157]
            size = _octal(header[124:136], "size")
            if kind == b"x":
                if size > PAX_MAX:
                    raise ArchiveError(f"a pax header of {size} bytes; at most {PAX_MAX}")
                count += 1  # counted as members, and their bytes in the total: a flood of them is bounded too
                total += size
                if count > 2 * MEMBERS_MAX or total > TOTAL_MAX:
                    raise ArchiveError(f"more than {MEMBERS_MAX} members or {TOTAL_MAX} bytes (with pax headers)")
                pax = _pax(src.exactly(size))
                src.skip(-size % 512)
                continue
            if kind in (b"g", b"L", b"K"):
                raise ArchiveError("the archive holds a global pax or GNU long-name header; an export holds "
                                   "none (write it with `subconscious export`)")
            name = header[:100].split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
            if header[257:263] == b"ustar\0" and header[345]:
                name = header[345:500].split(b"\0", 1)[0].decode("utf-8", "surrogateescape") + "/" + name
            if "path" in pax:
                name = pax["path"]
            if "size" in pax:
                if not pax["size"].isdigit() or len(pax["size"]) > 19:
                    raise ArchiveError("a pax header's size is not a number")
                size = int(pax["size"])
            pax = {}
            count += 1
            members += 1
            if members > MEMBERS_MAX:
                raise ArchiveError(f"more than {MEMBERS_MAX} members; an export of a home holds its live sessions "
                                   "and three files")
            name = _member_name(name, kind)
            if name in seen:
                raise ArchiveError(f"member {name[:100]!r} appears twice")
            seen.add(name)
            if kind == b"5":
                if size:
                    raise ArchiveError(f"directory {name!r} has a size")
                continue
            if size > _cap(name):
                raise ArchiveError(f"member {name!r} is {size} bytes; at most {_cap(name)} for it")
            total += size
            if total > TOTAL_MAX:
                raise ArchiveError(f"the members add up to more than {TOTAL_MAX} bytes")
            if keep:
                body = src.exactly(size)
                src.skip(-size % 512)
                yield name, body
            else:
                src.skip(size + (-size % 512))
    except (OSError, EOFError, zlib.error) as exc:
        raise ArchiveError(f"{path} is not a subconscious export (not a readable tar archive: {exc})") from None
    finally:
        if stream is not raw:
            stream.close()


def _member_name(name: str, kind: bytes) -> str:
    if kind not in (b"0", b"\0", b"5"):
        what = {b"1": "a hard link", b"2": "a symbolic link"}.get(kind, "a special file")
        raise ArchiveError(f"member {name[:100]!r} is {what}; an export holds regular files only")
    if kind == b"5":
        if name.rstrip("/") == "sessions":
            return "sessions/"
        raise ArchiveError(f"member {name[:100]!r} is a directory; an export holds regular files only")
    if name in _TOP or _SESSION_MEMBER.fullmatch(name):
        return name
    raise ArchiveError(f"member {name[:100]!r} is not part of an export (a path outside its layout)")


_NOT_VALUE_MARK = bytes(b for b in range(256) if b not in b'[]{}",')


def _values(body: bytes) -> int:
    """How many arrays, objects and further list items / members (``,``) ``body`` holds outside its strings:
    what its parse costs in Python objects, counted at C speed before it is parsed."""
    from ..state.jsontext import _brackets

    marks = _brackets(body, _NOT_VALUE_MARK)
    return marks.count(b"[") + marks.count(b"{") + marks.count(b",")


def read_archive(path: Path) -> Contents:
    """Read and check an archive (never extracting it); ArchiveError for anything refused."""
    path = Path(path)
    try:  # one open file for both passes (not the name twice); a FIFO must not block the open
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise ArchiveError(f"cannot read {path}: {exc.strerror or exc}") from None
    import stat as _stat

    if not _stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ArchiveError(f"{path} is not a regular file")
    os.set_blocking(fd, True)
    f = os.fdopen(fd, "rb")
    with f:
        return _read_open(f, path)


def _read_open(f, path: Path) -> Contents:
    from ..state.jsontext import Unparseable, loads_state

    st = os.fstat(f.fileno())
    if st.st_size > ARCHIVE_MAX:
        raise ArchiveError(f"{path} is {st.st_size} bytes; an export is at most {ARCHIVE_MAX}")
    for _ in _walk(f, path, keep=False):  # the checking pass: nothing kept
        pass

    def parsed(name: str, body: bytes) -> Any:
        values = _values(body)
        if values > len(body) // BYTES_PER_VALUE + 256:
            raise ArchiveError(f"member {name!r} holds {values} JSON values in {len(body)} bytes, more than an export "
                               f"writes (one per {BYTES_PER_VALUE} bytes): a JSON bomb, refused before parsing")
        try:
            return loads_state(body)
        except Unparseable as exc:
            raise ArchiveError(f"member {name!r} is not valid JSON: {exc}") from None

    values: dict[str, Any] = {}
    for name, body in _walk(f, path, keep=True):
        values[name] = parsed(name, body)
        del body
    if "manifest.json" not in values:
        raise ArchiveError(f"{path} is not a subconscious export (no manifest.json)")
    manifest = values["manifest.json"]
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ArchiveError(f"{path} is not a subconscious export (its manifest names no format {FORMAT!r})")
    version = manifest.get("version")
    if version != VERSION or isinstance(version, bool):
        raise ArchiveError(f"{path} is export format version {version!r}; this subconscious reads version "
                           f"{VERSION} only. Upgrade subconscious to import it (nothing was changed)")
    out = Contents(manifest)
    for name, target in (("conversations.json", out.conversations), ("settings.json", out.settings)):
        if name in values:
            value = values[name]
            if not isinstance(value, dict):
                raise ArchiveError(f"member {name!r} is not a JSON object")
            target.update(value)
    for name, value in values.items():
        m = _SESSION_MEMBER.fullmatch(name)
        if m:
            out.sessions[m[1]] = value
    return out


@dataclass
class Checked:
    """An archive's versions, each validated as the store would (invalid ones reported, never merged)."""

    conversations: dict[str, dict]
    settings: dict[str, Any]
    sessions: list[Any]
    invalid: list[str]


def _future(stamp, now_ms: int) -> str | None:
    """Why a version stamped ``stamp`` is refused (its clock beyond this machine's + ALLOWED_SKEW_MS), or None."""
    from ..state.clock import ALLOWED_SKEW_MS

    if stamp.wall <= now_ms + ALLOWED_SKEW_MS:
        return None
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(min(stamp.wall // 1000, 253402300799)))
    return (f"stamped {when}, more than {ALLOWED_SKEW_MS // 3600000} h after this machine's clock (a wrong clock "
            "or a crafted archive: it would win every later merge); refused")


class _Invalid(list):
    """The invalid versions' reasons; past INVALID_MAX the archive is refused whole (ArchiveError)."""

    def append(self, line: str) -> None:
        if len(self) >= INVALID_MAX:
            raise ArchiveError(f"more than {INVALID_MAX} invalid versions (the first: {self[0]}); this is no "
                               "export of a home. Nothing was merged")
        super().append(line)


def check(contents: Contents, now_ms: int | None = None) -> Checked:
    """Each version of ``contents`` validated as the store would; ArchiveError when more than
    :data:`INVALID_MAX` are invalid (then nothing is merged)."""
    from ..state.ids import is_session_id
    from ..state.records import RecordError, normalize_record, parse_session, parse_setting, raw_stamp

    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    invalid: list[str] = _Invalid()
    convs = {}
    for key, value in contents.conversations.items():
        try:
            if not is_session_id(key):
                raise RecordError("not a valid session id")
            norm = normalize_record(value)
            late = _future(raw_stamp(norm), now_ms)
            if late:
                raise RecordError(late)
            convs[key] = norm
        except (RecordError, ValueError, TypeError) as exc:
            invalid.append(f"conversations {str(key)[:60]!r}: {exc}")
    settings = {}
    for key, value in contents.settings.items():
        try:
            setting = parse_setting(value)
            late = _future(setting.stamp, now_ms)
            if late:
                raise RecordError(late)
            settings[key] = setting
        except (RecordError, ValueError, TypeError) as exc:
            invalid.append(f"settings {str(key)[:60]!r}: {exc}")
    sessions = []
    for sid, value in sorted(contents.sessions.items()):
        try:
            state = parse_session(value, sid)
            late = _future(state.stamp, now_ms)
            if late:
                raise RecordError(late)
            sessions.append(state)
        except (RecordError, ValueError, TypeError) as exc:
            invalid.append(f"session {sid!r}: {exc}")
    return Checked(convs, settings, sessions, list(invalid))


def import_into(store, contents: Contents) -> dict:
    """Merge ``contents`` into the home through the store. Returns what happened (counts)."""
    checked = check(contents)
    merged = store.merge_in(checked.conversations, checked.settings)
    outcome = {"merged": 0, "same": 0, "retired": 0}
    for state in checked.sessions:
        outcome[store.session_files.merge_in(state)] += 1
    return {
        "conversations_merged": merged["conversations"], "settings_merged": merged["settings"],
        "older_than_home": merged["older"], "sessions_merged": outcome["merged"],
        "sessions_unchanged": outcome["same"], "sessions_retired_here": outcome["retired"],
        "invalid": checked.invalid,
    }
