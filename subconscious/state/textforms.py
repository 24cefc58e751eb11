"""Pure text forms of state files: canonical JSON layout and git conflict markers."""

from __future__ import annotations

from json.encoder import encode_basestring as _s  # C; keeps non-ASCII as is (ensure_ascii=False)
from typing import Any

from ..base.atomic import TEMP_PREFIX  # noqa: F401 - atomic-write temp files (re-exported)
from .records import canonical

_ENTRY_KEYS = frozenset(("agentId", "conversationId", "hlc", "host"))


def _leaf(v: Any) -> str:
    """Compact canonical JSON of one value, with a fast path for the two entry shapes we write most
    (``encode_basestring`` raises TypeError for a non-string, which sends it down the general path)."""
    if type(v) is dict:
        try:
            if len(v) == 4 and v.keys() == _ENTRY_KEYS:
                return f'{{"agentId":{_s(v["agentId"])},"conversationId":{_s(v["conversationId"])},"hlc":{_s(v["hlc"])},"host":{_s(v["host"])}}}'
            if len(v) == 3 and v.get("deleted") is True:
                return f'{{"deleted":true,"hlc":{_s(v["hlc"])},"host":{_s(v["host"])}}}'
        except (TypeError, KeyError):
            pass
    return canonical(v)



def dumps_canonical(value: Any, expand: int = 1) -> str:
    """JSON with sorted keys and one entry per line down to ``expand`` levels of objects.

    ``expand=1`` puts each top-level entry on its own line (conversations.json), ``expand=2`` each
    entry of each top-level map (a shard), so a git diff or merge touches only the entries that changed.
    """

    def render(v: Any, depth: int, indent: str) -> str:
        if isinstance(v, dict) and v and depth < expand:
            inner = indent + "  "
            items = [
                f"{inner}{_s(k)}: {render(v[k], depth + 1, inner)}"
                for k in sorted(v)
            ]
            return "{\n" + ",\n".join(items) + "\n" + indent + "}"
        return _leaf(v)

    return render(value, 0, "") + "\n"


def _lines(text: str) -> list[str]:
    """Lines as git sees them: split on ``\n`` only (``str.splitlines`` also splits on U+0085 etc.)."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


_OURS, _BASE, _SEP, _THEIRS = "<<<<<<<", "|||||||", "=======", ">>>>>>>"


def has_conflict_markers(text: str) -> bool:
    lines = _lines(text)
    return any(line.startswith(_OURS) for line in lines) and any(line.startswith(_THEIRS) for line in lines)


def split_conflict_sides(text: str) -> list[str]:
    """The whole-file versions a text with git conflict markers stands for: ours, theirs (and base).

    Lines outside conflict hunks belong to every side. Works for ``merge`` and ``diff3``/``zdiff3``
    styles; returns ``[text]`` when there are no well-formed markers.
    """
    sides: list[list[str]] = [[], [], []]  # ours, theirs, base
    state = None  # None | "ours" | "base" | "theirs"
    saw = saw_base = False
    for line in _lines(text):
        if line.startswith(_OURS) and state is None:
            state, saw = "ours", True
        elif line.startswith(_BASE) and state == "ours":
            state, saw_base = "base", True
        elif line.startswith(_SEP) and state in ("ours", "base"):
            state = "theirs"
        elif line.startswith(_THEIRS) and state == "theirs":
            state = None
        elif state is None:
            for s in sides:
                s.append(line)
        elif state == "ours":
            sides[0].append(line)
        elif state == "base":
            sides[2].append(line)
        else:
            sides[1].append(line)
    if not saw or state is not None:
        return [text]
    out = ["".join(sides[0]), "".join(sides[1])]
    if saw_base and "".join(sides[2]) not in out:
        out.append("".join(sides[2]))
    return out
