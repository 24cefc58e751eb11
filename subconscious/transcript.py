"""Claude Code transcripts -> what the subconscious agent reads. Pure functions, no I/O.

A transcript is the JSONL file Claude Code writes at ``transcript_path`` (2.1.x: one line per
user prompt, per tool result and per assistant content block; plus attachment, system and
bookkeeping lines). :func:`parse_line` turns one line into typed entries, :func:`build_update`
turns the lines after a cursor into the ``<claude_code_session_update>`` message.

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
import re
from dataclasses import dataclass
from typing import Any, Literal, Mapping, Sequence, Union

from .private import hide_private, private_result
from .redact import REDACTED, find_secrets, redact  # re-exported: applied to every transcript text

__all__ = [
    "UserText", "AssistantText", "Thinking", "ToolUse", "ToolResult", "Summary", "Entry",
    "ParsedLine", "Message", "Update", "Insert", "answer_digest", "subagent_messages", "complete_lines", "parse_line", "tool_summary",
    "format_entries", "render_update", "build_update", "session_update", "session_start_message",
    "xml_escape", "cut", "redact", "find_secrets",
    "RESULT_CUT", "THINKING_CUT", "COMMAND_CUT", "INPUT_JSON_CUT", "REDACTED",
]

RESULT_CUT = 1500      # tool results / errors
THINKING_CUT = 500     # thinking blocks
COMMAND_CUT = 100      # Bash command in a tool-call summary
INPUT_JSON_CUT = 100   # JSON input of other tools
TRUNCATED = "... [truncated]"
MESSAGE_CUT_FLOOR = 2000  # with max_chars, a single message longer than max(max_chars, this) is cut


# --------------------------------------------------------------------------- entries

@dataclass(frozen=True, slots=True)
class UserText:
    text: str


@dataclass(frozen=True, slots=True)
class AssistantText:
    text: str


@dataclass(frozen=True, slots=True)
class Thinking:
    text: str


@dataclass(frozen=True, slots=True)
class ToolUse:
    id: str
    name: str
    input: Any


@dataclass(frozen=True, slots=True)
class ToolResult:
    tool_use_id: str
    content: str
    is_error: bool


@dataclass(frozen=True, slots=True)
class Summary:
    text: str


@dataclass(frozen=True, slots=True)
class Command:
    """A slash command the user ran in Claude Code, or its local output: not the user's words to Claude."""

    text: str


Entry = Union[UserText, AssistantText, Thinking, ToolUse, ToolResult, Summary, Command]

_COMMAND_TAG = re.compile(r"<(command-name|command-args|local-command-stdout|local-command-stderr)>(.*?)</\1>", re.S)


def _command(text: str) -> "Command | None":
    """``<command-name>/x</command-name>…`` or ``<local-command-stdout>…`` lines -> a Command (None otherwise)."""
    head = text.lstrip()
    if not head.startswith(("<command-name>", "<command-message>", "<local-command-stdout>", "<local-command-stderr>")):
        return None
    tags = {k: v.strip() for k, v in _COMMAND_TAG.findall(text)}
    if "command-name" in tags:
        return Command(("[Command: %s %s]" % (tags["command-name"], tags.get("command-args", ""))).replace(" ]", "]"))
    out = tags.get("local-command-stdout", "") or tags.get("local-command-stderr", "")
    return Command("[Command output]: " + out if out else "")


@dataclass(frozen=True, slots=True)
class ParsedLine:
    """``status``: ``entries`` (has content), ``skipped`` (a line kind we ignore), ``blank``,
    or ``invalid`` (not a JSON object; ``error`` says why)."""

    status: Literal["entries", "skipped", "blank", "invalid"]
    entries: tuple[Entry, ...] = ()
    error: str = ""


def complete_lines(text: str) -> list[str]:
    """The newline-terminated lines of ``text``; an unterminated tail is left for next time."""
    parts = text.split("\n")
    return parts[:-1]  # the last piece is "" for a terminated file, else an incomplete line


