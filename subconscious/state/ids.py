"""Validation of the identifiers that become file names.

Session ids come from Claude Code's hook input and host ids from the environment; both end up in
paths (``session-<id>.json``, ``hosts/<host>.json``). Nothing reaches the file system unchecked.

A session id whose file name would read as a sync engine's conflict copy (``abc_conflict-20261130-063049``
is Nextcloud's copy of session ``abc``) is refused by :func:`check_session_id`, the check every id from
outside (hook input, the worker's command line) and every id that becomes a file name goes through.
:func:`is_session_id` is the grammar alone (:mod:`.idgrammar`, a leaf): :mod:`subconscious.state.copynames`
builds on it to tell copies from originals, so it must accept the ids inside a copy's name.
"""

from __future__ import annotations

import re

from .idgrammar import HOST_RE as _HOST_RE, SESSION_ID_MAX, SESSION_RE as _SESSION_RE, is_host_id, is_session_id

__all__ = ["SESSION_ID_MAX", "InvalidIdentifier", "check_session_id", "is_session_id", "check_host_id", "is_host_id"]
# The engine markers that fit the grammar (Nextcloud's legacy copies, OneDrive's Linux client); only an
# id that holds one pays for importing the classifier, which decides.
_COPY_LIKE = re.compile(r"_conflict-\d{8}-\d{6}|-safeBackup-\d{4}")


class InvalidIdentifier(ValueError):
    """An identifier that could not safely become part of a file name."""


def _describe(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def check_session_id(value: object) -> str:
    """Return ``value`` if it is a safe session id, else raise :class:`InvalidIdentifier`.

    Allowed: letters, digits, ``-`` and ``_``, starting with a letter or digit, at most 128 characters
    (Claude Code uses UUIDs). Anything that could escape the directory (``/``, ``..``, NUL, ``\\``) or is
    over-long is refused.
    """
    if not isinstance(value, str) or not _SESSION_RE.fullmatch(value):
        raise InvalidIdentifier(
            f"refusing session id {_describe(value)}: expected 1-{SESSION_ID_MAX} characters of "
            "letters, digits, '-' or '_'"
        )
    if _COPY_LIKE.search(value):
        from .copynames import is_original

        if not is_original(f"session-{value}.json"):
            raise InvalidIdentifier(
                f"refusing session id {_describe(value)}: its file would read as a sync engine's conflict "
                "copy of another session's file"
            )
    return value


def check_host_id(value: object) -> str:
    """Return ``value`` if it is a safe host id (``SUBCONSCIOUS_HOST`` or a generated one)."""
    if not isinstance(value, str) or not _HOST_RE.fullmatch(value):
        raise InvalidIdentifier(
            f"refusing host id {_describe(value)}: expected 1-64 characters of letters, digits, "
            "'.', '-' or '_', starting with a letter or digit"
        )
    return value
