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

Reading an archive never extracts anything to disk: members are read into memory by name, and an archive
with any other member (a path outside the layout, ``..``, an absolute name, a symbolic or hard link, a
device), a member over 64 MiB, more than 64 MiB... in all (see the limits), or an unknown format version is
refused whole, before anything is merged.
"""

from __future__ import annotations

import io
import json
import os
import re
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FORMAT = "subconscious-export"
VERSION = 1
MEMBER_MAX = 64 * 1024 * 1024  # as any state file (fs.READ_CAP)
TOTAL_MAX = 512 * 1024 * 1024
MEMBERS_MAX = 1_000_000
ARCHIVE_MAX = 512 * 1024 * 1024
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
    from .state.files import atomic_write

    atomic_write(Path(path), buf.getvalue())


# ---------------------------------------------------------------------------- import


def _member_name(info: tarfile.TarInfo) -> str:
    name = info.name
    if not info.isreg():
        kind = "a symbolic link" if info.issym() else "a hard link" if info.islnk() else \
            "a directory" if info.isdir() else "a special file"
        if info.isdir() and name.rstrip("/") == "sessions":
            return ""
        raise ArchiveError(f"member {name[:100]!r} is {kind}; an export holds regular files only")
    if name in _TOP or _SESSION_MEMBER.fullmatch(name):
        return name
    raise ArchiveError(f"member {name[:100]!r} is not part of an export (a path outside its layout)")


def read_archive(path: Path) -> Contents:
    """Read and check an archive (never extracting it); ArchiveError for anything refused."""
    from .state.jsontext import Unparseable, loads_state

    path = Path(path)
    try:
        st = os.stat(path)
    except OSError as exc:
        raise ArchiveError(f"cannot read {path}: {exc.strerror or exc}") from None
    if st.st_size > ARCHIVE_MAX:
        raise ArchiveError(f"{path} is {st.st_size} bytes; an export is at most {ARCHIVE_MAX}")
    data: dict[str, bytes] = {}
    total = 0
    try:
        with tarfile.open(path, mode="r:*") as tar:
            for count, info in enumerate(tar, 1):
                if count > MEMBERS_MAX:
                    raise ArchiveError(f"more than {MEMBERS_MAX} members")
                name = _member_name(info)
                if not name:
                    continue
                if name in data:
                    raise ArchiveError(f"member {name!r} appears twice")
                if info.size > MEMBER_MAX:
                    raise ArchiveError(f"member {name!r} is {info.size} bytes; at most {MEMBER_MAX} each")
                total += info.size
                if total > TOTAL_MAX:
                    raise ArchiveError(f"the members add up to more than {TOTAL_MAX} bytes")
                handle = tar.extractfile(info)
                body = handle.read(MEMBER_MAX + 1) if handle is not None else b""
                if len(body) != info.size:
                    raise ArchiveError(f"member {name!r} is truncated")
                data[name] = body
    except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
        if isinstance(exc, ArchiveError):
            raise
        raise ArchiveError(f"{path} is not a subconscious export (not a readable tar archive: {exc})") from None

    def parsed(name: str) -> Any:
        try:
            return loads_state(data[name])
        except Unparseable as exc:
            raise ArchiveError(f"member {name!r} is not valid JSON: {exc}") from None

    if "manifest.json" not in data:
        raise ArchiveError(f"{path} is not a subconscious export (no manifest.json)")
    manifest = parsed("manifest.json")
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ArchiveError(f"{path} is not a subconscious export (its manifest names no format {FORMAT!r})")
    version = manifest.get("version")
    if version != VERSION or isinstance(version, bool):
        raise ArchiveError(f"{path} is export format version {version!r}; this subconscious reads version "
                           f"{VERSION} only. Upgrade subconscious to import it (nothing was changed)")
    out = Contents(manifest)
    for name, target in (("conversations.json", out.conversations), ("settings.json", out.settings)):
        if name in data:
            value = parsed(name)
            if not isinstance(value, dict):
                raise ArchiveError(f"member {name!r} is not a JSON object")
            target.update(value)
    for name in data:
        m = _SESSION_MEMBER.fullmatch(name)
        if m:
            out.sessions[m[1]] = parsed(name)
    return out


@dataclass
class Checked:
    """An archive's versions, each validated as the store would (invalid ones reported, never merged)."""

    conversations: dict[str, dict]
    settings: dict[str, Any]
    sessions: list[Any]
    invalid: list[str]


def check(contents: Contents) -> Checked:
    from .state.ids import is_session_id
    from .state.records import RecordError, normalize_record, parse_session, parse_setting

    invalid: list[str] = []
    convs = {}
    for key, value in contents.conversations.items():
        try:
            if not is_session_id(key):
                raise RecordError("not a valid session id")
            convs[key] = normalize_record(value)
        except (RecordError, ValueError, TypeError) as exc:
            invalid.append(f"conversations {str(key)[:60]!r}: {exc}")
    settings = {}
    for key, value in contents.settings.items():
        try:
            settings[key] = parse_setting(value)
        except (RecordError, ValueError, TypeError) as exc:
            invalid.append(f"settings {str(key)[:60]!r}: {exc}")
    sessions = []
    for sid, value in sorted(contents.sessions.items()):
        try:
            sessions.append(parse_session(value, sid))
        except (RecordError, ValueError, TypeError) as exc:
            invalid.append(f"session {sid!r}: {exc}")
    return Checked(convs, settings, sessions, invalid)


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
