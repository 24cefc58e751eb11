"""Memory blocks as the hooks show them: the full ``<letta_context>`` + ``<letta_memory_blocks>`` of a
session's first prompt, and ``<letta_memory_update>`` diffs (``- old`` / ``+ new`` lines) when blocks change.
A block whose label is hidden (too long for Claude Code's limit) is named with its size only. Pure.

A block label is never a tag name: it is the escaped ``label="…"`` attribute of a fixed tag.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Container, Mapping, Sequence

from .escape import escape, escape_attr


@dataclass(frozen=True, slots=True)
class Block:
    label: str
    value: str
    description: str = ""


def as_block(b: Block | Mapping[str, Any]) -> Block:
    if isinstance(b, Block):
        return b
    return Block(str(b.get("label", "")), str(b.get("value") or ""), str(b.get("description") or ""))


# --------------------------------------------------------------------------- blocks

def _lines(value: str) -> list[str]:
    return [s for s in (line.strip() for line in value.split("\n")) if s]


def block_diff(old: str, new: str) -> tuple[list[str], list[str]]:
    """``(removed, added)``: trimmed, non-empty lines only in ``old`` / only in ``new``, each in
    its own text's order (duplicates kept)."""
    old_lines, new_lines = _lines(old), _lines(new)
    old_set, new_set = set(old_lines), set(new_lines)
    return [s for s in old_lines if s not in new_set], [s for s in new_lines if s not in old_set]


@dataclass(frozen=True, slots=True)
class BlockChange:
    label: str
    status: str               # "new" | "modified" | "removed"
    value: str = ""           # full value for new blocks / whitespace-only changes
    removed: tuple[str, ...] = ()
    added: tuple[str, ...] = ()


def changed_blocks(blocks: Sequence[Block], last_values: Mapping[str, str] | None) -> list[BlockChange]:
    """How ``blocks`` differ from the values last shown (``None``: nothing shown yet -> no changes)."""
    if last_values is None:
        return []
    out: list[BlockChange] = []
    labels = set()
    for b in blocks:
        labels.add(b.label)
        old = last_values.get(b.label)
        if old is None:
            out.append(BlockChange(b.label, "new", value=b.value))
        elif old != b.value:
            removed, added = block_diff(old, b.value)
            if removed or added:
                out.append(BlockChange(b.label, "modified", removed=tuple(removed), added=tuple(added)))
            else:
                out.append(BlockChange(b.label, "modified", value=b.value))
    for label in last_values:
        if label not in labels:
            out.append(BlockChange(label, "removed"))
    return out


def _render_change(c: BlockChange) -> str:
    label = escape_attr(c.label)
    if c.status == "removed":
        return '<letta_memory_block label="%s" status="removed"/>' % label
    if c.removed or c.added:
        body = "\n".join(["- " + escape(s) for s in c.removed] + ["+ " + escape(s) for s in c.added])
    else:
        body = escape(c.value)
    return '<letta_memory_block label="%s" status="%s">\n%s\n</letta_memory_block>' % (label, escape_attr(c.status),
                                                                                     body)


def _change_size(c: BlockChange) -> int:
    return len(c.value) + sum(len(x) + 3 for x in c.removed + c.added)


def format_memory_update(changes: Sequence[BlockChange], hidden: Container[str] = ()) -> str | None:
    """``<letta_memory_update>``; a change whose label is in ``hidden`` is named with its size only."""
    if not changes:
        return None
    return ("<letta_memory_update>\n<!-- memory blocks changed since they were last shown (diff) -->\n%s\n"
            "</letta_memory_update>" % "\n".join(
                _omitted_block(c.label, _change_size(c), c.status) if c.label in hidden else _render_change(c)
                for c in changes))


def format_full_context(agent_name: str, blocks: Sequence[Block], *, agent_description: str = "",
                        conversation_url: str | None = None, tools_line: str = "",
                        hidden: Container[str] = ()) -> str:
    """``<letta_context>`` + ``<letta_memory_blocks>``: shown on a session's first prompt in full mode.
    A block whose label is in ``hidden`` is named with its size only (``shown="no"``)."""
    about = [
        'Subconscious layer: a Letta agent named "%s" runs alongside this session.' % escape(agent_name),
        "Description: %s" % escape(agent_description or "none given"),
    ]
    if conversation_url:
        about.append("Conversation: %s" % escape(conversation_url))
    about.append("It keeps memory across sessions (and across the user's machines), reads this session as "
                 "it happens, and sends notes as letta_message elements before prompts and tool calls. "
                 "Anything you write here reaches it; it may answer on a later turn. Its memory blocks "
                 "follow; use them as background knowledge.")
    if tools_line:
        about.append(escape(tools_line))
    if any(b.label in hidden for b in blocks):
        about.append('Blocks marked shown="no" are too long to show here (Claude Code limits what a hook may '
                     "add); their size is given, and `subconscious memory` shows them.")
    if blocks:
        body = "\n".join(_omitted_block(b.label, len(b.value)) if b.label in hidden else
                         '<letta_memory_block label="%s" description="%s">\n%s\n</letta_memory_block>'
                         % (escape_attr(b.label), escape_attr(b.description), escape(b.value)) for b in blocks)
    else:
        body = "<!-- no memory blocks -->"
    return ("<letta_context>\n%s\n</letta_context>\n<letta_memory_blocks>\n%s\n</letta_memory_blocks>"
            % ("\n".join(about), body))


def _omitted_block(label: str, size: int, status: str | None = None) -> str:
    extra = ' status="%s"' % escape_attr(status) if status else ""
    return '<letta_memory_block label="%s"%s size="%d" shown="no"/>' % (escape_attr(label), extra, size)
