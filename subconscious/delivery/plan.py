"""What the next delivery of a session sends, decided without sending or writing anything: the one code
path the worker (worker.py) and ``subconscious preview`` share. Pure.

- :func:`locate`: where in the transcript file the cursor is (line identity, a rewritten transcript);
- :func:`plan_update`: the next update — private text hidden and secrets redacted (transcript.py), bounded
  by ``max_chars`` — or, over a daily budget (budget.py), its summary covering every line not yet sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from .budget import Caps, Usage, over, render_summary
from .transcript import Update, build_update, line_uuid

__all__ = ["Located", "Planned", "Budget", "locate", "plan_update", "update_limit"]

CHARS_PER_TOKEN = 4
UPDATE_SHARE = 4  # an update takes at most 1/UPDATE_SHARE of the agent's context window
DEFAULT_CONTEXT_WINDOW = 32_000  # tokens, when the agent's cannot be read
MIN_UPDATE_CHARS, MAX_UPDATE_CHARS = 4_000, 400_000


def update_limit(context_window: int | None) -> int:
    """How long one update may be: a share of the agent's context window (in characters)."""
    window = context_window or DEFAULT_CONTEXT_WINDOW
    return max(MIN_UPDATE_CHARS, min(MAX_UPDATE_CHARS, window * CHARS_PER_TOKEN // UPDATE_SHARE))


@dataclass(frozen=True)
class Located:
    position: int  # index in the file of the line at the cursor (-1: before the first line)
    offset: int  # cursor minus that index
    rewritten: bool  # the file changed under the cursor: the offset is new (the worker saves and logs it)


def locate(lines: Sequence[str], cursor: int, offset: int, anchor: Sequence | None,
           delivered: Callable[[], set[str]]) -> Located:
    """The index in ``lines`` of the line at the cursor. The cursor counts lines ever delivered; the file
    may have been rewritten since (shorter, or other lines at the cursor): then delivery goes on after the
    last line of the file whose uuid was delivered (all of it when none was). ``anchor``: ``[cursor, uuid,
    back]``, the identity of the last delivered line that has one, ``back`` lines before the cursor's (a
    two-item anchor: the cursor's own line). ``delivered``: the uuids of
    the lines delivered so far (read only when needed)."""
    p = cursor - offset
    if not isinstance(anchor, (list, tuple)) or len(anchor) < 2:
        anchor = None  # none recorded (or not one we wrote)
    if anchor and anchor[0] == cursor:
        # [cursor, uuid, back]: the uuid of the line ``back`` lines before the one at the cursor, the last
        # delivered line that has one (bookkeeping lines such as cost-state have none): the lines after it up
        # to the cursor must still be lines without one
        back = anchor[2] if len(anchor) > 2 and type(anchor[2]) is int and anchor[2] >= 0 else 0
        if (0 <= p < len(lines) and 0 <= p - back and line_uuid(lines[p - back]) == anchor[1]
                and not any(line_uuid(lines[i]) for i in range(p - back + 1, p + 1))):
            return Located(p, offset, False)
    elif p < len(lines):
        return Located(p, offset, False)  # no identity recorded for this cursor: trust the index
    if p < 0:
        return Located(p, offset, False)
    seen = set(delivered())
    if anchor:
        seen.add(str(anchor[1]))
    j = -1
    for i in range(len(lines) - 1, -1, -1):
        if line_uuid(lines[i]) in seen:
            j = i
            break
    return Located(j, cursor - j, True)


@dataclass(frozen=True)
class Budget:
    """The caps and today's use as the worker read them (None: no budget applies)."""

    caps: Caps
    mine: Usage
    everyone: Usage

    def after(self, chars: int) -> "Budget":
        """Today's use once a message of ``chars`` characters was sent."""
        return Budget(self.caps, self.mine.plus(chars), self.everyone.plus(chars))


@dataclass(frozen=True)
class Planned:
    update: Update  # what the lines make (payload None: nothing to send; cursor: where it ends)
    payload: str | None  # what is sent: the update itself, or its budget summary
    summarised: str | None  # why the update is summarised (a cap reached), None when it is sent in full
    first: int  # the first and last transcript line it covers, in cursor terms
    last: int


def plan_update(lines: Sequence[str], position: int, session_id: str, *, max_chars: int | None,
                offset: int = 0, project: Mapping[str, str] | None = None, private_paths: Sequence[str] = (),
                budget: Budget | None = None, over_budget: str | None = None, **extra) -> Planned:
    """The next update after the line at ``position``. Over a cap of ``budget``, a summary (counts, no text)
    of every line not yet sent replaces it, under the delivery key of that whole range. ``extra``: more
    arguments of :func:`~subconscious.delivery.transcript.build_update`; ``over_budget``: why it is over a cap
    already (the reservation was refused: budget.reserve)."""
    kw = dict(index_offset=offset, project=project, private_paths=private_paths, **extra)
    update = build_update(lines, position, session_id, max_chars=max_chars, **kw)
    first, last = position + 1 + offset, update.cursor + offset
    if update.payload is None or ((budget is None or not budget.caps.any) and over_budget is None):
        return Planned(update, update.payload, None, first, last)
    why = over_budget or over(budget.caps, budget.mine, budget.everyone, len(update.payload))
    if why is None:
        return Planned(update, update.payload, None, first, last)
    whole = build_update(lines, position, session_id, max_chars=None, **kw)
    last = whole.cursor + offset
    summary = render_summary(session_id, whole.messages, (first, last), whole.key or "", why, max_chars)
    return Planned(whole, summary, why, first, last)
