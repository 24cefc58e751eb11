"""What the subconscious injects into Claude Code. Pure functions, no I/O, no Letta client.

Inputs are plain data: agent messages (``id``, ``date``, ``content``) as the Letta API returns
them, newest first, and memory blocks (``label``, ``value``, optional ``description``). Dicts
work too: :func:`as_message` / :func:`as_block` convert.

- whisper mode: new agent messages as ``<letta_message from=... timestamp=...>``, with an
  instruction to acknowledge them briefly;
- full mode: the same, plus ``<letta_context>`` + ``<letta_memory_blocks>`` (one
  ``<letta_memory_block label=... description=...>`` per block) on the first prompt of a session and
  ``<letta_memory_update>`` (``- old`` / ``+ new`` lines) when blocks change;
- PreToolUse: the new part wrapped in ``<letta_update>``, as the hook's JSON
  ``hookSpecificOutput.additionalContext``; nothing at all when nothing is new.

Tag names are fixed (``letta_memory_block``, ``letta_message``, …): a block label is never a tag name, it is
the escaped ``label="…"`` attribute, so an agent steered by a prompt injection cannot name a block
``system-reminder`` and have it render as Claude Code's own ``<system-reminder>``. All text from the agent
or the user is XML-escaped (attributes too), so nothing it writes can close our tags or open new ones.

The agent's messages and the watermark are in :mod:`.messages`, memory blocks and their diffs in
:mod:`.blocks`, escaping and the tag names in :mod:`.escape`; this module fits an injection
into Claude Code's 10,000-character limit and builds each hook's output, and re-exports the names it always
had.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from .blocks import (
    Block,
    BlockChange,
    _change_size,
    _lines,
    _omitted_block,
    _render_change,
    as_block,
    block_diff,
    changed_blocks,
    format_full_context,
    format_memory_update,
)
from .escape import _NOT_XML, TAG_NAMES, escape, escape_attr
from .messages import (
    WHISPER_INSTRUCTION,
    AgentMessage,
    LookBack,
    _text_of,
    as_message,
    format_messages,
    look_back,
    moves_forward,
    new_messages,
    watermark_after,
)

__all__ = [
    "AgentMessage", "Block", "Injection", "as_message", "as_block", "new_messages",
    "format_messages", "block_diff", "changed_blocks", "format_memory_update",
    "format_full_context", "prompt_injection", "pre_tool_injection", "pre_tool_output",
    "BlockChange", "escape", "escape_attr", "TAG_NAMES", "LookBack", "look_back", "watermark_after",
    "moves_forward",
]

# --------------------------------------------------------------------------- Claude Code's limit

INJECTION_CAP = 10_000  # Claude Code cuts a hook's additionalContext (and injected stdout) at this many characters
NOTE_CUTS = (4000, 2000, 1000, 500, 250)  # a note's text is cut to these lengths in turn when the whole does not fit


def _cut_note(m: AgentMessage, limit: int | None) -> AgentMessage:
    if limit is None or len(m.content) <= limit:
        return m
    rest = len(m.content) - limit
    return AgentMessage(m.id, m.date, m.content[:limit].rstrip() + " [… %d more characters]" % rest)


def _fit(render: Callable[[frozenset, frozenset, int | None, int], str], blocks: Sequence[tuple[str, int]],
         changes: Sequence[tuple[str, int]], notes: int, cap: int) -> tuple[str, int]:
    """The fullest rendering of an injection that is at most ``cap`` characters, and how many notes (the
    newest) it leaves for a later hook.

    ``render(hidden_blocks, hidden_changes, note_cut, deferred)`` builds the text. ``blocks`` and
    ``changes`` are (label, size). Given up first, largest first: whole memory blocks, then block changes —
    each then named with its size (the rest stays in the agent's memory); then the newest notes wait for
    the next hook (nothing is lost: they are not recorded as shown); only a single note too long on its own
    is shortened. Nothing is ever cut inside a tag: whole elements go, or a note's text is shortened. If even
    that is too long (thousands of blocks), a one-line summary."""
    hidden_b: frozenset = frozenset()
    hidden_c: frozenset = frozenset()
    text = render(hidden_b, hidden_c, None, 0)
    for label, _ in sorted(blocks, key=lambda x: -x[1]):
        if len(text) <= cap:
            return text, 0
        hidden_b = hidden_b | {label}
        text = render(hidden_b, hidden_c, None, 0)
    for label, _ in sorted(changes, key=lambda x: -x[1]):
        if len(text) <= cap:
            return text, 0
        hidden_c = hidden_c | {label}
        text = render(hidden_b, hidden_c, None, 0)
    deferred = 0
    while len(text) > cap and deferred < notes - 1:
        deferred += 1
        text = render(hidden_b, hidden_c, None, deferred)
    for limit in NOTE_CUTS:
        if len(text) <= cap:
            return text, deferred
        text = render(hidden_b, hidden_c, limit, deferred)
    if len(text) <= cap:
        return text, deferred
    summary = ("<letta_context>The subconscious has %d memory blocks, %d changed blocks and %d new notes: more "
               "than Claude Code lets a hook show. `subconscious memory` and `subconscious messages` show them."
               "</letta_context>" % (len(blocks), len(changes), notes))
    return summary[:cap], 0


# --------------------------------------------------------------------------- per hook

@dataclass(frozen=True, slots=True)
class Injection:
    """What a hook prints (``text``; None = print nothing) and the state to save after printing:
    ``last_seen_id`` and ``block_values`` (the new ``last_block_values``; whisper and off mode
    hand back the old ones unchanged). ``deferred``: ids of the newest notes left for the next hook
    (Claude Code's limit on hook output): not shown, so not to be recorded as shown."""

    text: str | None
    last_seen_id: str | None
    block_values: dict[str, str] | None = field(default=None)
    deferred: tuple[str, ...] = ()


def _deferred(fresh: Sequence[AgentMessage], n: int, seen: str | None) -> tuple[tuple[str, ...], str | None]:
    """(ids of the ``n`` newest notes of ``fresh``, the id seen up to: the newest note shown)."""
    if not n:
        return (), seen
    return tuple(m.id for m in fresh[len(fresh) - n:]), fresh[len(fresh) - n - 1].id


def _copy(values: Mapping[str, str] | None) -> dict[str, str] | None:
    return dict(values) if values is not None else None


def prompt_injection(mode: str, agent_name: str, messages_newest_first: Iterable[Any],
                     last_seen_id: str | None, blocks: Sequence[Any] = (),
                     last_block_values: Mapping[str, str] | None = None, *,
                     agent_description: str = "", conversation_url: str | None = None,
                     sdk_tools: str | None = None) -> Injection:
    """UserPromptSubmit stdout for ``mode`` (``whisper`` | ``full`` | ``off``).

    Full mode shows the context and all blocks when ``last_block_values`` is None (first prompt
    of the session), afterwards only what changed.
    """
    if mode not in ("whisper", "full"):
        return Injection(None, last_seen_id, _copy(last_block_values))
    from ..agent_tools.modes import claude_line  # no imports of its own

    line = claude_line(sdk_tools) if sdk_tools else ""
    fresh, seen = new_messages(messages_newest_first, last_seen_id)
    full = mode == "full"
    bl = [as_block(b) for b in blocks] if full else []
    first = full and last_block_values is None
    changes = changed_blocks(bl, last_block_values) if full else []

    def render(hidden_blocks, hidden_changes, cut, deferred):
        parts = [format_messages(agent_name, [_cut_note(m, cut) for m in fresh[:len(fresh) - deferred]],
                                 tools_line=line, deferred=deferred)]
        if first:
            parts.insert(0, format_full_context(agent_name, bl, agent_description=agent_description,
                                                conversation_url=conversation_url, tools_line=line,
                                                hidden=hidden_blocks))
        elif full:
            parts.append(format_memory_update(changes, hidden_changes))
        return "\n\n".join(p for p in parts if p)

    text, n = _fit(render, [(b.label, len(b.value)) for b in bl] if first else [],
                   [(c.label, _change_size(c)) for c in changes], len(fresh), INJECTION_CAP)
    values = {b.label: b.value for b in bl} if full else _copy(last_block_values)
    deferred, seen = _deferred(fresh, n, seen)
    return Injection(text or None, seen, values, deferred)


def pre_tool_context(text: str) -> str:
    return "<letta_update>\n%s\n</letta_update>" % text


def pre_tool_output(text: str) -> str:
    """The PreToolUse hook's stdout JSON carrying ``text`` to the model, in ``<letta_update>``."""
    return json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "additionalContext": pre_tool_context(text)}})


