"""Claude Code transcripts -> what the subconscious agent reads. Pure functions, no I/O.

A transcript is the JSONL file Claude Code writes at ``transcript_path`` (2.1.x: one line per
user prompt, per tool result and per assistant content block; plus attachment, system and
bookkeeping lines). :func:`parse_line` turns one line into typed entries, :func:`build_update`
turns the lines after a cursor into the ``<claude_code_session_update>`` message.

This module holds the update's assembly (the cursor, ``max_chars``, inserts, answers to skip) and a
subagent's messages. Parsing lines is in :mod:`.transcript_lines`, formatting and the update's XML in
:mod:`.update_xml`, delivery keys and markers in :mod:`.delivery_keys`, the start message in
:mod:`.start_message`; the names this module always offered are re-exported from them.

The cursor
    ``lines`` is the list of *complete* lines of the file, in order (:func:`complete_lines`
    drops an unterminated last line that Claude Code may still be writing). Blank and
    unparseable lines count as lines. The cursor is the index of the last line already
    processed; ``-1`` means none (a new session). :func:`build_update` reads
    ``lines[cursor + 1:]`` and returns the new cursor, normally ``len(lines) - 1``. This is
    upstream's ``lastProcessedIndex`` for any file without blank or broken lines.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .delivery_keys import answer_digest, delivery_key, lines_marker
from .redact import REDACTED, find_secrets, redact  # re-exported: applied to every transcript text
from .start_message import session_start_message
from .transcript_lines import (
    AssistantText,
    Command,
    Entry,
    ParsedLine,
    Summary,
    Thinking,
    ToolResult,
    ToolUse,
    UserText,
    complete_lines,
    line_uuid,
    parse_line,
)
from .update_xml import (
    COMMAND_CUT,
    INPUT_JSON_CUT,
    RESULT_CUT,
    THINKING_CUT,
    TRUNCATED,
    UPDATE_INSTRUCTIONS,
    Message,
    cut,
    format_entries,
    project_element,
    render_update,
    tool_summary,
    xml_escape,
)

__all__ = [
    "UserText", "AssistantText", "Thinking", "ToolUse", "ToolResult", "Summary", "Entry",
    "ParsedLine", "Message", "Update", "Insert", "answer_digest", "subagent_messages", "complete_lines", "parse_line", "tool_summary",
    "format_entries", "render_update", "build_update", "session_update", "session_start_message",
    "xml_escape", "cut", "redact", "find_secrets",
    "RESULT_CUT", "THINKING_CUT", "COMMAND_CUT", "INPUT_JSON_CUT", "REDACTED",
]

MESSAGE_CUT_FLOOR = 2000  # with max_chars, a single message longer than max(max_chars, this) is cut


@dataclass(frozen=True, slots=True)
class Update:
    """Result of :func:`build_update`.

    ``payload``: the XML to send, or None when the new lines hold nothing to send.
    ``cursor``: the new cursor (save it once the payload was delivered, or at once if None).
    ``invalid_lines``: indices of lines after the old cursor that could not be parsed.
    ``more``: True when ``max_chars`` stopped early; call again from ``cursor``.
    ``key``: the delivery key of the payload (see :func:`delivery_key`), None without a payload.
    """

    payload: str | None
    cursor: int
    messages: tuple[Message, ...]
    invalid_lines: tuple[int, ...]
    more: bool = False
    key: str | None = None
    inserted: tuple[str, ...] = ()  # keys of the inserts the payload carries
    skipped: tuple[str, ...] = ()  # digests of answers left out (delivered before from the Stop hook's input)


@dataclass(frozen=True, slots=True)
class Insert:
    """Messages that are not transcript lines of the session's file, placed before its line ``at`` (an index
    into ``lines``; at or past the end: after the last line): a subagent's own work, the news that Claude
    Code compacted the session, a final answer the file had not recorded yet. ``key`` names it in the
    delivery key, so a payload with other inserts is another delivery."""

    at: int
    key: str
    messages: tuple[Message, ...]


def subagent_messages(lines: Sequence[str], agent_type: str, agent_id: str = "", *,
                      max_chars: int | None = None, redact_secrets: bool = True,
                      private_paths: Sequence[str] = ()) -> tuple[Message, ...]:
    """A subagent's transcript (``agent_transcript_path``: its task, tool calls, results and report) as
    messages of role ``subagent`` labelled with its type; bounded by ``max_chars`` (the rest is named, not
    sent). Empty when it holds nothing to send."""
    names: dict[str, str] = {}
    inputs: dict[str, Any] = {}
    out: list[Message] = []
    size, left = 0, 0
    for line in lines:
        p = parse_line(line, sidechain=True)
        if p.status != "entries":
            continue
        for e in p.entries:
            if isinstance(e, ToolUse):
                names[e.id] = e.name
                inputs[e.id] = e.input
        entries = tuple(Summary(e.text) if isinstance(e, UserText) and not out else e for e in p.entries)
        for m in format_entries(entries, names, redact_secrets, private_paths, inputs):
            if max_chars is not None and size >= max_chars:
                left += 1
                continue
            text = m.text.replace("[Session Summary]: ", "[Task]: ", 1) if not out else m.text
            if max_chars is not None and len(text) > max(max_chars - size, MESSAGE_CUT_FLOOR):
                text = cut(text, max(max_chars - size, MESSAGE_CUT_FLOOR))
            out.append(Message("subagent", text, agent_type))
            size += len(text)
    if not out:
        return ()
    head = "[Subagent %s%s ran inside this session; its own work follows]" % (
        agent_type or "(no type)", " (agent %s)" % agent_id if agent_id else "")
    tail = ([Message("subagent", "[%d more messages of this subagent are not shown]" % left, agent_type)]
            if left else [])
    return (Message("system", head), *out, *tail)


def _tool_names(lines: Sequence[str], upto: int, wanted: set[str], known: dict[str, str],
                inputs: dict[str, Any] | None = None) -> dict[str, str]:
    """Find names (and, into ``inputs``, the inputs) for tool_use ids used before the cursor (only lines
    mentioning them are parsed)."""
    names = dict(known)
    missing = {i for i in wanted if i and i not in names}
    for idx in range(upto, -1, -1):
        if not missing:
            break
        line = lines[idx]
        if '"tool_use"' not in line or not any(m in line for m in missing):
            continue
        for e in reversed(parse_line(line).entries):  # the latest use of an id wins
            if isinstance(e, ToolUse) and e.id in missing:
                names[e.id] = e.name
                if inputs is not None:
                    inputs[e.id] = e.input
                missing.discard(e.id)
    return names


def _content_before(lines: Sequence[str], idx: int) -> bool:
    """Whether a line before ``idx`` has content (a compaction summary after such a line summarises lines that
    were, or will be, delivered themselves)."""
    for j in range(idx):
        if '"user"' in lines[j] or '"assistant"' in lines[j]:
            p = parse_line(lines[j])
            if p.status == "entries" and not all(isinstance(e, Summary) for e in p.entries):
                return True
    return False


def build_update(lines: Sequence[str], cursor: int, session_id: str, *,
                 max_chars: int | None = None, redact_secrets: bool = True, index_offset: int = 0,
                 project: Mapping[str, str] | None = None, private_paths: Sequence[str] = (),
                 inserts: Sequence[Insert] = (), skip_answers: Mapping[str, int] | None = None) -> Update:
    """Format ``lines[cursor + 1:]`` as one ``<claude_code_session_update>``.

    With ``max_chars``, stop after the line whose messages push the transcript past that many
    characters (at least one line with content is always taken; a single message longer than that is cut
    to it) and set ``more``. A compaction summary that follows lines with content is left out: those lines
    are delivered themselves. ``index_offset`` is added to line numbers in the marker (the worker's cursor
    counts lines of earlier versions of a rewritten transcript). ``project``: the session's project identity
    (:meth:`subconscious.project.Project.attrs`), carried by the update. ``private_paths``: the globs of
    SUBCONSCIOUS_PRIVATE_PATHS (results of tool calls on those paths are not sent: private.py).
    ``inserts`` go before their line (those before the cursor first; those at or past the end after the
    last line, unless ``max_chars`` stopped early); with inserts, a payload may hold no line at all
    (``first`` = ``last`` + 1 in its marker). ``skip_answers`` maps :func:`answer_digest` s of answers already
    delivered to the line index from which each may appear: the first such answer line is left out.
    A cursor past the end is returned as it is (the worker checks line identity first: delivery_cursor.py).
    """
    cursor = max(cursor, -1)
    queue = sorted(inserts, key=lambda i: i.at)
    if cursor >= len(lines) - 1 and not queue:
        return Update(None, cursor, (), ())
    parsed: list[tuple[int, ParsedLine]] = []
    invalid: list[int] = []
    used: set[str] = set()
    wanted: set[str] = set()  # results whose tool call came before the cursor
    for idx in range(cursor + 1, len(lines)):
        p = parse_line(lines[idx])
        if p.status == "invalid":
            invalid.append(idx)
        if any(isinstance(e, Summary) for e in p.entries) and _content_before(lines, idx):
            p = ParsedLine("entries", tuple(e for e in p.entries if not isinstance(e, Summary))) \
                if any(not isinstance(e, Summary) for e in p.entries) else ParsedLine("skipped")
        for e in p.entries:
            if isinstance(e, ToolResult) and e.tool_use_id not in used:
                wanted.add(e.tool_use_id)
        used.update(e.id for e in p.entries if isinstance(e, ToolUse))
        parsed.append((idx, p))
    inputs: dict[str, Any] = {}
    names = _tool_names(lines, cursor, wanted, {}, inputs if private_paths else None)
    messages: list[Message] = []
    size, new_cursor, more = 0, max(len(lines) - 1, cursor), False
    inserted: list[str] = []
    skip = dict(skip_answers or {})
    skipped: list[str] = []

    def place(before: float) -> int:
        added = 0
        while queue and queue[0].at <= before:
            ins = queue.pop(0)
            inserted.append(ins.key)
            messages.extend(ins.messages)
            added += sum(len(m.text) for m in ins.messages)
        return added

    for idx, p in parsed:
        if max_chars is not None and messages and size >= max_chars:
            new_cursor, more = idx - 1, True
            break
        size += place(idx)
        if skip and any(isinstance(e, AssistantText) for e in p.entries):
            kept = []
            for e in p.entries:
                d = answer_digest(e.text) if isinstance(e, AssistantText) else None
                if d is not None and d in skip and idx >= skip[d]:
                    skipped.append(d)
                    del skip[d]
                    continue
                kept.append(e)
            p = ParsedLine("entries", tuple(kept)) if kept else ParsedLine("skipped")
        for e in p.entries:  # a result is labelled with the latest call of its id before it
            if isinstance(e, ToolUse):
                names[e.id] = e.name
                inputs[e.id] = e.input
        for m in format_entries(p.entries, names, redact_secrets, private_paths, inputs):
            if max_chars is not None and len(m.text) > max(max_chars, MESSAGE_CUT_FLOOR):
                m = Message(m.role, cut(m.text, max(max_chars, MESSAGE_CUT_FLOOR)))
            messages.append(m)
            size += len(m.text)
    if more:
        invalid = [i for i in invalid if i <= new_cursor]
    else:
        place(float("inf"))
    if not messages:
        return Update(None, new_cursor, (), tuple(invalid), more, skipped=tuple(skipped))
    first, last = cursor + 1 + index_offset, new_cursor + index_offset
    key = delivery_key(session_id, first, last,
                       [*lines[cursor + 1:new_cursor + 1], *("\0insert:" + k for k in inserted)])
    payload = render_update(session_id, messages, (first, last), key, project)
    return Update(payload, new_cursor, tuple(messages), tuple(invalid), more, key, tuple(inserted), tuple(skipped))


def session_update(lines: Sequence[str], cursor: int, session_id: str) -> tuple[str | None, int]:
    """``(payload xml or None, new cursor)`` for ``lines[cursor + 1:]``; see :func:`build_update`."""
    u = build_update(lines, cursor, session_id)
    return u.payload, u.cursor
