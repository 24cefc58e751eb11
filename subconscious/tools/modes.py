"""LETTA_SDK_TOOLS modes: which client-side tools each offers, and how each is described to the agent
and to Claude Code. Pure; imports nothing (the hooks may use it on their hot path)."""
from __future__ import annotations

MODES = ("read-only", "full", "off")
READ_ONLY_TOOLS = ("Read", "Grep", "Glob")
WRITE_TOOLS = ("Write", "Edit", "Bash")
ALL_TOOLS = READ_ONLY_TOOLS + WRITE_TOOLS


def allowed_tools(mode: str) -> tuple[str, ...]:
    """Tool names offered in ``mode``; an unknown mode offers nothing."""
    if mode == "read-only":
        return READ_ONLY_TOOLS
    if mode == "full":
        return ALL_TOOLS
    return ()


# For the agent (the session-start message's <context>): what it may do, and that it is confined.
AGENT_TEXT = {
    "read-only": "While you process this session you can look at its project directory yourself with the "
                 "client-side tools Read, Grep and Glob, which run on the user's machine. They see only that "
                 "directory (not .git internals, ignored files or credential files), results are capped and "
                 "secrets in them redacted; you cannot change files or run commands, and there is no web access.",
    "full": "While you process this session you can use the client-side tools Read, Grep, Glob, Write, Edit and "
            "Bash on the user's machine, confined to its project directory (Bash runs in a sandbox with no "
            "network, and only if the machine has one). The user opted into this: change files only when the "
            "session clearly asks for it, and never touch the user's work otherwise.",
    "off": "You have no tools on the user's machine: work only from what the session sends you and your memory.",
}

# For Claude Code (one line in the injected context).
CLAUDE_LINE = {
    "read-only": "It can read and search this project's files (Read, Grep, Glob; read-only, confined to the "
                 "project directory).",
    "full": "It can read, search and change this project's files and run sandboxed commands in it "
            "(LETTA_SDK_TOOLS=full).",
    "off": "It cannot see this project's files; it knows only the transcript (LETTA_SDK_TOOLS=off).",
}


def agent_text(mode: str) -> str:
    return AGENT_TEXT.get(mode, "Tool access mode: %s." % mode)


def claude_line(mode: str) -> str:
    return CLAUDE_LINE.get(mode, "")
