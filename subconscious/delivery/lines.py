"""Claude Code's transcript lines -> typed entries. Pure functions, no I/O.

A transcript is the JSONL file Claude Code writes at ``transcript_path`` (2.1.x: one line per user prompt,
per tool result and per assistant content block; plus attachment, system and bookkeeping lines).
:func:`parse_line` turns one line into typed entries (user text, assistant text, thinking, tool calls and
results, compaction summaries, slash commands) and never raises; :func:`complete_lines` keeps only the
lines Claude Code has finished writing; :func:`line_uuid` reads a line's own id.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal, Union


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
