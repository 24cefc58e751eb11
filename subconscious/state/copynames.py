"""Recognise sync-engine conflict copies (and in-flight temp files) of our state files.

Pure: no I/O.  Callers pass a file name and, for the weak patterns, the listing of the
directory the name sits in.  Two directories hold our files:

* ``where="root"`` -- the state dir: ``conversations.json`` and ``session-<id>.json``
  (plus any ``extra`` fixed names the caller passes);
* ``where="hosts"`` -- ``hosts/``: ``<host>.json`` shards.

Engines and the names they give the losing copy (see docs/sync-engines.md):

=================  ============================================================  ======
engine             copy name                                                     weak?
=================  ============================================================  ======
syncthing          ``<stem>.sync-conflict-YYYYMMDD-HHMMSS-<7-char id>.<ext>``    no
dropbox            ``<stem> (<who>'s conflicted copy YYYY-MM-DD).<ext>``,        no
                   numbered ``… (1)``; ``(Case Conflict)``,
                   ``(Unicode Encoding Conflict)``, ``(shared folder conflict)``
icloud             ``<stem> 2.<ext>``, ``<stem> 3.<ext>`` …                      yes
onedrive           ``<stem>-<COMPUTER NAME>.<ext>``, ``-<NAME>-2``               yes
onedrive-linux     ``<stem>-<hostname>-safeBackup-NNNN.<ext>``                   no
nextcloud          ``<stem> (conflicted copy [<user> ]YYYY-MM-DD HHMMSS).<ext>``, no
                   legacy ``<stem>_conflict-YYYYMMDD-HHMMSS.<ext>``
unison             ``<stem> (conflict_on_YYYY-MM-DD).<ext>``,                    no
                   ``<stem> (conflict #N_on_YYYY-MM-DD).<ext>``
google-drive       ``<stem> (N).<ext>`` (not confirmed)                          yes
rclone             bisync 1.60-1.65: ``<name>..path1``, ``<name>..path2`` (both   no
                   sides renamed, no ``<name>`` left); 1.66+: ``<name>.conflictN``
                   (``--conflict-loser num``/``pathname``, default suffix),
                   ``<name>.path1``/``.path2`` (``--conflict-suffix path``), and
                   with ``--suffix-keep-extension`` ``<stem>.conflictN.<ext>``
=================  ============================================================  ======

rclone appends its marker to the whole name (``conversations.json..path1``), so its copies
are recognised without the original beside them: rclone 1.60-1.65 renames *both* versions
and leaves no original at all.  Other ``--conflict-suffix`` values are not recognised.

A *weak* pattern is recognised only when the original sits beside the copy in
``listing``; even then the caller must check that the copy's content belongs to the
original (parses as our format and, for session files and host shards, names the same
session / host) before folding it.  A weak match whose name is itself a legal name of
ours (``session-abc-LAPTOP.json`` beside ``session-abc.json``) is returned only with
``include_ambiguous=True`` (and then carries ``ambiguous=True``).

"Valid original names" exclude names that carry a strong engine marker: a host id such
as ``x.sync-conflict-20261130-063049-ABCDEFG`` is refused by :func:`is_original`, so the
store should validate new ids with ``is_original(f"session-{sid}.json")`` /
``is_original(f"{host}.json", where="hosts")``.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Literal

from .idgrammar import is_host_id, is_session_id
from .textforms import TEMP_PREFIX

__all__ = [
    "ConflictCopy",
    "Engine",
    "TempFile",
    "TEMP_PREFIX",
    "WEAK_ENGINES",
    "Where",
    "classify",
    "conflicts_by_original",
    "find_conflicts",
    "is_original",
    "is_temporary",
    "make_copy_name",
]

Where = Literal["root", "hosts"]

CONVERSATIONS = "conversations.json"


class Engine(str, Enum):
    SYNCTHING = "syncthing"
    DROPBOX = "dropbox"
    ICLOUD = "icloud"
    ONEDRIVE = "onedrive"
    ONEDRIVE_LINUX = "onedrive-linux"
    NEXTCLOUD = "nextcloud"
    UNISON = "unison"
    GOOGLE_DRIVE = "google-drive"
    RCLONE = "rclone"

    def __str__(self) -> str:  # pragma: no cover - cosmetic
        return self.value


WEAK_ENGINES = frozenset({Engine.ICLOUD, Engine.ONEDRIVE, Engine.GOOGLE_DRIVE})


@dataclass(frozen=True, slots=True)
class ConflictCopy:
    """A conflict copy ``name`` of our file ``original`` (both plain names, same dir)."""

    name: str
    original: str
    engine: Engine
    weak: bool = False  # name alone is no proof: original was beside it; check content
    ambiguous: bool = False  # weak match whose name is ALSO a valid name of ours (is_original)
    date: _dt.date | None = None  # engine's local date, where encoded
    time: _dt.time | None = None  # engine's local time of day, where encoded
    device: str | None = None  # Syncthing: 7-char short id of the device of the WINNING version
    host: str | None = None  # OneDrive computer name / Linux client's hostname
    user: str | None = None  # Dropbox "<who>'s", Nextcloud "[<user> ]"
    number: int | None = None  # iCloud " 2", OneDrive "-2", Google "(1)", Dropbox "(1)", Unison "#N", safeBackup NNNN,
    # rclone's N of "conflictN" or the side of "path1"/"path2"
    variant: str | None = None  # e.g. Dropbox "case", "unicode", "shared-folder"; Nextcloud "legacy";
    # rclone "legacy" (1.60-1.65 "..pathN"), "pathname" (".pathN"), "keep-extension" ("<stem>.conflictN<ext>")

    @property
    def strength(self) -> Literal["weak", "strong"]:
        return "weak" if self.weak else "strong"


@dataclass(frozen=True, slots=True)
class TempFile:
    """An in-flight temp file: never a conflict, never ours to fold -- leave it alone."""

    name: str
    owner: Literal["subconscious", "syncthing", "unison", "rclone"]
    target: str | None = None  # the file it will become, where the name says


# --------------------------------------------------------------------------- originals


def _raw_original(name: str, where: Where, extra: Collection[str]) -> bool:
    """Does ``name`` fit the grammar of our names (ids as subconscious.state.ids checks them)?"""
    if not name.endswith(".json"):
        return name in extra
    if where == "hosts":
        return is_host_id(name[: -len(".json")])
    if name == CONVERSATIONS or name in extra:
        return True
    return name.startswith("session-") and is_session_id(name[len("session-"): -len(".json")])


def is_original(name: str, *, where: Where = "root", extra: Collection[str] = ()) -> bool:
    """Is ``name`` one of our own file names (and not a temp file or strong-marked copy)?"""
    if not _raw_original(name, where, extra):
        return False
    if is_temporary(name) is not None:
        return False
    return _strong(name, where, extra) is None


# --------------------------------------------------------------------------- temp files

_ST_TMP = re.compile(r"\.syncthing\.(.+)\.tmp")
_ST_TMP_WIN = re.compile(r"~syncthing~(.+)\.tmp")
_UNISON_TMP = re.compile(r"\.unison\.(.+)\.unison\.tmp")
# rclone 1.63+ copies to "<name>.<hash>.partial" and renames (unless --inplace)
_RCLONE_TMP = re.compile(r"(.+)\.[A-Za-z0-9]{4,}\.partial")


def is_temporary(name: str) -> TempFile | None:
    """Our own atomic-write temps, Syncthing's pull temps, Unison's and rclone's transfer temps."""
    if name.startswith(TEMP_PREFIX):
        return TempFile(name, "subconscious")
    if m := _ST_TMP.fullmatch(name):
        return TempFile(name, "syncthing", m.group(1))
    if m := _ST_TMP_WIN.fullmatch(name):
        return TempFile(name, "syncthing", m.group(1))
    if _UNISON_TMP.fullmatch(name):
        return TempFile(name, "unison")
    if m := _RCLONE_TMP.fullmatch(name):
        return TempFile(name, "rclone", m.group(1))
    return None


