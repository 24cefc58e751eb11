"""The ``<claude_code_session_start>`` message the subconscious agent gets when a session begins. Pure.
"""

from __future__ import annotations

from typing import Any

from .update_xml import xml_escape


def session_start_message(*, project: Any, path: str, session_id: str, timestamp: str,
                          sdk_tools_mode: str, machine: str | None = None, tools_refused: str | None = None) -> str:
    """The ``<claude_code_session_start>`` message sent when a session begins. ``project``: a
    :class:`subconscious.local.project.Project` (its id, branch and machine are carried too) or a plain name.
    ``tools_refused``: why this session gets no tools although its mode has some (its project directory may
    not be one)."""
    from ..agent_tools.modes import agent_text  # the words match what the worker's tools do (no imports)

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
