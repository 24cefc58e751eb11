"""Upstream once wrote ``<letta>…</letta>`` sections into CLAUDE.md; we never do, and remove them."""

from __future__ import annotations

import re
from pathlib import Path

_SECTION = re.compile(r"\n*<letta>.*?</letta>[ \t]*\n?", re.DOTALL)


def strip_letta_sections(text: str) -> str:
    """``text`` without ``<letta>`` sections (pure; the rest is left byte for byte)."""
    out = _SECTION.sub("\n", text)
    if out != text:
        out = out.strip("\n") + "\n" if out.strip() else ""
    return out


def clean(project_dir: Path) -> bool:
    """Remove legacy sections from ``<project>/CLAUDE.md``; True when the file changed."""
    from ..state.files import atomic_write

    path = project_dir / "CLAUDE.md"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    cleaned = strip_letta_sections(text)
    if cleaned == text:
        return False
    mode = path.stat().st_mode & 0o777
    atomic_write(path, cleaned)
    path.chmod(mode)  # CLAUDE.md is the user's file: keep its permissions
    return True