# --------------------------------------------------------------------------- patterns


def _split(name: str) -> tuple[str, str]:
    """(stem, ext) the way the engines split: at the last dot, not a leading one."""
    i = name.rfind(".")
    if i <= 0:
        return name, ""
    return name[:i], name[i:]


def _date(y: str, mo: str, d: str) -> _dt.date | None:
    try:
        return _dt.date(int(y), int(mo), int(d))
    except ValueError:
        return None


def _time(h: str, mi: str, s: str) -> _dt.time | None:
    try:
        return _dt.time(int(h), int(mi), int(s))
    except ValueError:
        return None


# Each pattern matches the stem of the copy; group "stem" is the original's stem.
_SYNCTHING = re.compile(
    r"(?P<stem>.+)\.sync-conflict-(?P<y>\d{4})(?P<mo>\d{2})(?P<d>\d{2})"
    r"-(?P<h>\d{2})(?P<mi>\d{2})(?P<s>\d{2})-(?P<dev>[A-Z2-7]{7})"
)
_DROPBOX = re.compile(
    r"(?P<stem>.+?) \((?P<user>[^()]+)'s conflicted copy (?P<y>\d{4})-(?P<mo>\d{2})-(?P<d>\d{2})"
    r"(?: \((?P<n1>\d+)\))?\)(?: \((?P<n2>\d+)\))?"
)
_DROPBOX_OTHER = re.compile(
    r"(?P<stem>.+?) \((?P<kind>Case Conflict|Unicode Encoding Conflict|shared folder conflict)"
    r"(?: (?P<n1>\d+))?\)(?: \((?P<n2>\d+)\))?"
)
_DROPBOX_KIND = {
    "Case Conflict": "case",
    "Unicode Encoding Conflict": "unicode",
    "shared folder conflict": "shared-folder",
}
_NEXTCLOUD = re.compile(
    r"(?P<stem>.+?) \(conflicted copy (?:(?P<user>[^()]+?) )?(?P<y>\d{4})-(?P<mo>\d{2})-(?P<d>\d{2})"
    r" (?P<h>\d{2})(?P<mi>\d{2})(?P<s>\d{2})\)"
)
_NEXTCLOUD_LEGACY = re.compile(
    r"(?P<stem>.+)_conflict-(?P<y>\d{4})(?P<mo>\d{2})(?P<d>\d{2})-(?P<h>\d{2})(?P<mi>\d{2})(?P<s>\d{2})"
)
_UNISON = re.compile(
    r"(?P<stem>.+?) \(conflict(?: #(?P<n>\d+))?_on_(?P<y>\d{4})-(?P<mo>\d{2})-(?P<d>\d{2})\)"
)
# rclone bisync appends its marker to the WHOLE name: 1.60-1.65 "..path1"/"..path2"; 1.66+ ".conflictN"
# (default --conflict-suffix, --conflict-loser num or pathname) or ".path1"/".path2" (--conflict-suffix
# path). Lazy: the shortest original, so "..path1" is read before "." + ".path1".
_RCLONE = re.compile(
    r"(?P<rest>.+?)(?:\.\.path(?P<legacy>[12])|\.path(?P<side>[12])|\.conflict(?P<n>[1-9]\d*))"
)
# ... and with --suffix-keep-extension before the extension: "<stem>.conflictN.<ext>" (matches the stem)
_RCLONE_KEEP_EXT = re.compile(r"(?P<stem>.+)\.conflict(?P<n>[1-9]\d*)")
_ONEDRIVE_LINUX = re.compile(r"(?P<rest>.+-.+)-safeBackup-(?P<n>\d{4,})")
_ICLOUD = re.compile(r"(?P<stem>.+) (?P<n>[2-9]|[1-9]\d+)")
_GOOGLE = re.compile(r"(?P<stem>.+) \((?P<n>[1-9]\d*)\)")
_ONEDRIVE_N = re.compile(r"(?P<host>.+)-(?P<n>[2-9]|[1-9]\d{1,2})")


