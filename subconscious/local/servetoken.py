"""The served mode's per-user token: ``<state dir>/serve/token``, 0600 in a 0700 dir, machine-local
(never in the synced home). Claude Code sends it in a header from ``$SUBCONSCIOUS_SERVE_TOKEN``; a request
without it, or with another, is refused."""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path

from ..base.atomic import ensure_dir


def token_path(state_root: Path) -> Path:
    return Path(state_root) / "serve" / "token"


def read_token(state_root: Path) -> str | None:
    """The token, from a regular file of this user's that no other can read (not through a symlink): a state
    dir set where another user made ``serve/`` first (a shared /tmp path) must not hand the server a token that
    user wrote (who could then drive every hook through it and read the answers)."""
    import stat

    try:
        fd = os.open(token_path(state_root), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (hasattr(os, "getuid") and (st.st_uid != os.getuid() or st.st_mode & 0o077)):
            return None
        text = os.read(fd, 4096).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    finally:
        os.close(fd)
    return text if len(text) >= 32 and text.isalnum() else None


def _private(directory: Path) -> None:
    """``directory`` is a real directory of this user's that no other user can write, or OSError."""
    import stat

    st = os.lstat(directory)
    if not stat.S_ISDIR(st.st_mode) or (hasattr(os, "getuid") and (st.st_uid != os.getuid() or st.st_mode & 0o022)):
        raise OSError(f"{directory} is not a directory only this user can write (another user could plant a token)")


def ensure_token(state_root: Path) -> str:
    """The token, created on first use: written whole to a temp file, then linked into place (the first
    writer wins, a reader never sees half a token). A file there that is not a token (edited, damaged) is
    kept aside as ``token.damaged-*`` and a new one made: the old one was useless to Claude Code anyway."""
    path = token_path(state_root)
    ensure_dir(path.parent)
    _private(path.parent)
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


def proof(token: str, nonce: str, port: int) -> str:
    """What ``/subconscious/health?nonce=N`` answers: an HMAC under the token of the nonce and the port the
    server listens on. Only a process that has the token can make it, a listener that heard an earlier one
    cannot replay it for a new nonce, and one that relays the nonce to our server on another port gets the proof
    for that port, not for its own: the answer tells SessionStart's autostart whether the listener on the port is
    this user's server."""
    return hmac.new(token.encode(), b"subconscious-health\0%d\0" % int(port) + nonce.encode(), "sha256").hexdigest()