def pre_tool_injection(mode: str, agent_name: str, messages_newest_first: Iterable[Any],
                       last_seen_id: str | None, blocks: Sequence[Any] = (),
                       last_block_values: Mapping[str, str] | None = None) -> Injection:
    """PreToolUse stdout: new messages (full mode: also block changes) as JSON; None if nothing new.

    Before the first prompt has shown the blocks (``last_block_values`` None) no block is shown here.
    """
    if mode not in ("whisper", "full"):
        return Injection(None, last_seen_id, _copy(last_block_values))
    fresh, seen = new_messages(messages_newest_first, last_seen_id)
    diffs = mode == "full" and last_block_values is not None
    bl = [as_block(b) for b in blocks] if diffs else []
    changes = changed_blocks(bl, last_block_values) if diffs else []

    def render(_hidden_blocks, hidden_changes, cut, deferred):
        parts = [format_messages(agent_name, [_cut_note(m, cut) for m in fresh[:len(fresh) - deferred]],
                                 deferred=deferred),
                 format_memory_update(changes, hidden_changes)]
        return "\n\n".join(p for p in parts if p)

    text, n = _fit(render, [], [(c.label, _change_size(c)) for c in changes], len(fresh),
                   INJECTION_CAP - len(pre_tool_context("")))
    values = {b.label: b.value for b in bl} if diffs else _copy(last_block_values)
    deferred, seen = _deferred(fresh, n, seen)
    return Injection(pre_tool_output(text) if text else None, seen, values, deferred)