def _int(s: str | None) -> int | None:
    return int(s) if s is not None else None


def _strong_candidates(stem: str) -> Iterable[tuple[str, Engine, dict]]:
    """Every (original stem, engine, details) reading of ``stem`` under a strong pattern."""
    if m := _SYNCTHING.fullmatch(stem):
        g = m.groupdict()
        dt, tm = _date(g["y"], g["mo"], g["d"]), _time(g["h"], g["mi"], g["s"])
        if dt and tm:
            yield g["stem"], Engine.SYNCTHING, {"date": dt, "time": tm, "device": g["dev"]}
    if m := _DROPBOX.fullmatch(stem):
        g = m.groupdict()
        if dt := _date(g["y"], g["mo"], g["d"]):
            yield g["stem"], Engine.DROPBOX, {
                "date": dt, "user": g["user"], "number": _int(g["n1"] or g["n2"])}
    if m := _DROPBOX_OTHER.fullmatch(stem):
        g = m.groupdict()
        yield g["stem"], Engine.DROPBOX, {
            "variant": _DROPBOX_KIND[g["kind"]], "number": _int(g["n1"] or g["n2"])}
    if m := _NEXTCLOUD.fullmatch(stem):
        g = m.groupdict()
        dt, tm = _date(g["y"], g["mo"], g["d"]), _time(g["h"], g["mi"], g["s"])
        if dt and tm:
            yield g["stem"], Engine.NEXTCLOUD, {"date": dt, "time": tm, "user": g["user"]}
    if m := _NEXTCLOUD_LEGACY.fullmatch(stem):
        g = m.groupdict()
        dt, tm = _date(g["y"], g["mo"], g["d"]), _time(g["h"], g["mi"], g["s"])
        if dt and tm:
            yield g["stem"], Engine.NEXTCLOUD, {"date": dt, "time": tm, "variant": "legacy"}
    if m := _UNISON.fullmatch(stem):
        g = m.groupdict()
        if dt := _date(g["y"], g["mo"], g["d"]):
            yield g["stem"], Engine.UNISON, {"date": dt, "number": _int(g["n"])}
    if m := _RCLONE_KEEP_EXT.fullmatch(stem):
        yield m["stem"], Engine.RCLONE, {"number": int(m["n"]), "variant": "keep-extension"}
    # "<stem>-<hostname>-safeBackup-NNNN": both parts may hold dashes; try every split,
    # longest original first (the caller's listing, if any, decides between them).
    if m := _ONEDRIVE_LINUX.fullmatch(stem):
        rest, n = m["rest"], int(m["n"])
        for j in range(len(rest) - 2, 0, -1):
            if rest[j] == "-" and rest[j + 1:]:
                yield rest[:j], Engine.ONEDRIVE_LINUX, {"host": rest[j + 1:], "number": n}


