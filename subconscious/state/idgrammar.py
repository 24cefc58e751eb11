"""The grammar of the identifiers that become file names: a leaf, imported by ids.py (which checks ids from
outside) and copynames.py (which tells a sync engine's copies from our files by the ids inside their names).

A session id is 1-128 letters, digits, ``-`` or ``_``, starting with a letter or digit (Claude Code's are
UUIDs); a host id 1-64 letters, digits, ``.``, ``-`` or ``_``, starting with a letter or digit.
"""

from __future__ import annotations

import re

__all__ = ["SESSION_ID_MAX", "SESSION_RE", "HOST_RE", "is_session_id", "is_host_id"]

SESSION_ID_MAX = 128
SESSION_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")
HOST_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def is_session_id(value: object) -> bool:
    """Does ``value`` follow the session id grammar (nothing else: ids.check_session_id also refuses an id
    whose file would read as a conflict copy)?"""
    return isinstance(value, str) and SESSION_RE.fullmatch(value) is not None


def is_host_id(value: object) -> bool:
    return isinstance(value, str) and HOST_RE.fullmatch(value) is not None
