"""The served mode's per-user token: ``<state dir>/serve/token``, 0600 in a 0700 dir, machine-local
(never in the synced home). Claude Code sends it in a header from ``$SUBCONSCIOUS_SERVE_TOKEN``; a request
without it, or with another, is refused."""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path

from ..atomic import ensure_dir


def token_path(state_root: Path) -> Path:
    return Path(state_root) / "serve" / "token"


def read_token(state_root: Path) -> str | None:
    try:
        text = token_path(state_root).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text if len(text) >= 32 and text.isalnum() else None


def ensure_token(state_root: Path) -> str:
    """The token, created on first use: written whole to a temp file, then linked into place (the first
    writer wins, a reader never sees half a token). A file there that is not a token (edited, damaged) is
    kept aside as ``token.damaged-*`` and a new one made: the old one was useless to Claude Code anyway."""
    path = token_path(state_root)
    for _ in range(3):
        found = read_token(state_root)
        if found:
            return found
        ensure_dir(path.parent)
        if path.exists():
            os.replace(path, path.with_name(f"token.damaged-{secrets.token_hex(3)}"))
        tmp = path.with_name(f".token-{os.getpid()}-{secrets.token_hex(3)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="ascii") as f:
                f.write(secrets.token_hex(24) + "\n")
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, path)
            except FileExistsError:
                pass  # another process made one first: read it on the next round
        finally:
            os.unlink(tmp)
    found = read_token(state_root)
    if found:
        return found
    raise RuntimeError(f"could not create {path}")


def matches(expected: str, given: str | None) -> bool:
    return bool(given) and hmac.compare_digest(expected.encode(), given.strip().encode())