def _rclone(name: str, where: Where, extra: Collection[str], listing: Collection[str]) -> ConflictCopy | None:
    """rclone bisync's copy names: the marker follows the whole original name, which need not exist
    (1.60-1.65 rename both sides away), so the name alone is the proof."""
    if (m := _RCLONE.fullmatch(name)) is None:
        return None
    rest = m["rest"]
    if m["legacy"]:
        details = {"number": int(m["legacy"]), "variant": "legacy"}
    elif m["side"]:
        details = {"number": int(m["side"]), "variant": "pathname"}
    else:
        details = {"number": int(m["n"])}
    if _raw_original(rest, where, extra) and is_temporary(rest) is None:
        original = rest
    elif (inner := _strong(rest, where, extra, listing)) is not None:
        original = inner.original  # a copy of a copy ("x.json..path1..path2"): the first original
    else:
        return None
    return ConflictCopy(name=name, original=original, engine=Engine.RCLONE, **details)


def _strong(
    name: str, where: Where, extra: Collection[str], listing: Collection[str] = ()
) -> ConflictCopy | None:
    if (r := _rclone(name, where, extra, listing)) is not None:
        return r
    stem, ext = _split(name)
    valid = [
        (ostem + ext, engine, details)
        for ostem, engine, details in _strong_candidates(stem)
        if _raw_original(ostem + ext, where, extra) and is_temporary(ostem + ext) is None
    ]
    if not valid:
        return None
    beside = [v for v in valid if v[0] in listing]
    original, engine, details = max(beside, key=lambda v: len(v[0])) if beside else valid[0]
    if (inner := _strong(original, where, extra, listing)) is not None:
        original = inner.original  # a copy of a copy: fold into the first original
    # A strong marker makes the name no valid original of ours (see is_original), so a
    # strong match is never ambiguous, even where the id grammar would allow the name.
    return ConflictCopy(name=name, original=original, engine=engine, **details)


