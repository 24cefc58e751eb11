"""Transcript entries -> the ``<claude_code_session_update>`` XML the subconscious agent reads. Pure.

:func:`format_entries` turns entries into messages (secrets redacted, ``<private>`` parts and private
paths' results hidden, long results and thinking cut as upstream cuts them); :func:`render_update` wraps
them, with the project and the delivery's line span and key, into the update's XML; :func:`xml_escape` and
:func:`cut` are the text rules every message goes through.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal, Mapping, Sequence

from ..privacy.private import (MARKER, PATH_NOTE, hide_private, is_private_path, path_fields, private_result,
                               tool_paths)
from ..privacy.results import WITHHELD, Reader, checked_error, checked_result, resolved_input, resolved_listing
from ..privacy.redact import redact
from ..privacy.textindex import EMPTY, PrivateLines
from .lines import AssistantText, Command, Entry, Summary, Thinking, ToolResult, ToolUse, UserText

RESULT_CUT = 1500      # tool results / errors
THINKING_CUT = 500     # thinking blocks
COMMAND_CUT = 100      # Bash command in a tool-call summary
INPUT_JSON_CUT = 100   # JSON input of other tools
PATHS_CUT = 1000       # the paths of a call naming a private path (shown instead of its input)
TRUNCATED = "... [truncated]"


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


INPUT_NOTE = "[the rest of this call's input is not sent: it names a private path (SUBCONSCIOUS_PRIVATE_PATHS)]"


def private_call_summary(name: str, tool_input: Any, globs: Sequence[str] = ()) -> str:
    """The summary of a call naming a private path: Claude Code's own tools show their path or pattern as ever
    (never a file's content); any other tool (an MCP server's) only the top fields that hold a private path
    (``source`` may be a notebook cell's text: a field is shown only as the path that made the call private),
    and a note."""
    if name in _SUMMARY_FIELD or not isinstance(tool_input, dict):
        return tool_summary(name, tool_input)
    shown = {k: v for k in path_fields(tool_input) if (v := _path_like(tool_input[k])) is not None
             and any(is_private_path(x, globs) for x in tool_paths({k: v}))}
    return "%s %s" % (cut(json.dumps(shown, ensure_ascii=False, separators=(",", ":")), PATHS_CUT), INPUT_NOTE)


def plain(text: str) -> str:
    """``text`` as the update will hold it once escaped (:func:`xml_escape` without the escaping): colours,
    escape sequences and characters XML cannot hold taken out, line ends as newlines. Done first, so that
    ``grep --color`` or a NUL inside a private line cannot split it past the checks and be joined again after."""
    if "\x1b" in text or "\x9b" in text or "\r" in text or _NOT_XML.search(text):
        text = _NOT_XML.sub("", _ANSI.sub("", text)).replace("\r\n", "\n").replace("\r", "\n")
    return text


def _path_like(value: Any) -> Any:
    """A path field's value if it looks like paths (a string or list of strings, each one line, not long),
    else None: ``source`` or ``target`` may hold content (a notebook cell's source)."""
    def one(v: Any) -> bool:
        return isinstance(v, str) and len(v) <= 4096 and "\n" not in v and "\r" not in v
    if one(value):
        return value
    if isinstance(value, list) and len(value) <= 100 and all(one(v) for v in value):
        return value
    return None


def _clean(text: str, limit: int | None, secrets: bool, lines: PrivateLines = EMPTY) -> str:
    text = hide_private(plain(text))  # <private>…</private> first, whatever else applies (private.py)
    if limit is not None and len(text) > limit + 8192:  # bound the redaction work; the secret-safe cut comes after
        at = limit + 8192
        if lines:  # never half a line: the whole line the cut falls in is checked (withheld lines before it
            start = text.rfind("\n", 0, at) + 1  # could pull what is left of it under the final cut)
            end = text.find("\n", at)
            whole = text[start:] if end < 0 else text[start:end]
            text = text[:start] + (MARKER if lines.hit(whole) else whole[:at - start])
        else:
            text = text[:at]
    text = lines.scrub(text)  # the project's private lines, whichever tool printed them (textindex.py)
    if secrets:
        text = redact(text)
    return cut(text, limit) if limit is not None else text


def format_entries(entries: Sequence[Entry], tool_names: Mapping[str, str],
                   redact_secrets: bool = True, private_paths: Sequence[str] = (),
                   tool_inputs: Mapping[str, Any] | None = None, files: Reader | None = None,
                   cwd: str | None = None, private_lines: PrivateLines = EMPTY) -> list[Message]:
    """Entries -> transcript messages (not yet XML-escaped). ``tool_names`` maps tool_use ids
    to tool names so each result is labelled with the tool that produced it; ``tool_inputs`` maps them to
    the calls' inputs, whose paths ``private_paths`` (SUBCONSCIOUS_PRIVATE_PATHS globs) may make private.
    ``files`` reads the project's files so that the lines of a Read or Grep result inside a private block
    of its file are taken out (:mod:`..privacy.results`; None: no file can be read, and a result that needs
    one is withheld); ``cwd``: the session's directory, where a Grep without a path searched.
    ``private_lines``: the project's private text; every line of any message holding some is withheld."""
    out: list[Message] = []
    pl = private_lines
    for e in entries:
        if isinstance(e, UserText):
            out.append(Message("user", _clean(e.text, None, redact_secrets, pl)))
        elif isinstance(e, AssistantText):
            out.append(Message("claude_code", _clean(e.text, None, redact_secrets, pl)))
        elif isinstance(e, Thinking):
            out.append(Message("claude_code", "[Thinking]: " + _clean(e.text, THINKING_CUT, redact_secrets, pl)))
        elif isinstance(e, ToolUse):
            if private_paths and _names_private_path(e.input, private_paths, cwd if files is not None else None):
                summary = private_call_summary(e.name, e.input, private_paths)
            else:
                summary = tool_summary(e.name, pl.scrub_value(e.input, plain))  # before any cut: no half line
            summary = _clean(summary, None, redact_secrets, pl)
            out.append(Message("claude_code", ("[Tool: %s] %s" % (e.name, summary)).rstrip()))
        elif isinstance(e, ToolResult):
            label = "Tool Error" if e.is_error else "Tool Result"
            name = tool_names.get(e.tool_use_id, "unknown")
            tool_input = (tool_inputs or {}).get(e.tool_use_id)
            content = private_result(name, tool_input, e.content, private_paths)
            if private_paths and files is not None and content == e.content:  # the machine's files: links too
                content = private_result(name, resolved_input(tool_input, cwd), content, private_paths)
            if private_paths and files is not None and content != PATH_NOTE % name:  # listed files: links too
                content = resolved_listing(name, content, cwd, private_paths)
            if content != PATH_NOTE % name and not e.is_error:
                checked = checked_result(name, tool_input, content, files, cwd)
                if checked is None:
                    out.append(Message("system", "[%s: %s %s]" % (label, name, WITHHELD)))
                    continue
                content = checked
            elif e.is_error:  # an Edit's error echoes the string it looked for
                content = checked_error(name, tool_input, content, files)
            out.append(Message("system", "[%s: %s]\n%s" % (label, name, _clean(content, RESULT_CUT, redact_secrets, pl))))
        elif isinstance(e, Summary):
            out.append(Message("system", "[Session Summary]: " + _clean(e.text, None, redact_secrets, pl)))
        elif isinstance(e, Command):
            out.append(Message("system", _clean(e.text, RESULT_CUT, redact_secrets, pl)))
    return out


def _names_private_path(tool_input: Any, globs: Sequence[str], cwd: str | None) -> bool:
    """Whether a call's input names a private path, as written or (with ``cwd``: the machine's files) resolved."""
    if any(is_private_path(p, globs) for p in tool_paths(tool_input)):
        return True
    return cwd is not None and any(is_private_path(p, globs) for p in tool_paths(resolved_input(tool_input, cwd)))


UPDATE_INSTRUCTIONS = """\
This is what just happened in the Claude Code session above. Update your memory with anything \
worth keeping across sessions and machines: the user's preferences, decisions, project facts, \
open threads, mistakes not to repeat. If Claude Code should know something now, write it as a \
short note addressed to Claude Code; it is shown to Claude before the next prompt or tool call. \
Say nothing if there is nothing useful to add."""


def _message_head(m: Message) -> str:
    return '<message role="%s"%s>\n' % (
        m.role, ' agent_type="%s"' % xml_escape(m.agent_type).replace('"', "&quot;") if m.agent_type is not None else "")


def render_message(m: Message) -> str:
    """One ``<message>`` element of the update, its text escaped."""
    return "%s%s\n</message>" % (_message_head(m), xml_escape(m.text))


def message_overhead(m: Message) -> int:
    """The characters ``m`` takes in the update besides its escaped text (the element, the newline joining it)."""
    return len(_message_head(m)) + len("\n</message>") + 1


def message_size(m: Message) -> int:
    """Exactly what ``m`` adds to the length of the update's text."""
    return message_overhead(m) + len(xml_escape(m.text))


CUT_MARK = ("\n[... cut here by subconscious: %d more characters of this entry are not sent "
            "(one update may hold at most %d characters)]")


def _escaped_prefix(text: str, room: int) -> str:
    """The longest prefix of ``text`` (up to ``room`` characters) whose escaped form fits ``room``."""
    if len(text) <= room and len(xml_escape(text)) <= room:
        return text
    lo, hi = 0, min(len(text), room)  # escaping never makes text shorter than... almost: ``lo`` always fits
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(xml_escape(text[:mid])) <= room:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


def fit_messages(msgs: Sequence[Message], room: int) -> list[Message]:
    """``msgs`` cut so that their rendered size (:func:`message_size`) is at most ``room``: whole messages while
    they fit, then the next one cut, ending with a marker that says how much of the entry is not sent (the
    messages after it are counted there). The agent sees that and where text was left out; the text itself is
    lost to it (the transcript file keeps it)."""
    sizes = [message_size(m) for m in msgs]
    if sum(sizes) <= room:
        return list(msgs)
    i, used = 0, 0
    while used + sizes[i] <= room:  # the first message that does not fit
        used += sizes[i]
        i += 1
    for j in range(i, -1, -1):  # cut it; with no room left for its marker, cut the one before instead
        used = sum(sizes[:j])
        rest = sum(len(x.text) for x in msgs[j:])
        mark = CUT_MARK % (rest, room)  # the longest it can be: fewer characters are left out
        text_room = room - used - message_overhead(msgs[j]) - len(mark)
        if text_room >= 0:
            kept = _escaped_prefix(msgs[j].text, text_room)
            return [*msgs[:j], Message(msgs[j].role, kept + CUT_MARK % (rest - len(kept), room), msgs[j].agent_type)]
    alone = Message("system", CUT_MARK.lstrip("\n") % (sum(len(m.text) for m in msgs), room))
    return [alone] if message_size(alone) <= room else []  # not even the elements fit: the marker alone


def render_update(session_id: str, messages: Sequence[Message], lines: tuple[int, int] | None = None,
                  key: str | None = None, project: Mapping[str, str] | None = None) -> str:
    """The update XML. ``lines`` (first, last transcript line index) and the delivery ``key`` are recorded as
    ``<lines first="…" last="…" delivery="…"/>`` so a delivery whose outcome was unknown can be recognised in
    the conversation (however far back) and not sent twice."""
    body = "\n".join(render_message(m) for m in messages)
    span = ""
    if lines is not None:
        span = ('<lines first="%d" last="%d" delivery="%s"/>\n' % (*lines, key) if key
                else '<lines first="%d" last="%d"/>\n' % lines)
    return ("<claude_code_session_update>\n%s<session_id>%s</session_id>\n%s\n<transcript>\n%s\n</transcript>\n\n"
            "<instructions>\n%s\n</instructions>\n</claude_code_session_update>"
            % (project_element(project), xml_escape(session_id), span, body, UPDATE_INSTRUCTIONS))


def project_element(project: Mapping[str, str] | None) -> str:
    """``<project id="…" name="…" branch="…" machine="…"/>`` and a newline (empty without a project): which
    project a message is about, the same on every machine (:mod:`subconscious.local.project`)."""
    if not project:
        return ""
    attrs = " ".join('%s="%s"' % (k, xml_escape(str(v)).replace('"', "&quot;")) for k, v in project.items() if v)
    return "<project %s/>\n" % attrs
