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
    "full": "You have full tool access to this session's project directory on the user's machine: the "
            "client-side tools Read, Grep, Glob, Write, Edit and Bash, confined to that directory (Bash runs in "
            "a sandbox without network, and only where the machine has one; there is no web access). The user "
            "opted into this: change files only when the session clearly asks for it, never otherwise.",
    "off": "You have no tools on the user's machine: work only from what the session sends you and your memory.",
}

# For Claude Code (one line in the injected context).
CLAUDE_LINE = {
    "read-only": "Your subconscious can read and search this project's files (Read, Grep, Glob), read-only and "
                 "confined to the project directory (LETTA_SDK_TOOLS=read-only).",
    "full": "Your subconscious can read, search and change this project's files and run sandboxed commands in it "
            "(LETTA_SDK_TOOLS=full).",
    "off": "Your subconscious cannot see this project's files, only this session's transcript (LETTA_SDK_TOOLS=off).",
}


def agent_text(mode: str) -> str:
    return AGENT_TEXT.get(mode, "Tool access mode: %s." % mode)


def claude_line(mode: str) -> str:
    return CLAUDE_LINE.get(mode, "")