def _blocks_text(content: Any) -> str:
    """Text of a tool_result's content: a string, or a list of text/image blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for b in content:
            if isinstance(b, dict) and b.get("type") == "text":
                parts.append(str(b.get("text", "")))
            elif isinstance(b, dict) and b.get("type") == "image":
                parts.append("[image]")
            elif isinstance(b, str):
                parts.append(b)
        return "\n".join(parts)
    return "" if content is None else json.dumps(content, ensure_ascii=False)


def parse_line(line: str, sidechain: bool = False) -> ParsedLine:
    """One transcript line -> entries. Never raises. ``sidechain``: read a subagent's own lines (its
    transcript file holds nothing else); the main transcript's sidechain lines are skipped."""
    if not line.strip():
        return ParsedLine("blank")
    try:
        obj = json.loads(line)
    except ValueError as e:
        return ParsedLine("invalid", error="not JSON: %s" % e)
    if not isinstance(obj, dict):
        return ParsedLine("invalid", error="not a JSON object")
    kind = obj.get("type")
    if kind == "summary":  # written by older versions after compaction
        s = obj.get("summary")
        return ParsedLine("entries", (Summary(str(s)),)) if s else ParsedLine("skipped")
    if kind not in ("user", "assistant") or obj.get("isMeta") or (obj.get("isSidechain") is True and not sidechain):
        return ParsedLine("skipped")  # attachment, system, file-history-snapshot, bookkeeping, meta, subagents
    msg = obj.get("message")
    content = msg.get("content") if isinstance(msg, dict) else obj.get("content")
    entries: list[Entry] = []
    if kind == "user":
        if isinstance(content, str):
            command = _command(content)
            if command is not None:
                return ParsedLine("entries", (command,)) if command.text else ParsedLine("skipped")
            entries.append(Summary(content) if obj.get("isCompactSummary") else UserText(content))
        elif isinstance(content, list):
            texts = []
            for b in content:
                if not isinstance(b, dict):
                    continue
                if b.get("type") == "text" and b.get("text"):
                    texts.append(str(b["text"]))
                elif b.get("type") == "image":
                    texts.append("[image]")
                elif b.get("type") == "tool_result":
                    entries.append(ToolResult(str(b.get("tool_use_id", "")), _blocks_text(b.get("content")),
                                              bool(b.get("is_error"))))
            if texts:
                text = "\n".join(texts)
                entries.insert(0, Summary(text) if obj.get("isCompactSummary") else UserText(text))
    else:
        if isinstance(content, str) and content:
            entries.append(AssistantText(content))
        elif isinstance(content, list):
            for b in content:
                if not isinstance(b, dict):
                    continue
                t = b.get("type")
                if t == "text" and b.get("text"):
                    entries.append(AssistantText(str(b["text"])))
                elif t == "thinking" and b.get("thinking"):
                    entries.append(Thinking(str(b["thinking"])))
                elif t == "tool_use" and b.get("name"):
                    entries.append(ToolUse(str(b.get("id", "")), str(b["name"]), b.get("input")))
    return ParsedLine("entries", tuple(entries)) if entries else ParsedLine("skipped")


# --------------------------------------------------------------------------- formatting

@dataclass(frozen=True, slots=True)
class Message:
    role: Literal["user", "claude_code", "system", "subagent"]
    text: str
    agent_type: str | None = None  # role "subagent": the subagent's type, shown as an attribute


def cut(text: str, limit: int) -> str:
    """Upstream's truncation: the first ``limit`` characters, then ``... [truncated]``."""
    return text if len(text) <= limit else text[:limit] + TRUNCATED


_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")  # not allowed in XML 1.0
# whole ANSI escape sequences (CSI "ESC [ … m", OSC "ESC ] … BEL/ST", two-byte ESC x), not just their ESC byte
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])|\x9b[0-?]*[ -/]*[@-~]")


def xml_escape(text: str) -> str:
    """Escape ``& < >``, drop characters XML cannot hold (NUL, ANSI escapes, lone surrogates) and
    turn carriage returns into newlines (XML parsers would fold them anyway)."""
    text = _NOT_XML.sub("", _ANSI.sub("", text)).replace("\r\n", "\n").replace("\r", "\n")
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


