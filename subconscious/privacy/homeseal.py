"""Every copy of the block cache in the home, not just the merged view: scanned byte for byte, and
re-sealed in place.

A session's cached block values live in many files at once: the view ``session-<id>.json``, every
host's version ``hosts/<host>/session-<id>.json``, sync engines' conflict copies beside either,
displaced versions (``.subconscious-tmp-displaced-…``), and what was set aside in ``backups/`` and
``quarantine/``. ``key init`` and ``key rotate`` seal every one of them; ``key status``, ``doctor`` and
``rotate --drop-old`` count what is on disk in every one of them.

Writing another host's version: a host writes only its own version *as a record* (its stamp, its
content), and that is kept here — re-sealing changes only the representation of the values (the same
plaintext, the same value version, the same stamp and host), so what every reader merges is what it
was. The file is replaced with :func:`~subconscious.state.publish.publish`, which compares it with the
bytes read and never discards a version put there meanwhile (the owner's own next write compares with
the bytes it read, and redoes from a fresh read). So the owner's data is never lost and the merge
sees one record, re-encrypted. Within one run the same input value gets the same envelope in every file
(a memo), so a view and the host version it mirrors stay byte-equal in their values.

What cannot be re-sealed is reported with its path and a fix: a file that does not parse (the text
may be in it; a byte scan still finds key ids), a value under a key this machine does not hold, a file
we could not replace (a symlink, a special file, one that kept changing).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from ..state.seal import (
    Key,
    KeyLookup,
    SealError,
    envelope_key_id,
    envelope_version,
    is_envelope,
    open_envelope,
    seal,
)

BLOCKS = "lastBlockValues"
_KID_BYTES = re.compile(rb'"kid"\s*:\s*"(k[0-9a-f]{16})"')
_SID_NAME = re.compile(r"session-([A-Za-z0-9][A-Za-z0-9_-]{0,127}?)(?=[^A-Za-z0-9_-]|$|\.json)")
_SKIP_DIRS = {".git", ".stfolder", ".stversions"}  # a sync tool's own store: not ours to rewrite
SCAN_CAP = 64 << 20


@dataclass
class FileScan:
    """What one file of the home holds of the block cache."""

    path: Path
    raw: bytes
    plain: int = 0  # values in plain text
    sealed: dict[str, int] = field(default_factory=dict)  # key id → values (parsed)
    kids: set[str] = field(default_factory=set)  # every key id named in the bytes (parsed or not)
    unreadable: str | None = None  # why the file could not be parsed, when it may hold block values


@dataclass
class HomeScan:
    files: list[FileScan] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)  # symlinks, special files, too large

    def totals(self) -> dict[str, int]:
        out = {"plain": 0}
        for f in self.files:
            out["plain"] += f.plain
            for kid, n in f.sealed.items():
                out[kid] = out.get(kid, 0) + n
        return out

    def kids(self) -> set[str]:
        return {k for f in self.files for k in f.kids}

    def with_plain(self) -> list[Path]:
        return [f.path for f in self.files if f.plain]

    def naming(self, kid: str) -> list[Path]:
        return [f.path for f in self.files if kid in f.kids]

    def unreadable(self) -> list[FileScan]:
        return [f for f in self.files if f.unreadable]


def _walk(home: Path) -> Iterator[tuple[Path, str | None]]:
    """Every regular file under ``home`` (None) and what is skipped (a reason); symlinks never followed."""
    for path, skipped in _walk_paths(home):
        yield Path(path), skipped


def _walk_paths(home: Path) -> Iterator[tuple[str, str | None]]:
    """:func:`_walk` with the paths as strings (a Path for each of 40,000 files costs more than its scan)."""
    stack = [os.fspath(home)]
    while stack:
        directory = stack.pop()
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            path = entry.path
            try:
                if entry.is_symlink():
                    yield path, "a symbolic link (never followed)"
                elif entry.is_dir(follow_symlinks=False):
                    if entry.name not in _SKIP_DIRS:
                        stack.append(path)
                elif entry.is_file(follow_symlinks=False):
                    yield path, None
            except OSError:
                continue


def _block_maps(value: Any, depth: int = 0) -> Iterator[dict]:
    """Every object holding a ``lastBlockValues`` map in a parsed file (a session state, or an array or
    map of them, as a backup may hold)."""
    if depth > 8:
        return
    if isinstance(value, dict):
        if isinstance(value.get(BLOCKS), dict):
            yield value
        for v in value.values():
            if isinstance(v, (dict, list)):
                yield from _block_maps(v, depth + 1)
    elif isinstance(value, list):
        for v in value:
            yield from _block_maps(v, depth + 1)


def _parse(raw: bytes) -> Any:
    return json.loads(raw.decode("utf-8-sig"))


_GZIP = b"\x1f\x8b"
ARCHIVE_WHY = "a compressed archive (from `subconscious export`?) holding cached block values"


def _gunzip(raw: bytes) -> bytes | None:
    """The first :data:`SCAN_CAP` bytes a gzip file holds (a bomb stops there), None if it is not gzip."""
    import zlib

    try:
        return zlib.decompressobj(wbits=47).decompress(raw, SCAN_CAP)
    except zlib.error:
        return None


def scan_file(path: Path, raw: bytes) -> FileScan:
    if raw[:2] == _GZIP:  # an exported archive put in the home: its plain text is not in its bytes
        inner = _gunzip(raw)
        if inner is not None:
            out = FileScan(path, inner, kids={m.decode() for m in _KID_BYTES.findall(inner)})
            if BLOCKS.encode() in inner or out.kids:
                out.unreadable = ARCHIVE_WHY
            return out
    out = FileScan(path, raw, kids={m.decode() for m in _KID_BYTES.findall(raw)})
    if BLOCKS.encode() not in raw and not out.kids:
        return out
    try:
        doc = _parse(raw)
    except (UnicodeDecodeError, ValueError, RecursionError):
        out.unreadable = "not JSON"
        return out
    for holder in _block_maps(doc):
        for value in holder[BLOCKS].values():
            if isinstance(value, str):
                out.plain += 1
            elif is_envelope(value):
                kid = envelope_key_id(value) or "?"
                out.sealed[kid] = out.sealed.get(kid, 0) + 1
    return out


def scan_home(home: Path, read: Callable[[Path], bytes | None] | None = None, quiet=None) -> HomeScan:
    """A byte scan of every file in the home (read only). ``read``: how a file's bytes are read (None: it
    could not be, or is over :data:`SCAN_CAP`), e.g. through the store's file system, which doctor has
    read each file through once already. ``quiet``: the files found without anything of the block cache
    by an earlier scan (:class:`.state.sessioncache.QuietFiles`): one unchanged since is not read again."""
    result = HomeScan()
    read = read or _read
    blocks = BLOCKS.encode()
    cut = len(os.fspath(home)) + 1
    for path, skipped in _walk_paths(home):
        if skipped:
            result.skipped.append((Path(path), skipped))
            continue
        if quiet is not None:
            taken, token = quiet.token(path)
            if quiet.quiet(path[cut:], token):
                continue
        raw = read(path)
        if raw is None:
            result.skipped.append((Path(path), "could not be read"))
            continue
        if raw[:2] != _GZIP and blocks not in raw and _KID_BYTES.search(raw) is None:
            if quiet is not None:
                quiet.mark(path[cut:], taken, token)
            continue  # nothing of the block cache in it (what scan_file would find for most files)
        found = scan_file(Path(path), raw)
        if found.plain or found.sealed or found.kids or found.unreadable:
            result.files.append(found)
        elif quiet is not None:
            quiet.mark(path[cut:], taken, token)  # (a session version with no cached block: most of them)
    if quiet is not None:
        quiet.save()
    return result


def _read(path: Path) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        import stat

        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > SCAN_CAP:
            return None
        chunks, total, want = [], 0, st.st_size + 1  # sized by fstat: a 1 MiB buffer per small file is slow
        while chunk := os.read(fd, want):
            chunks.append(chunk)
            total += len(chunk)
            if total == st.st_size:
                break
            want = 1 << 20
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- re-sealing


DROP = object()  # a plain value found while encryption was on: removed, never sealed


class Memo:
    """One run's re-sealing: the same input (session, label, value) gets the same output everywhere.
    ``drop_plain``: encryption was already on, so a plain value is anyone's (a folder writer's planted
    text, or a copy from before): it is removed rather than sealed, so re-sealing never turns foreign
    text into an authentic envelope (it is not shown while on anyway; the next prompt caches it again)."""

    def __init__(self, keyring: KeyLookup, key: Key | None, drop_plain: bool = False,
                 trusted: Callable[[str | None], bool] | None = None):
        self.keyring, self.key, self.drop_plain, self.trusted = keyring, key, drop_plain, trusted
        self._done: dict[str, Any] = {}

    def value(self, session_id: str, label: str, value: Any) -> tuple[Any, str | None]:
        """``(new value, "<reason>:<key id>" when it did not open | None)``; the value itself when nothing changes."""
        if isinstance(value, str):
            if self.key is None:
                return value, None
            if self.drop_plain:
                return DROP, None
            text, version = value, 1
        elif is_envelope(value):
            kid = envelope_key_id(value)
            if self.key is not None and kid == self.key.id:
                return value, None  # under the target key already (whether it opens is doctor's to say)
            if self.key is not None and self.trusted is not None and not self.trusted(kid):
                # under a key the home no longer reads with (retired): anyone holding that key could have
                # sealed it, so it is removed, never re-sealed into an authentic value (as plain text is)
                return DROP, None
            try:
                text = open_envelope(self.keyring, value, session_id=session_id, label=label)
            except SealError as exc:  # "<reason>:<key id>"
                return value, f"{exc.reason}:{exc.key_id or '?'}"
            version = envelope_version(value)
            if self.key is None:
                return text, None
        else:
            return value, None
        memo = json.dumps([session_id, label, value], sort_keys=True, separators=(",", ":"))
        if memo not in self._done:
            self._done[memo] = seal(self.key, text, session_id=session_id, label=label, version=version)
        return self._done[memo], None


def _sh(path: Path) -> str:
    """``path`` as one shell word for a printed fix: quoted, so a name from the synced folder (``x'; rm -rf
    ~; '``) stays a name; a control character or an undecodable byte (which the terminal output would drop
    or mangle) becomes an unquoted ``?``, which the shell matches against the real name."""
    import shlex

    text = str(path)
    parts, cur = [], ""
    for ch in text:
        if ch.isprintable() and not ("\udc80" <= ch <= "\udcff"):
            cur += ch
        else:
            parts.append(shlex.quote(cur) if cur else "")
            parts.append("?")
            cur = ""
    parts.append(shlex.quote(cur) if cur else "")
    return "".join(parts)


def _session_id(holder: Mapping[str, Any], path: Path) -> str | None:
    sid = holder.get("sessionId")
    if isinstance(sid, str) and sid:
        return sid
    m = _SID_NAME.search(path.name)
    return m.group(1) if m else None


@dataclass
class Leftover:
    path: Path
    why: str
    fix: str
    key_id: str | None = None


@dataclass
class HomeReseal:
    files: int = 0  # files rewritten
    values: int = 0  # values changed in them
    left: list[Leftover] = field(default_factory=list)


def reseal_doc(doc: Any, path: Path, memo: Memo) -> tuple[int, dict[str, int], bool]:
    """Re-seal every block map in ``doc`` in place: (values changed, {key id: unopened}, session id
    missing)."""
    changed, unopened, nosid = 0, {}, False
    for holder in _block_maps(doc):
        sid = _session_id(holder, path)
        blocks = holder[BLOCKS]
        if sid is None:
            nosid = nosid or any(isinstance(v, str) or is_envelope(v) for v in blocks.values())
            continue
        for label in list(blocks):
            new, missing = memo.value(sid, label, blocks[label])
            if missing:
                unopened[missing] = unopened.get(missing, 0) + 1
            elif new is DROP:
                del blocks[label]
                changed += 1
            elif new is not blocks[label] and new != blocks[label]:
                blocks[label] = new
                changed += 1
    return changed, unopened, nosid


def reseal_home(store, keyring: KeyLookup, key: Key | None, *, memo: Memo | None = None,
                drop_plain: bool = False, trusted: Callable[[str | None], bool] | None = None,
                tries: int = 8) -> HomeReseal:
    """Put every block value in every file of the home under ``key`` (None: plain text), each file
    replaced only if it still holds the bytes read (see the module docstring). ``trusted``: which key
    ids a value may be re-sealed from (others are dropped, see :class:`Memo`); None: any held here."""
    from ..state.publish import publish
    from ..state.textforms import dumps_canonical

    memo = memo or Memo(keyring, key, drop_plain, trusted)
    report = HomeReseal()
    fs = store.fs
    for path, skipped in _walk(store.home):
        if skipped:
            continue
        for _ in range(tries):
            got = fs.read(path, SCAN_CAP)
            if not got.ok:
                break
            raw = got.data
            if raw[:2] == _GZIP and scan_file(path, raw).unreadable:
                report.left.append(Leftover(path, f"it is {ARCHIVE_WHY}, which cannot be re-sealed in place",
                                            "export again now, outside the synced home (`subconscious export "
                                            f"FILE`), and delete this one: rm -- {_sh(path)}"))
                break
            if BLOCKS.encode() not in raw:
                break
            try:
                doc = _parse(raw)
            except (UnicodeDecodeError, ValueError, RecursionError):
                report.left.append(Leftover(path, "it is not JSON, so its values cannot be re-sealed",
                                            f"check it and delete it if it holds nothing you need: rm -- {_sh(path)}"))
                break
            changed, unopened, nosid = reseal_doc(doc, path, memo)
            for what, n in unopened.items():
                reason, kid = what.split(":", 1)
                if reason == "unknown-key":
                    report.left.append(Leftover(path, f"{n} values are sealed with key {kid}, which is not on this "
                                                "machine", f"run the same command on a machine that has key {kid}, "
                                                "or import it here (`subconscious key import`)", kid))
                else:
                    report.left.append(Leftover(path, f"{n} values under key {kid} do not open ({reason}: damaged, "
                                                "tampered with, moved from another session, or a newer format)",
                                                "they are never shown; delete the file if it is a copy you do not "
                                                f"need: rm -- {_sh(path)}", kid))
            if nosid:
                report.left.append(Leftover(path, "it names no session, so its values cannot be sealed",
                                            f"check it and delete it if it holds nothing you need: rm -- {_sh(path)}"))
            if not changed:
                break
            data = dumps_canonical(doc, expand=1).encode()
            outcome = publish(fs, path, data, raw, shared=True)
            if outcome.done:
                report.files += 1
                report.values += changed
                break
            if not outcome.redo:
                report.left.append(Leftover(path, "it could not be replaced (not a regular file?)",
                                            f"look at it: ls -l -- {_sh(path)}"))
                break
        else:
            report.left.append(Leftover(path, "it kept changing while this machine re-sealed it",
                                        "run the command again"))
    return report