def _weak(name: str, listing: Collection[str], where: Where, extra: Collection[str]) -> ConflictCopy | None:
    stem, ext = _split(name)
    found: list[ConflictCopy] = []
    ambiguous = is_original(name, where=where, extra=extra)

    def ok(original: str) -> bool:
        return original != name and original in listing and is_original(original, where=where, extra=extra)

    if (m := _ICLOUD.fullmatch(stem)) and ok(m["stem"] + ext):
        found.append(ConflictCopy(name, m["stem"] + ext, Engine.ICLOUD, True, ambiguous, number=int(m["n"])))
    if (m := _GOOGLE.fullmatch(stem)) and ok(m["stem"] + ext):
        found.append(ConflictCopy(name, m["stem"] + ext, Engine.GOOGLE_DRIVE, True, ambiguous, number=int(m["n"])))
    # OneDrive: "<stem>-<NAME>[-N]"; the computer name may hold dashes and spaces, so try
    # every dash and keep the longest original that exists beside the copy.
    best: ConflictCopy | None = None
    for j in range(1, len(stem) - 1):
        if stem[j] != "-" or not ok(stem[:j] + ext):
            continue
        rest = stem[j + 1:]
        host, number = rest, None
        if (n := _ONEDRIVE_N.fullmatch(rest)) and n["host"].strip():
            host, number = n["host"], int(n["n"])
        # Windows refuses all-digit computer names: "session-abc-2.json" is no OneDrive copy.
        if host == host.strip() and any(ch.isalpha() for ch in host):
            best = ConflictCopy(name, stem[:j] + ext, Engine.ONEDRIVE, True, ambiguous, host=host, number=number)
    if best:
        found.append(best)
    # Several weak readings ("a (1) 2.json"?): prefer the one with the longest original.
    return max(found, key=lambda c: len(c.original)) if found else None


# --------------------------------------------------------------------------- public


def classify(
    name: str,
    listing: Collection[str] = (),
    *,
    where: Where = "root",
    extra: Collection[str] = (),
    include_ambiguous: bool = False,
) -> ConflictCopy | TempFile | None:
    """Classify one plain file name from the directory ``where``.

    Returns a :class:`TempFile` (leave alone), a :class:`ConflictCopy` of one of our
    files, or ``None`` (one of our originals, or not ours at all).  ``listing`` -- the
    names in the same directory -- is needed only for the weak patterns (iCloud,
    OneDrive, Google Drive), which count only when the original is in it; it also
    decides between readings of an ambiguous strong name (OneDrive-Linux hostnames).

    A weak match whose name is itself a valid name of ours (``session-abc-LAPTOP.json``
    beside ``session-abc.json``) is returned only with ``include_ambiguous=True`` -- pass
    it only if you then check the content (the session / host id inside) before folding.
    """
    if not name or "/" in name or "\x00" in name:
        return None
    if (t := is_temporary(name)) is not None:
        return t
    if listing and not isinstance(listing, (set, frozenset, dict)):
        listing = frozenset(listing)
    if (c := _strong(name, where, extra, listing)) is not None:
        return c
    if not listing:
        return None
    c = _weak(name, listing, where, extra)
    if c is not None and c.ambiguous and not include_ambiguous:
        return None
    return c


