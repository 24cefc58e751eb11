"""Sync engines' conflict copies in the state directory: found, read as extra sources, folded away.

A copy is data, not an error: the store merges every copy it recognises into what it reads (weak
name patterns only when the content is ours), and a writer that has durably written the merged result
moves the copies into ``backups/<date>/<host>/`` — kept, never deleted.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from .conflicts import ConflictCopy, classify

_PLAIN_ROOT = re.compile(r"session-[A-Za-z0-9][A-Za-z0-9_-]{0,127}\.json|conversations\.json|hosts|quarantine|backups")
_PLAIN_HOSTS = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}\.json")
# Strong copy names made only of the characters of plain names (OneDrive's Linux client, Nextcloud's
# legacy form): a plain-looking name that matches these still goes through the classifier.
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
         include_ambiguous: bool = False) -> list[ConflictCopy]:
    """Conflict copies among ``names``. Exact names of ours are skipped before any pattern runs (a
    home holds thousands of session files); weak patterns see the whole listing.

    With ``only_original`` (one session file), names that are also valid session names are
    considered too (OneDrive's ``session-<id>-LAPTOP.json``): the caller checks that the content
    names that session before using it. ``include_ambiguous`` does the same for a whole directory
    (host shards: OneDrive's ``<host>-<PC>.json`` is also a valid host's shard name).
    """
    ambiguous = include_ambiguous or bool(only_original)
    listing = frozenset(names)
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


def ambiguous_copies(names: list[str]) -> set[str]:
    """Names that are valid session names but read as another present session file's copy."""
    listing = frozenset(names)
    out = set()
    for name in names:
        if name.startswith("session-") and name.count("-") > 1:
            found = classify(name, listing, where="root", include_ambiguous=True)
            if isinstance(found, ConflictCopy) and found.ambiguous:
                out.add(name)
    return out
