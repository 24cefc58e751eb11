"""LETTA_HOME checks: unexpanded variables and places where state would end up somewhere odd."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from ..config import STATE_SUBDIR, ConfigError, expand_letta_home
from .findings import ERROR, INFO, WARNING, Finding

_LITERAL_VARS = ("$HOME", "${HOME}", "~", "%USERPROFILE%", "$LETTA_HOME")


def letta_home_findings(env: Mapping[str, str], cwd: str) -> tuple[list[Finding], Path | None]:
    """Findings about LETTA_HOME, and the state dir to inspect (None when there is none)."""
    raw = env.get("LETTA_HOME")
    user_home = env.get("HOME") or str(Path.home())
    rows: list[Finding] = []
    if raw is None:
        rows.append(Finding(
            "letta-home", INFO, str(Path(cwd) / STATE_SUBDIR),
            "LETTA_HOME is not set: state lives in each project's own .letta/claude (like the upstream "
            "plugin), not shared between projects or machines; set LETTA_HOME to a synced directory to share it"))
        letta_home = Path(cwd)
    else:
        try:
            letta_home = expand_letta_home(raw, user_home, cwd)
        except ConfigError as exc:
            return [Finding("letta-home", ERROR, raw, str(exc))], None
        text = raw.strip()
        expanded = text.replace("${HOME}", user_home).replace("$HOME", user_home)
        if not (expanded.startswith("/") or expanded.startswith("~") or Path(expanded).is_absolute()):
            rows.append(Finding(
                "letta-home", WARNING, raw,
                f"LETTA_HOME={raw!r} is relative: it resolves against each session's project directory "
                f"(here {letta_home}); write it out in full"))
        parts = Path(letta_home).parts
        if parts[-2:] == (".letta", "claude") or (parts and parts[-1] == ".letta"):
            rows.append(Finding(
                "letta-home", WARNING, str(letta_home),
                f"LETTA_HOME={raw!r} already ends in {'/'.join(parts[-2:]) if parts[-1] == 'claude' else '.letta'}: "
                f"state would live in {letta_home / STATE_SUBDIR}; set LETTA_HOME to the directory that holds .letta/"))
        if Path(letta_home) == Path(letta_home).parent:
            rows.append(Finding("letta-home", WARNING, str(letta_home),
                                "LETTA_HOME is the file system root; give it a directory of its own"))
        if letta_home.exists() and not letta_home.is_dir():
            rows.append(Finding("letta-home", ERROR, str(letta_home), f"LETTA_HOME {letta_home} is a file, not a directory"))
    odd = [part for part in Path(letta_home).parts if part in _LITERAL_VARS]
    if odd:
        rows.append(Finding(
            "letta-home", WARNING, str(letta_home),
            f"the state path holds a directory literally named {odd[0]!r}: an unexpanded variable "
            "made it (upstream issue #48); move its .letta/ to the real place"))
    for name in ("$HOME", "${HOME}"):
        stray = Path(cwd) / name / STATE_SUBDIR
        if stray.is_dir() and stray != letta_home / STATE_SUBDIR:
            rows.append(Finding(
                "letta-home", WARNING, str(stray),
                f"found state under a directory literally named {name!r} in {cwd}: left by an unexpanded "
                f"LETTA_HOME (upstream issue #48); its entries are not part of {letta_home / STATE_SUBDIR}"))
    return rows, letta_home / STATE_SUBDIR


def is_inside(path: Path, root: Path) -> bool:
    try:
        Path(os.path.abspath(path)).relative_to(os.path.abspath(root))
        return True
    except ValueError:
        return False