def find_conflicts(
    listing: Iterable[str],
    *,
    where: Where = "root",
    extra: Collection[str] = (),
    include_ambiguous: bool = False,
) -> tuple[ConflictCopy, ...]:
    """All conflict copies in a directory listing, sorted by (original, name)."""
    names = frozenset(listing)
    out = [
        c for n in names
        if isinstance(c := classify(n, names, where=where, extra=extra, include_ambiguous=include_ambiguous),
                      ConflictCopy)
    ]
    return tuple(sorted(out, key=lambda c: (c.original, c.name)))


def conflicts_by_original(
    listing: Iterable[str],
    *,
    where: Where = "root",
    extra: Collection[str] = (),
    include_ambiguous: bool = False,
) -> dict[str, tuple[ConflictCopy, ...]]:
    """``find_conflicts`` grouped: original name -> its copies (sorted by name)."""
    out: dict[str, list[ConflictCopy]] = {}
    for c in find_conflicts(listing, where=where, extra=extra, include_ambiguous=include_ambiguous):
        out.setdefault(c.original, []).append(c)
    return {k: tuple(v) for k, v in out.items()}


def make_copy_name(
    engine: Engine,
    original: str,
    *,
    when: _dt.datetime | None = None,
    device: str = "ABCDEFG",
    host: str = "LAPTOP",
    user: str | None = "alice",
    number: int | None = None,
    variant: str | None = None,
) -> str:
    """Build the name ``engine`` would give a conflict copy of ``original`` (for tests/fixtures)."""
    when = when or _dt.datetime(2026, 11, 30, 6, 30, 49)
    stem, ext = _split(original)
    d8, t6, d10 = when.strftime("%Y%m%d"), when.strftime("%H%M%S"), when.strftime("%Y-%m-%d")
    if engine is Engine.SYNCTHING:
        return f"{stem}.sync-conflict-{d8}-{t6}-{device}{ext}"
    if engine is Engine.DROPBOX:
        n = f" ({number})" if number else ""
        if variant in ("case", "unicode", "shared-folder"):
            kind = {v: k for k, v in _DROPBOX_KIND.items()}[variant]
            return f"{stem} ({kind}){n}{ext}"
        return f"{stem} ({user or 'alice'}'s conflicted copy {d10}){n}{ext}"
    if engine is Engine.ICLOUD:
        return f"{stem} {number or 2}{ext}"
    if engine is Engine.ONEDRIVE:
        return f"{stem}-{host}{f'-{number}' if number else ''}{ext}"
    if engine is Engine.ONEDRIVE_LINUX:
        return f"{stem}-{host}-safeBackup-{number or 1:04d}{ext}"
    if engine is Engine.NEXTCLOUD:
        if variant == "legacy":
            return f"{stem}_conflict-{d8}-{t6}{ext}"
        who = f"{user} " if user else ""
        return f"{stem} (conflicted copy {who}{d10} {t6}){ext}"
    if engine is Engine.UNISON:
        num = f" #{number}" if number else ""
        return f"{stem} (conflict{num}_on_{d10}){ext}"
    if engine is Engine.GOOGLE_DRIVE:
        return f"{stem} ({number or 1}){ext}"
    if engine is Engine.RCLONE:
        side = 2 if number == 2 else 1
        if variant == "legacy":  # bisync 1.60-1.65: both sides renamed, no original left
            return f"{original}..path{side}"
        if variant == "pathname":  # 1.66+ --conflict-loser pathname --conflict-suffix path
            return f"{original}.path{side}"
        if variant == "keep-extension":  # 1.66+ with --suffix-keep-extension
            return f"{stem}.conflict{number or 1}{ext}"
        return f"{original}.conflict{number or 1}"  # 1.66+ default suffix, num or pathname
    raise ValueError(f"unknown engine {engine!r}")
