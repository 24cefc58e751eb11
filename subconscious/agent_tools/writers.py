"""Write and Edit (LETTA_SDK_TOOLS=full only), confined like the readers: inside the project, never in
.git, never a file the ignore rules exclude or one named like a credential, and never a place whose
contents run code later outside any sandbox (denied.py: .claude/, .letta/, .git anywhere, .envrc,
.vscode/, CI config...), names compared case-insensitively; never a file that would make a directory a
git repository whatever its name (HEAD beside objects/, refs/ or commondir), nor one inside such a
directory. Edit refuses a file Read would show redacted (secrets, <private> blocks: an edit that splits a
secret, or whether old_string is found, would tell what redaction hides); an ignore file (.gitignore) may
only gain patterns that hide more. Files are replaced atomically (a temporary file in the same directory,
then a rename), opened without following links."""
from __future__ import annotations

import os
import secrets
import stat
from typing import Any, Mapping

from .confine import Refused, Root, Target, ToolError, _CLOEXEC, _DIRECTORY, _HAS_DIR_FD, _NOFOLLOW, hooks_dir, within
from .denied import ignore_edit_refusal, is_ignore_file, repo_layout, write_denied
from .limits import Limits
from .readers import SNIFF, _str, looks_binary

__all__ = ["write", "edit"]


def _checked(root: Root, path: str) -> Target:
    """Root.resolve, then the write-only rules: the path as given and as resolved (a link inside the
    project may lead to .claude/) must both be allowed."""
    t = root.resolve(path, what="file_path")
    hooks = hooks_dir(root.repo)
    if hooks and within(t.real, hooks):
        raise Refused(f"{path!r} is in the directory this repository runs its git hooks from (core.hooksPath); "
                      "the tools never write there")
    lexical = os.path.normpath(os.path.join(root.given, path))
    for rel in {t.rel, os.path.relpath(lexical, root.given).replace(os.sep, "/")}:
        why = write_denied(rel) if not rel.startswith("..") else None
        if why:
            raise Refused(f"{path!r}: {why}")
    return t