_SUMMARY_FIELD = {"Read": "file_path", "Edit": "file_path", "Write": "file_path", "MultiEdit": "file_path",
                  "NotebookEdit": "notebook_path", "Glob": "pattern", "Grep": "pattern",
                  "WebFetch": "url", "WebSearch": "query", "Task": "description", "Agent": "description"}


def tool_summary(name: str, tool_input: Any) -> str:
    """The ``summary`` in ``[Tool: Name] summary``."""
    if isinstance(tool_input, dict):
        if name == "Bash" and isinstance(tool_input.get("command"), str) and tool_input["command"]:
            return cut(tool_input["command"], COMMAND_CUT)
        key = _SUMMARY_FIELD.get(name)
        if key and isinstance(tool_input.get(key), str) and tool_input[key]:
            return tool_input[key]
    if tool_input is None:
        return ""
    return cut(json.dumps(tool_input, ensure_ascii=False, separators=(",", ":")), INPUT_JSON_CUT)


def _clean(text: str, limit: int | None, secrets: bool) -> str:
    text = hide_private(text)  # <private>…</private> first, whatever else applies (private.py)
    if limit is not None and len(text) > limit + 8192:
        text = text[:limit + 8192]  # bound the redaction work; the secret-safe cut comes after
    if secrets:
        text = redact(text)
    return cut(text, limit) if limit is not None else text


def format_entries(entries: Sequence[Entry], tool_names: Mapping[str, str],
                   redact_secrets: bool = True, private_paths: Sequence[str] = (),
                   tool_inputs: Mapping[str, Any] | None = None) -> list[Message]:
    """Entries -> transcript messages (not yet XML-escaped). ``tool_names`` maps tool_use ids
    to tool names so each result is labelled with the tool that produced it; ``tool_inputs`` maps them to
    the calls' inputs, whose paths ``private_paths`` (SUBCONSCIOUS_PRIVATE_PATHS globs) may make private."""
    out: list[Message] = []
    for e in entries:
        if isinstance(e, UserText):
            out.append(Message("user", _clean(e.text, None, redact_secrets)))
        elif isinstance(e, AssistantText):
            out.append(Message("claude_code", _clean(e.text, None, redact_secrets)))
        elif isinstance(e, Thinking):
            out.append(Message("claude_code", "[Thinking]: " + _clean(e.text, THINKING_CUT, redact_secrets)))
        elif isinstance(e, ToolUse):
            summary = _clean(tool_summary(e.name, e.input), None, redact_secrets)
            out.append(Message("claude_code", ("[Tool: %s] %s" % (e.name, summary)).rstrip()))
        elif isinstance(e, ToolResult):
            label = "Tool Error" if e.is_error else "Tool Result"
            name = tool_names.get(e.tool_use_id, "unknown")
            content = private_result(name, (tool_inputs or {}).get(e.tool_use_id), e.content, private_paths)
            out.append(Message("system", "[%s: %s]\n%s" % (label, name, _clean(content, RESULT_CUT, redact_secrets))))
        elif isinstance(e, Summary):
            out.append(Message("system", "[Session Summary]: " + _clean(e.text, None, redact_secrets)))
        elif isinstance(e, Command):
            out.append(Message("system", _clean(e.text, RESULT_CUT, redact_secrets)))
    return out


UPDATE_INSTRUCTIONS = """\
This is what just happened in the Claude Code session above. Update your memory with anything \
worth keeping across sessions and machines: the user's preferences, decisions, project facts, \
open threads, mistakes not to repeat. If Claude Code should know something now, write it as a \
short note addressed to Claude Code; it is shown to Claude before the next prompt or tool call. \
Say nothing if there is nothing useful to add."""


def render_update(session_id: str, messages: Sequence[Message], lines: tuple[int, int] | None = None,
                  key: str | None = None, project: Mapping[str, str] | None = None) -> str:
    """The update XML. ``lines`` (first, last transcript line index) and the delivery ``key`` are recorded as
    ``<lines first="…" last="…" delivery="…"/>`` so a delivery whose outcome was unknown can be recognised in
    the conversation (however far back) and not sent twice."""
    body = "\n".join('<message role="%s"%s>\n%s\n</message>' % (
        m.role, ' agent_type="%s"' % xml_escape(m.agent_type).replace('"', "&quot;") if m.agent_type is not None else "",
        xml_escape(m.text)) for m in messages)
    span = ""
    if lines is not None:
        span = ('<lines first="%d" last="%d" delivery="%s"/>\n' % (*lines, key) if key
                else '<lines first="%d" last="%d"/>\n' % lines)
    return ("<claude_code_session_update>\n%s<session_id>%s</session_id>\n%s\n<transcript>\n%s\n</transcript>\n\n"
            "<instructions>\n%s\n</instructions>\n</claude_code_session_update>"
            % (project_element(project), xml_escape(session_id), span, body, UPDATE_INSTRUCTIONS))


