"""What the agent must hear about a session that is not a line of its transcript file, kept until delivered.

- ``subagent``: a subagent ran (SubagentStop); its own transcript (``agent_transcript_path``: its task,
  tool calls, results, report) goes to the agent labelled with its ``agent_type``;
- ``compacted``: Claude Code compacted the session (PostCompact), with its summary, redacted;
- ``answer``: Claude's final answer from the Stop hook's ``last_assistant_message`` when the transcript
  file had not recorded it yet;
- ``answered``: an answer delivered that way, so its line is left out when the file catches up.

Each is one machine-local file, ``<state dir>/sessions/notices/<session>/<key>.json`` (0600): a hook adds
one by writing a new file and the worker removes it once an update carrying it completed, so hooks and the
worker never rewrite each other's data. ``at`` is the transcript position (in cursor terms: lines ever
delivered) the notice belongs before; the worker places it there in the update (transcript.Insert), and the
update's delivery key covers it, so it reaches the agent exactly once with the lines around it.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any, Sequence

from ..state.files import atomic_write, ensure_dir
from ..state.ids import check_session_id

log = logging.getLogger("subconscious")
NOTICES = "notices"
SUMMARY_CUT = 20_000  # characters of a compaction summary kept (redacted) until delivered
ANSWER_CUT = 50_000


def _dir(sessions_dir: Path, session_id: str) -> Path:
    return Path(sessions_dir) / NOTICES / check_session_id(session_id)


def add(sessions_dir: Path, session_id: str, kind: str, at: int, *, key: str | None = None, **fields: Any) -> str:
    """Record a notice; returns its key (``kind-<ns>-<pid>`` unless given: one per subagent, say)."""
    key = key or "%s-%d-%d" % (kind, time.time_ns(), os.getpid())
    d = _dir(sessions_dir, session_id)
    ensure_dir(Path(sessions_dir) / NOTICES)
    ensure_dir(d)
    atomic_write(d / (key + ".json"), json.dumps({"key": key, "kind": kind, "at": int(at), "created": time.time(),
                                                  **fields}) + "\n", durable=False)
    return key


def load_all(sessions_dir: Path, session_id: str) -> list[dict[str, Any]]:
    """The session's notices, in transcript order (then in the order they came)."""
    out = []
    try:
        entries = sorted(_dir(sessions_dir, session_id).glob("*.json"))
    except (OSError, ValueError):
        return out
    for p in entries:
        try:
            n = json.loads(p.read_text())
        except (OSError, ValueError) as exc:
            log.warning("notices %s: %s is unreadable (%s); left as it is", session_id, p.name, exc)
            continue
        if isinstance(n, dict) and isinstance(n.get("key"), str) and isinstance(n.get("at"), int):
            out.append(n)
    return sorted(out, key=lambda n: (n["at"], n.get("created") or 0.0))


def remove(sessions_dir: Path, session_id: str, keys: Sequence[str]) -> None:
    d = _dir(sessions_dir, session_id)
    for key in keys:
        try:
            (d / (os.path.basename(key) + ".json")).unlink()
        except FileNotFoundError:
            pass


def delivered(sessions_dir: Path, session_id: str, inserted: Sequence[str], skipped: Sequence[str]) -> None:
    """An update carrying ``inserted`` (and leaving out the answers ``skipped``) reached the agent."""
    if not inserted and not skipped:
        return
    by_key = {n["key"]: n for n in load_all(sessions_dir, session_id)}
    for key in inserted:
        n = by_key.get(key)
        if n is not None and n.get("kind") == "answer" and isinstance(n.get("digest"), str):
            add(sessions_dir, session_id, "answered", n["at"], key="answered-" + n["digest"], digest=n["digest"])
    remove(sessions_dir, session_id, [*inserted, *("answered-" + d for d in skipped)])


# --------------------------------------------------------------------------- what the worker places


def assistant_texts(lines: Sequence[str], start: int = 0) -> list[str]:
    from .transcript import AssistantText, parse_line

    return [e.text for line in lines[max(start, 0):] if '"assistant"' in line
            for e in parse_line(line).entries if isinstance(e, AssistantText)]


def answer_recorded(answer: str, texts: Sequence[str]) -> bool:
    """Whether the transcript's assistant ``texts`` hold the final ``answer``: one of them ends it (a message
    of several text blocks is one line per block; the answer ends with its last block)."""
    want = answer.strip()
    return any(t.strip() and want.endswith(t.strip()) for t in texts)


def _read_lines(path: Any) -> list[str] | None:
    from .transcript import complete_lines

    if not isinstance(path, str) or not path:
        return None
    try:
        return complete_lines(Path(path).read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None


def inserts(notices: Sequence[dict], lines: Sequence[str], offset: int, max_chars: int,
            private_paths: Sequence[str] = (), files=None, cwd: str | None = None, private_lines=None):
    """(transcript inserts, keys of notices that are moot, answers to leave out {digest: line index}).
    ``files``/``cwd``: how a subagent's Read and Grep results are checked for private blocks (privacy/results.py);
    ``private_lines``: the project's private text (textindex.py), withheld wherever it shows."""
    from ..privacy.private import hide_private  # <private> text in an answer or a summary never leaves (private.py)
    from ..privacy.textindex import EMPTY
    from .transcript import Insert, Message, answer_digest, cut, redact, subagent_messages

    pl = private_lines or EMPTY

    def private_free(text: str) -> str:
        from .update_xml import plain

        return pl.scrub(hide_private(plain(text)))

    out, moot, skip = [], [], {}
    for n in notices:
        kind, at = n.get("kind"), n["at"] - offset
        if kind == "answered" and isinstance(n.get("digest"), str):
            skip[n["digest"]] = at
        elif kind == "answer" and isinstance(n.get("text"), str) and isinstance(n.get("digest"), str):
            texts = assistant_texts(lines, at)  # the notice holds the answer redacted: compare redacted forms
            if (n["digest"] in {answer_digest(t) for t in texts}
                    or answer_recorded(n["text"], [redact(t) for t in texts])):
                moot.append(n["key"])  # the file caught up: its line delivers the answer
            else:
                out.append(Insert(at, n["key"], (Message("claude_code", redact(cut(private_free(n["text"]), ANSWER_CUT))),)))
        elif kind == "compacted":
            summary = n.get("summary") if isinstance(n.get("summary"), str) else ""
            text = ("[Claude Code compacted this session (%s): its context was replaced by the summary below; "
                    "the transcript goes on after it]\n%s" % (n.get("trigger") or "compaction",
                                                             redact(cut(private_free(summary), max_chars // 2))))
            out.append(Insert(at, n["key"], (Message("system", text.rstrip()),)))
        elif kind == "subagent":
            sub = _read_lines(n.get("path"))
            msgs = subagent_messages(sub or [], str(n.get("agent_type") or ""), str(n.get("agent_id") or ""),
                                     max_chars=max_chars // 2, private_paths=private_paths, files=files, cwd=cwd,
                                     private_lines=pl)
            if not msgs:
                log.info("notices: subagent %s left no transcript to send (%s)", n.get("agent_id"), n.get("path"))
                moot.append(n["key"])
            else:
                out.append(Insert(at, n["key"], msgs))
        else:
            moot.append(n["key"])
    return out, moot, skip
