"""Whether the transcript file has recorded Claude's final answer yet: the one rule Stop's two paths share.

Stop's input carries ``last_assistant_message``; Claude Code's docs say the transcript file can lag behind
it. The full path (:func:`subconscious.hooks.events.lifecycle.note_lagging_answer`) then queues the answer as a
notice; Stop's shortcut (:func:`subconscious.hotpath.handed_over`) hands over to the full path instead of
finishing, so the answer is never dropped. Both decide with :func:`lagging` on the same bytes: the last
``TAIL_BYTES`` of the file (the last ``FIRST_BYTES`` first), its last complete assistant line's last text (as :func:`subconscious.delivery.lines.parse_line`
reads assistant lines), and :func:`subconscious.delivery.notices.answer_recorded`'s rule. Stdlib and
:mod:`subconscious.base.fastjson` only: the shortcut imports it.
"""

from __future__ import annotations

TAIL_BYTES = 512 * 1024


FIRST_BYTES = 32 * 1024  # the answer is nearly always in the last lines: read more only when it is not


def read_tail(path: str, nbytes: int = TAIL_BYTES) -> tuple[str, bool] | None:
    """The last ``nbytes`` of the file, decoded as the transcript is, and whether that is the whole file
    (None: unreadable). Unless it is, its first piece is part of a line, not one."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - nbytes))
            return f.read().decode("utf-8", errors="replace"), size <= nbytes
    except OSError:
        return None


def _texts(line: str) -> list[str]:
    """The assistant texts of one transcript line (parse_line's AssistantText entries, main transcript)."""
    from ..base import fastjson as json

    if not line.strip():
        return []
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return []
    if not isinstance(obj, dict) or obj.get("type") != "assistant" or obj.get("isMeta") \
            or obj.get("isSidechain") is True:
        return []
    msg = obj.get("message")
    content = msg.get("content") if isinstance(msg, dict) else obj.get("content")
    if isinstance(content, str):
        return [content] if content else []
    if isinstance(content, list):
        return [str(b["text"]) for b in content if isinstance(b, dict) and b.get("type") == "text" and b.get("text")]
    return []


def last_assistant_text(tail: str, whole: bool = True) -> str | None:
    """The last assistant text of the complete lines of ``tail`` (None: there is none); ``whole``: ``tail``
    starts at the file's start (else its first piece is part of a line and is not read)."""
    lines = tail.split("\n")[:-1]  # complete lines: an unterminated last piece is not one yet
    for line in reversed(lines if whole else lines[1:]):
        if '"assistant"' not in line:
            continue
        texts = _texts(line)
        if texts:
            return texts[-1]
    return None


def recorded(answer: str, text: str | None) -> bool:
    """notices.answer_recorded(answer, [text]): the file's last assistant text ends the answer."""
    return text is not None and bool(text.strip()) and answer.strip().endswith(text.strip())


def lagging(path: str, answer) -> bool | None:
    """True when ``answer`` (Stop's ``last_assistant_message``) is a non-blank text the transcript's tail has
    not recorded yet; False when there is nothing to queue; None when the file cannot be read."""
    if not isinstance(answer, str) or not answer.strip():
        return False
    text = None
    for nbytes in (FIRST_BYTES, TAIL_BYTES):
        got = read_tail(path, nbytes)
        if got is None:
            return None
        text = last_assistant_text(*got)
        if text is not None or got[1]:
            break
    return not recorded(answer, text)
