"""The user's ignore rules, as git reads them (a documented subset). Pure except :func:`load_rules_file`.

What is honoured
    ``.gitignore`` in the project directory and in every directory below it (each applies to the paths
    under its own directory), ``.git/info/exclude`` of the project, and the global excludes file at
    git's default place (``$XDG_CONFIG_HOME/git/ignore``, else ``~/.config/git/ignore``). Precedence is
    git's: the global file, then info/exclude, then ``.gitignore`` files from the top down; the last
    matching pattern decides. A path inside an ignored directory is ignored, whatever later ``!``
    patterns say (git cannot re-include it either).

Pattern syntax (gitignore(5))
    blank lines and ``#`` comments; ``\\#`` / ``\\!`` for a literal first character; trailing spaces
    dropped unless escaped; ``!`` negates; a trailing ``/`` matches directories only; a ``/`` at the
    start or in the middle anchors the pattern to its file's directory, otherwise it matches a name at
    any depth; ``*`` and ``?`` do not match ``/``; ``[abc]``, ``[a-z]``, ``[!a]`` / ``[^a]``; ``\\x``
    escapes; ``**/`` at the start, ``/**`` at the end and ``/**/`` in the middle as git documents them.

Case: matching is case-sensitive (git's default on Linux) unless ``ignore_case`` is given, as the
confinement does on macOS and Windows, whose filesystems open ``Secrets.YML`` for ``secrets.yml`` (git
sets ``core.ignoreCase`` there too).

Not honoured: ``core.excludesFile`` set in a git config (only the default global file is read),
``core.ignoreCase`` as a setting, POSIX classes such as ``[[:alpha:]]`` (the pattern is then taken
literally and usually matches nothing).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

__all__ = ["Pattern", "parse_line", "parse_lines", "glob_regex", "RuleSet", "load_rules_file",
           "global_excludes_path", "MAX_RULES_FILE_BYTES"]

MAX_RULES_FILE_BYTES = 256 * 1024  # a bigger ignore file is read up to this size


@dataclass(frozen=True, slots=True)
class Pattern:
    base: str          # directory of the rules file, relative to the project ("" = the project itself)
    text: str          # the pattern as written (after unescaping the leading ! / #), for messages
    regex: re.Pattern[str]
    negate: bool
    dir_only: bool
    ignore_case: bool = False

    def matches(self, rel: str, is_dir: bool) -> bool:
        """Does this pattern match ``rel`` (relative to the project, '/'-separated)?"""
        if self.dir_only and not is_dir:
            return False
        if self.base:
            head = rel[:len(self.base) + 1]
            if head != self.base + "/" and not (self.ignore_case and head.casefold() == (self.base + "/").casefold()):
                return False
            rel = rel[len(self.base) + 1:]
        return self.regex.match(rel) is not None


def _class(glob: str, i: int) -> tuple[str, int] | None:
    """A ``[...]`` class starting at ``glob[i] == '['`` -> (regex, index after it); None if unclosed."""
    j = i + 1
    negate = j < len(glob) and glob[j] in "!^"
    if negate:
        j += 1
    items: list[str] = []
    first, empty_range = True, False
    while j < len(glob):
        c = glob[j]
        if c == "]" and not first:
            body = "".join(items)
            if not body:
                return (("[^/]" if negate else "(?!)"), j + 1) if empty_range else None
            return ("[^/%s]" % body if negate else "(?!/)[%s]" % body), j + 1
        first = False
        if c == "\\" and j + 1 < len(glob):
            j += 1
            c = glob[j]
        if j + 2 < len(glob) and glob[j + 1] == "-" and glob[j + 2] != "]":
            hi = glob[j + 2]
            if hi == "\\" and j + 3 < len(glob):
                hi = glob[j + 3]
                j += 1
            if ord(hi) >= ord(c):
                items.append("%s-%s" % (re.escape(c), re.escape(hi)))
            else:
                empty_range = True  # a reversed range matches nothing
            j += 3
            continue
        items.append(re.escape(c))
        j += 1
    return None


def glob_regex(glob: str) -> str:
    """Regex source (no anchors) for a glob where ``*``/``?`` stop at '/' and ``**`` spans directories
    when it stands alone between slashes (``**/x``, ``x/**``, ``x/**/y``)."""
    out: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        if c == "*":
            j = i
            while j < n and glob[j] == "*":
                j += 1
            run = j - i
            at_start = i == 0 or glob[i - 1] == "/"
            at_end = j == n or glob[j] == "/"
            if run >= 2 and at_start and at_end:
                if j == n:           # "x/**" (or a lone "**"): everything below
                    out.append(".*")
                    i = j
                else:                # "**/": zero or more directories
                    out.append("(?:.*/)?")
                    i = j + 1
                continue
            out.append("[^/]*")
            i = j
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            cls = _class(glob, i)
            if cls is None:
                out.append(re.escape("["))
                i += 1
            else:
                out.append(cls[0])
                i = cls[1]
        elif c == "\\":
            if i + 1 < n:
                out.append(re.escape(glob[i + 1]))
                i += 2
            else:            # a trailing backslash matches nothing, as in git
                out.append("(?!)")
                i += 1
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


def _strip_trailing_spaces(line: str) -> str:
    end = len(line)
    while end > 0 and line[end - 1] == " ":
        # a space is kept if preceded by an odd number of backslashes
        k, slashes = end - 2, 0
        while k >= 0 and line[k] == "\\":
            slashes += 1
            k -= 1
        if slashes % 2 == 1:
            break
        end -= 1
    return line[:end]


def parse_line(line: str, base: str = "", ignore_case: bool = False) -> Pattern | None:
    """One line of an ignore file -> Pattern (None for blanks, comments and lines that mean nothing)."""
    line = line.rstrip("\r\n")
    if line.endswith("\r"):
        line = line[:-1]
    line = _strip_trailing_spaces(line)
    if not line or line.startswith("#"):
        return None
    negate = False
    if line.startswith("!"):
        negate, line = True, line[1:]
    elif line.startswith("\\!") or line.startswith("\\#"):
        line = line[1:]
    if not line:
        return None
    dir_only = False
    if line.endswith("/") and not line.endswith("\\/"):
        dir_only, line = True, line.rstrip("/")
        if not line:
            return None  # "/" alone matches nothing
    anchored = "/" in line
    if line.startswith("/"):
        line = line[1:]
        if not line:
            return None
    body = glob_regex(line)
    source = ("" if anchored else "(?:.*/)?") + body
    flags = re.S | (re.IGNORECASE if ignore_case else 0)
    return Pattern(base, line, re.compile("^(?:%s)$" % source, flags), negate, dir_only, ignore_case)


def parse_lines(lines: Iterable[str], base: str = "", ignore_case: bool = False) -> tuple[Pattern, ...]:
    out = []
    for line in lines:
        p = parse_line(line, base, ignore_case)
        if p is not None:
            out.append(p)
    return tuple(out)


def _parents(rel: str) -> list[str]:
    """'a/b/c' -> ['a', 'a/b'] (the directories above it, top first)."""
    parts = rel.split("/")
    return ["/".join(parts[:k]) for k in range(1, len(parts))]


class RuleSet:
    """Every pattern that applies in a project, by the directory of its file.

    ``outer``: patterns from the global file and info/exclude (base ""), lowest precedence.
    ``by_dir``: {directory rel ("" = root): patterns of that directory's .gitignore}.
    ``loader(dir_rel)`` (optional) reads a directory's .gitignore lazily the first time it is needed.
    """

    def __init__(self, outer: Sequence[Pattern] = (), by_dir: Mapping[str, Sequence[Pattern]] | None = None,
                 loader=None):
        self.outer = tuple(outer)
        self.by_dir: dict[str, tuple[Pattern, ...]] = {k: tuple(v) for k, v in (by_dir or {}).items()}
        self.loader = loader

    def _dir_patterns(self, d: str) -> tuple[Pattern, ...]:
        got = self.by_dir.get(d)
        if got is None:
            got = tuple(self.loader(d)) if self.loader is not None else ()
            self.by_dir[d] = got
        return got

    def _decide(self, rel: str, is_dir: bool) -> bool:
        """git's last-match-wins for ``rel`` alone (its parents are not looked at here)."""
        dirs = [""] + _parents(rel)
        verdict = False
        for p in self.outer:
            if p.matches(rel, is_dir):
                verdict = not p.negate
        for d in dirs:
            for p in self._dir_patterns(d):
                if p.matches(rel, is_dir):
                    verdict = not p.negate
        return verdict

    def ignored(self, rel: str, is_dir: bool) -> bool:
        """Is ``rel`` (project-relative, '/'-separated, no '.' or '..') excluded, directly or because a
        directory above it is?"""
        if rel in ("", "."):
            return False
        for parent in _parents(rel):
            if self._decide(parent, True):
                return True
        return self._decide(rel, is_dir)

    def ignored_here(self, rel: str, is_dir: bool) -> bool:
        """Like :meth:`ignored` for a walker that has already checked (and kept) every parent."""
        return self._decide(rel, is_dir)


def load_rules_file(path: str, base: str = "", ignore_case: bool = False) -> tuple[Pattern, ...]:
    """Patterns of one ignore file (missing or unreadable: none). Never follows the file past
    ``MAX_RULES_FILE_BYTES``."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_RULES_FILE_BYTES)
    except OSError:
        return ()
    return parse_lines(data.decode("utf-8", errors="replace").split("\n"), base, ignore_case)


def global_excludes_path(env: Mapping[str, str]) -> str | None:
    xdg = env.get("XDG_CONFIG_HOME")
    if xdg:
        return os.path.join(xdg, "git", "ignore")
    home = env.get("HOME") or os.path.expanduser("~")
    return os.path.join(home, ".config", "git", "ignore") if home and home != "~" else None