def project_element(project: Mapping[str, str] | None) -> str:
    """``<project id="…" name="…" branch="…" machine="…"/>`` and a newline (empty without a project): which
    project a message is about, the same on every machine (:mod:`subconscious.project`)."""
    if not project:
        return ""
    attrs = " ".join('%s="%s"' % (k, xml_escape(str(v)).replace('"', "&quot;")) for k, v in project.items() if v)
    return "<project %s/>\n" % attrs


def lines_marker(session_id: str, first: int) -> str:
    """What a delivered update starting at line ``first`` contains (searched for in the conversation)."""
    return '<session_id>%s</session_id>\n<lines first="%d" last="' % (xml_escape(session_id), first)


def delivery_key(session_id: str, first: int, last: int, raw_lines: Sequence[str]) -> str:
    """The idempotency key of an update: its session, first and last line and a digest of the raw lines it
    covers. The same range of the same lines always has the same key; a rewritten transcript gets new ones."""
    import hashlib

    h = hashlib.sha256(("%s\0%d\0%d\0" % (session_id, first, last)).encode())
    for line in raw_lines:
        h.update(line.encode("utf-8", "surrogatepass"))
        h.update(b"\n")
    return h.hexdigest()[:20]


def line_uuid(line: str) -> str | None:
    """The ``uuid`` Claude Code gives a transcript line (None for a line without one)."""
    if '"uuid"' not in line:
        return None
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    u = obj.get("uuid") if isinstance(obj, dict) else None
    return u if isinstance(u, str) and u else None


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


def answer_digest(text: str) -> str:
    """How a final answer is recognised when its transcript line arrives after it was delivered."""
    import hashlib

    return hashlib.sha256(text.strip().encode("utf-8", "surrogatepass")).hexdigest()[:20]


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
    A cursor past the end is returned as it is (the worker checks line identity first: worker.py).
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


def session_start_message(*, project: Any, path: str, session_id: str, timestamp: str,
                          sdk_tools_mode: str, machine: str | None = None, tools_refused: str | None = None) -> str:
    """The ``<claude_code_session_start>`` message sent when a session begins. ``project``: a
    :class:`subconscious.project.Project` (its id, branch and machine are carried too) or a plain name.
    ``tools_refused``: why this session gets no tools although its mode has some (its project directory may
    not be one)."""
    from .tools.modes import agent_text  # the words match what the worker's tools do (no imports)

    access = agent_text(sdk_tools_mode)
    if tools_refused:
        access = f"You have no tools on the user's machine in this session: {tools_refused}."
    context = ("A new Claude Code session has started. You will receive its transcript as it happens, "
               "in <claude_code_session_update> messages. Watch, remember what matters across sessions, "
               "and whisper short, useful guidance to Claude Code when you have some. " + access)
    name, pid, branch = (project, None, None) if isinstance(project, str) else (project.name, project.id, project.branch)
    machine = machine or getattr(project, "machine", None)
    if pid:
        context += (" The project_id names this project on every machine (its path differs from machine to "
                    "machine): sessions with the same project_id are the same project.")
    rows = [("project", name)] + ([("project_id", pid)] if pid else []) + ([("branch", branch)] if branch else [])
    rows += [("path", path), ("session_id", session_id), ("timestamp", timestamp)]
    if machine:
        rows.append(("machine", machine))
    rows += [("sdk_tools_mode", sdk_tools_mode), ("context", context)]
    inner = "\n".join("<%s>%s</%s>" % (k, xml_escape(v), k) for k, v in rows)
    return "<claude_code_session_start>\n%s\n</claude_code_session_start>" % inner