def _parent_fd(root: Root, rel: str, create: bool) -> tuple[int, str]:
    """fd of the directory that holds ``rel`` (made if ``create``), walking down with O_NOFOLLOW."""
    parts = rel.split("/")
    fd = os.open(root.path, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    try:
        for k, part in enumerate(parts):
            _no_repo(fd, part, "/".join(parts[:k]))
            if k == len(parts) - 1:
                break
            try:
                nxt = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(part, 0o777, dir_fd=fd)
                nxt = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except OSError as e:
        os.close(fd)
        raise Refused(f"{rel}: cannot reach its directory without following a link ({e.strerror})") from None
    return fd, parts[-1]


def _no_repo(fd: int, name: str, here: str) -> None:
    """Refuse when the directory ``fd`` is, or with ``name`` in it would be, a git repository by its layout."""
    with os.scandir(fd) as it:
        names = [e.name for e in it]
    if repo_layout(names + [name]):
        raise Refused(f"{here or '.'}: a directory holding HEAD beside objects/, refs/ or commondir is a git repository "
                      "whatever its name (host git obeys its config and hooks); the tools never create or write one")


def _current(root: Root, t: Target, limits: Limits) -> str | None:
    """The file's text now (None if it does not exist)."""
    if not t.exists:
        return None
    with os.fdopen(root.open_file(t), "rb") as fh:
        return fh.read(limits.max_file_bytes + 1).decode("utf-8", errors="replace")


def _ignore_rules_kept(root: Root, t: Target, new: str, limits: Limits) -> None:
    if is_ignore_file(t.rel.rsplit("/", 1)[-1]):
        why = ignore_edit_refusal(_current(root, t, limits), new)
        if why:
            raise Refused(f"{t.rel}: {why}; not written")


def _redacted_by_read(text: str) -> bool:
    """Would Read show this text changed (a secret redacted, a <private> block hidden)?"""
    from ..privacy.private import hide_private
    from ..privacy.redact import redact
    return redact(text) != text or hide_private(text) != text


def _replace(root: Root, t: Target, data: bytes) -> None:
    if not _HAS_DIR_FD:
        raise ToolError("writing files is supported on Linux and macOS only")
    dfd, name = _parent_fd(root, t.rel, create=True)
    try:
        mode = 0o666
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
                raise Refused(f"{t.rel}: not a regular file; not written")
            mode = stat.S_IMODE(st.st_mode)
        except FileNotFoundError:
            pass
        tmp = f".{name}.subconscious-{secrets.token_hex(4)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, mode, dir_fd=dfd)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            if mode != 0o666:
                os.chmod(tmp, mode, dir_fd=dfd, follow_symlinks=False) if os.chmod in os.supports_dir_fd else None
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
            raise
    finally:
        os.close(dfd)


def write(root: Root, args: Mapping[str, Any], limits: Limits, deadline: float) -> str:
    path = _str(args, "file_path", required=True)
    content = args.get("content")
    if not isinstance(content, str):
        raise ToolError("content must be a string")
    data = content.encode("utf-8")
    if len(data) > limits.max_write_bytes:
        raise ToolError(f"content is {len(data):,} bytes, over the {limits.max_write_bytes:,}-byte limit")
    t = _checked(root, path)
    if t.is_dir or not t.rel:
        raise ToolError(f"{t.shown} is a directory")
    _ignore_rules_kept(root, t, content, limits)
    _replace(root, t, data)
    return f"{'Overwrote' if t.exists else 'Created'} {t.rel} ({len(data):,} bytes)."


def edit(root: Root, args: Mapping[str, Any], limits: Limits, deadline: float) -> str:
    path = _str(args, "file_path", required=True)
    old, new = args.get("old_string"), args.get("new_string")
    if not isinstance(old, str) or not old:
        raise ToolError("old_string must be a non-empty string")
    if not isinstance(new, str):
        raise ToolError("new_string must be a string")
    if old == new:
        raise ToolError("old_string and new_string are the same; nothing to do")
    replace_all = args.get("replace_all") in (True, "true", 1)
    t = _checked(root, path)
    if not t.exists:
        raise ToolError(f"{path}: no such file in the project (use Write to create it)")
    if t.is_dir:
        raise ToolError(f"{t.shown} is a directory")
    with os.fdopen(root.open_file(t), "rb") as fh:
        data = fh.read(limits.max_file_bytes + 1)
    if len(data) > limits.max_file_bytes:
        raise ToolError(f"{t.rel} is over the {limits.max_file_bytes:,}-byte limit for editing")
    if looks_binary(data[:SNIFF]):
        raise ToolError(f"{t.rel} is a binary file; not edited")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{t.rel} is not UTF-8 text; not edited") from None
    if _redacted_by_read(text):  # before anything about old_string is said: found / not found is an oracle
        raise Refused(f"{t.rel} holds text Read shows redacted (a secret or a <private> block); Edit would be a way to "
                      "read it (whether old_string is found, or a secret split past redaction), so it is not edited")
    n = text.count(old)
    if n == 0:
        raise ToolError(f"old_string was not found in {t.rel}")
    if n > 1 and not replace_all:
        raise ToolError(f"old_string occurs {n} times in {t.rel}; give more context or set replace_all")
    new_text = text.replace(old, new) if replace_all else text.replace(old, new, 1)
    _ignore_rules_kept(root, t, new_text, limits)
    out = new_text.encode("utf-8")
    if len(out) > limits.max_write_bytes:
        raise ToolError(f"the edited file would be {len(out):,} bytes, over the {limits.max_write_bytes:,}-byte limit")
    _replace(root, t, out)
    return f"Edited {t.rel}: {n if replace_all else 1} replacement(s)."
