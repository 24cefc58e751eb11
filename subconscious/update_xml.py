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

from .private import hide_private, private_result
from .redact import redact
from .transcript_lines import AssistantText, Command, Entry, Summary, Thinking, ToolResult, ToolUse, UserText

RESULT_CUT = 1500      # tool results / errors
THINKING_CUT = 500     # thinking blocks
COMMAND_CUT = 100      # Bash command in a tool-call summary
INPUT_JSON_CUT = 100   # JSON input of other tools
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
