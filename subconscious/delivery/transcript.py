"""Claude Code transcripts -> what the subconscious agent reads. Pure functions, no I/O.

A transcript is the JSONL file Claude Code writes at ``transcript_path`` (2.1.x: one line per
user prompt, per tool result and per assistant content block; plus attachment, system and
bookkeeping lines). :func:`parse_line` turns one line into typed entries, :func:`build_update`
turns the lines after a cursor into the ``<claude_code_session_update>`` message.

This module holds the update's assembly (the cursor, ``max_chars``, inserts, answers to skip) and a
subagent's messages. Parsing lines is in :mod:`.lines`, formatting and the update's XML in
:mod:`.update_xml`, delivery keys and markers in :mod:`.keys`, the start message in
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

import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .keys import answer_digest, delivery_key, lines_marker
from ..privacy.private import hide_private_parts
from ..privacy.results import Reader
from ..privacy.textindex import EMPTY, PrivateLines
from ..privacy.redact import REDACTED, find_secrets, redact  # re-exported: applied to every transcript text
from .start_message import session_start_message
from .lines import (
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
    fit_messages,
    format_entries,
    message_size,
    project_element,
    render_update,
    tool_summary,
    xml_escape,
)

__all__ = [
    "UserText", "AssistantText", "Thinking", "ToolUse", "ToolResult", "Summary", "Entry",
    "ParsedLine", "Message", "Update", "BoundTooSmall", "Insert", "answer_digest", "subagent_messages", "complete_lines", "parse_line", "tool_summary",
    "format_entries", "render_update", "build_update", "session_update", "session_start_message",
    "xml_escape", "cut", "redact", "find_secrets",
    "RESULT_CUT", "THINKING_CUT", "COMMAND_CUT", "INPUT_JSON_CUT", "REDACTED",
]

MESSAGE_CUT_FLOOR = 2000  # a subagent's message longer than max(its share, this) is cut
MIN_ROOM = 200  # characters an update holds for its messages besides its envelope: a smaller bound is refused


class BoundTooSmall(ValueError):
    """``max_chars`` cannot hold an update: its envelope (instructions, session id, project, line numbers, key)
    and MIN_ROOM characters of text do not fit. Refused rather than exceeded: the bound is a bound."""


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
                      private_paths: Sequence[str] = (), files: Reader | None = None,
                      cwd: str | None = None, private_lines: PrivateLines = EMPTY) -> tuple[Message, ...]:
    """A subagent's transcript (``agent_transcript_path``: its task, tool calls, results and report) as
    messages of role ``subagent`` labelled with its type; bounded by ``max_chars`` (the rest is named, not
    sent). Empty when it holds nothing to send."""
    names: dict[str, str] = {}
    inputs: dict[str, Any] = {}
    out: list[Message] = []
    size, left = 0, 0
    for idx, p in _joint_private(lines, -1, [(i, parse_line(ln, sidechain=True)) for i, ln in enumerate(lines)]):
        if p.status != "entries":
            continue
        for e in p.entries:
            if isinstance(e, ToolUse):
                names[e.id] = e.name
                inputs[e.id] = e.input
        entries = tuple(Summary(e.text) if isinstance(e, UserText) and not out else e for e in p.entries)
        for m in format_entries(entries, names, redact_secrets, private_paths, inputs, files, cwd, private_lines):
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


LOOK_BACK = 200  # lines before the cursor searched for earlier blocks of an answer the cursor cut


def _message_id(line: str) -> str | None:
    """The ``message.id`` of an assistant line (every content block of one answer has its own line)."""
    if '"assistant"' not in line:
        return None
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    msg = obj.get("message") if isinstance(obj, dict) and obj.get("type") == "assistant" else None
    mid = msg.get("id") if isinstance(msg, dict) else None
    return mid if isinstance(mid, str) and mid else None


def _joint_private(lines: Sequence[str], cursor: int,
                   parsed: list[tuple[int, ParsedLine]]) -> list[tuple[int, ParsedLine]]:
    """``parsed`` with the text blocks of each answer made private-free on the answer's joined text: a
    private passage that opens in one block and closes two blocks later hides the middle one too."""
    groups: dict[str, list[tuple[int, int]]] = {}  # message id -> (index in parsed, index in entries)
    for k, (idx, p) in enumerate(parsed):
        if any(isinstance(e, AssistantText) for e in p.entries) and (mid := _message_id(lines[idx])):
            groups.setdefault(mid, []).extend((k, j) for j, e in enumerate(p.entries) if isinstance(e, AssistantText))
    if not groups:
        return parsed
    before: dict[str, list[str]] = {}
    for idx in range(max(cursor, -1), max(cursor - LOOK_BACK, -1), -1):
        line = lines[idx] if idx >= 0 else ""
        mid = next((m for m in groups if m in line), None) if line else None
        if mid is not None and _message_id(line) == mid:
            texts = [e.text for e in parse_line(line).entries if isinstance(e, AssistantText)]
            before[mid] = texts + before.get(mid, [])
    out = [(idx, p) for idx, p in parsed]
    for mid, where in groups.items():
        earlier = before.get(mid, [])
        texts = earlier + [parsed[k][1].entries[j].text for k, j in where]
        if len(texts) < 2:
            continue
        hidden = hide_private_parts(texts)[len(earlier):]
        changed: dict[int, dict[int, str]] = {}
        for (k, j), text in zip(where, hidden):
            changed.setdefault(k, {})[j] = text
        for k, new in changed.items():  # once per line (a line of 20,000 blocks was quadratic)
            idx, p = out[k]
            entries = [AssistantText(new[j]) if j in new else e for j, e in enumerate(p.entries)]
            out[k] = (idx, ParsedLine(p.status, tuple(entries), p.error))
    return out


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
                 inserts: Sequence[Insert] = (), skip_answers: Mapping[str, int] | None = None,
                 files: Reader | None = None, cwd: str | None = None,
                 private_lines: PrivateLines = EMPTY) -> Update:
    """Format ``lines[cursor + 1:]`` as one ``<claude_code_session_update>``.

    With ``max_chars``, stop after the line whose messages push the transcript past that many
    characters (at least one line with content is always taken; a single message longer than that is cut
    to it) and set ``more``. A compaction summary that follows lines with content is left out: those lines
    are delivered themselves. ``index_offset`` is added to line numbers in the marker (the worker's cursor
    counts lines of earlier versions of a rewritten transcript). ``project``: the session's project identity
    (:meth:`subconscious.local.project.Project.attrs`), carried by the update. ``private_paths``: the globs of
    SUBCONSCIOUS_PRIVATE_PATHS (results of tool calls on those paths are not sent: private.py).
    ``inserts`` go before their line (those before the cursor first; those at or past the end after the
    last line, unless ``max_chars`` stopped early); with inserts, a payload may hold no line at all
    (``first`` = ``last`` + 1 in its marker). ``skip_answers`` maps :func:`answer_digest` s of answers already
    delivered to the line index from which each may appear: the first such answer line is left out.
    ``files`` / ``cwd``: how Claude Code's Read and Grep results are checked against their files for private
    blocks (:func:`~subconscious.delivery.update_xml.format_entries`); ``private_lines``: the project's private
    text (textindex.py), withheld from every message wherever it shows. The text blocks of one answer (its lines with the
    same message id, those before the cursor included) are made private-free together.
    A cursor past the end is returned as it is (the worker checks line identity first: cursor.py).
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
    parsed = _joint_private(lines, cursor, parsed)
    inputs: dict[str, Any] = {}
    names = _tool_names(lines, cursor, wanted, {}, inputs)
    messages: list[Message] = []
    new_cursor, more = max(len(lines) - 1, cursor), False
    inserted: list[str] = []
    skip = dict(skip_answers or {})
    skipped: list[str] = []
    # the bound holds for the update's whole text: what the envelope takes (its longest line numbers) first
    room = None
    if max_chars is not None:
        envelope = len(render_update(session_id, (), (cursor + 1 + index_offset, len(lines) + index_offset + 1),
                                     "k" * 20, project))
        if max_chars - envelope < MIN_ROOM:
            raise BoundTooSmall(
                f"an update may hold at most {max_chars} characters, but this session's update needs {envelope} "
                f"for its envelope (instructions, session id, project, line numbers, delivery key) and {MIN_ROOM} "
                f"for text: nothing can be sent within that bound; raise it to at least {envelope + MIN_ROOM} "
                "(SUBCONSCIOUS_DAILY_CHARS / SUBCONSCIOUS_DAILY_CHARS_TOTAL, if set, bound one update too)")
        room = max_chars - envelope
    used = 0

    def take(msgs: Sequence[Message]) -> bool:
        """Add one unit (a line's messages, an insert) if it fits the room left; the first unit of an update is
        cut to fit instead (with a visible marker). False: it does not fit; the update ends before it."""
        nonlocal used
        if room is None:
            messages.extend(msgs)
            return True
        size = sum(message_size(m) for m in msgs)
        if used + size > room:
            if messages:
                return False
            msgs = fit_messages(msgs, room - used)
            size = sum(message_size(m) for m in msgs)
        messages.extend(msgs)
        used += size
        return True

    def place(before: float) -> bool:
        while queue and queue[0].at <= before:
            if not take(queue[0].messages):
                return False
            inserted.append(queue.pop(0).key)
        return True

    for idx, p in parsed:
        if not place(idx):
            new_cursor, more = idx - 1, True
            break
        left_out = []
        if skip and any(isinstance(e, AssistantText) for e in p.entries):
            kept = []
            for e in p.entries:
                d = answer_digest(e.text) if isinstance(e, AssistantText) else None
                if d is not None and d in skip and idx >= skip[d]:
                    left_out.append(d)
                    del skip[d]
                    continue
                kept.append(e)
            p = ParsedLine("entries", tuple(kept)) if kept else ParsedLine("skipped")
        for e in p.entries:  # a result is labelled with the latest call of its id before it
            if isinstance(e, ToolUse):
                names[e.id] = e.name
                inputs[e.id] = e.input
        if not take(format_entries(p.entries, names, redact_secrets, private_paths, inputs, files, cwd,
                                   private_lines)):
            new_cursor, more = idx - 1, True
            break
        skipped.extend(left_out)
    if more:
        invalid = [i for i in invalid if i <= new_cursor]
    elif not place(float("inf")):
        more = True  # inserts after the last line left for the next update
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
