"""Sync engines' conflict copies in the state directory: found, read as extra sources, folded away.

A copy is data, not an error: the store merges every copy it recognises into what it reads (weak
name patterns only when the content is ours), and a writer that has durably written the merged result
moves the copies into ``backups/<date>/<host>/`` — kept, never deleted.
"""

from __future__ import annotations

import os
import re
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path

from ..copynames import ConflictCopy, classify

_PLAIN_ROOT = re.compile(r"session-[A-Za-z0-9][A-Za-z0-9_-]{0,127}\.json|conversations\.json|hosts|quarantine|backups")
_PLAIN_HOSTS = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}\.json")
# Strong copy names made only of the characters of plain names (OneDrive's Linux client, Nextcloud's
# legacy form): a plain-looking name that matches these still goes through the classifier.
_SEP = re.compile(r"[-_]")
_PLAIN_LOOKING_COPY = re.compile(r"-safeBackup-\d{4,}\.json$|_conflict-\d{8}-\d{6}\.json$")


def plain(name: str, where: str = "root") -> bool:
    """Is ``name`` certainly one of our own names (not a copy), without running the classifier?"""
    pattern = _PLAIN_ROOT if where == "root" else _PLAIN_HOSTS
    return pattern.fullmatch(name) is not None and _PLAIN_LOOKING_COPY.search(name) is None


@dataclass(frozen=True)
class Found:
    """A conflict copy on disk and the bytes it had when it was read."""

    path: Path
    copy: ConflictCopy
    raw: bytes


def listdir(directory: Path) -> list[str]:
    try:
        return os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return []


def find(names: list[str], where: str, only_original: str | None = None, *,
         include_ambiguous: bool = False, listing: frozenset[str] | None = None) -> list[ConflictCopy]:
    """Conflict copies among ``names``. Exact names of ours are skipped before any pattern runs (a
    home holds thousands of session files); weak patterns see the whole listing.

    With ``only_original`` (one session file), names that are also valid session names are
    considered too (OneDrive's ``session-<id>-LAPTOP.json``): the caller checks that the content
    names that session before using it. ``include_ambiguous`` does the same for a whole directory
    (host shards: OneDrive's ``<host>-<PC>.json`` is also a valid host's shard name).
    """
    ambiguous = include_ambiguous or bool(only_original)
    # ``listing``: the whole directory when ``names`` is only the part worth looking at (a session's
    # names out of a listing indexed once, see session_reading.Listing)
    listing = frozenset(names) if listing is None else listing
    out = []
    for name in names:
        if only_original:
            if name == only_original or not name.startswith(only_original[: -len(".json")]):
                continue
        elif plain(name, where) and not (include_ambiguous and "-" in name):
            continue
        found = classify(name, listing, where=where, include_ambiguous=ambiguous)  # type: ignore[arg-type]
        if isinstance(found, ConflictCopy) and (only_original is None or found.original == only_original):
            out.append(found)
    return sorted(out, key=lambda c: c.name)


def extending(stems: list[str], shortest: int = 0) -> list[str]:
    """The stems that extend another stem of ``stems`` (one at least ``shortest`` long) after a - or _,
    as OneDrive's ``session-<id>-LAPTOP`` extends ``session-<id>``, sorted. Only a stem longer than the
    shortest can extend one, at one of the lengths the stems have: in a home of UUID-named sessions (one
    length) that is no stem at all, found by a sort by length in C, not a look at each of 100,000 stems.
    With many lengths, one walk over the sorted stems instead (whatever extends a stem follows it)."""
    if not stems:
        return []
    lengths = sorted(set(map(len, stems)))
    if len(lengths) <= 16:
        by_length = sorted(stems, key=len)
        present = frozenset(stems)
        cuts = [n for n in lengths if n >= shortest]
        out = []
        for stem in by_length[bisect_right(by_length, lengths[0], key=len):]:
            size = len(stem)
            if any(n < size and stem[n] in "-_" and stem[:n] in present for n in cuts):
                out.append(stem)
        return sorted(out)
    out = []
    chain: list[str] = []  # the stems seen so far that are prefixes of the last one
    for stem in sorted(stems):
        while chain and not stem.startswith(chain[-1]):
            chain.pop()
        if any(stem[len(p)] in "-_" for p in chain if len(p) >= shortest):
            out.append(stem)
        chain.append(stem)
    return out


_SESSION_LINE = re.compile(r"^session-([A-Za-z0-9][A-Za-z0-9_-]{0,127})\.json$", re.M)


def plain_session_names(names: list[str]) -> list[re.Match] | None:
    """The names of ``names`` that are plain session file names (:func:`plain`), as matches whose group 1
    is the id, in listing order: one regular-expression scan over the joined listing (a home holds tens
    of thousands of names). None when a name holds a newline (then ask :func:`plain` one name at a time)."""
    joined = "\n".join(names)
    if joined.count("\n") != max(len(names) - 1, 0):
        return None
    return [m for m in _SESSION_LINE.finditer(joined) if _PLAIN_LOOKING_COPY.search(m.group(0)) is None]


def ambiguous_copies(names: list[str]) -> set[str]:
    """Names that are valid session names but read as another present session file's copy."""
    listing = frozenset(names)
    out = set()
    # a copy named like a session is its original's name plus a suffix after a "-" or "_" (OneDrive's
    # -LAPTOP, -safeBackup-0001, _conflict-…): without such a file present there is nothing to classify
    # (a home of thousands of sessions: one sorted walk, not a classify or a look-up per hyphen)
    stems = [n[:-5] for n in names if n.startswith("session-") and n.endswith(".json")]
    for stem in extending(stems, shortest=9):
        name = stem + ".json"
        if name.count("-") > 1:
            found = classify(name, listing, where="root", include_ambiguous=True)
            if isinstance(found, ConflictCopy) and found.ambiguous:
                out.add(name)
    return out
