"""What a read of the state store yields, and the names of the home's layout (see :mod:`.core`).

:class:`Snapshot` is everything the directory says, merged; :class:`ShardInfo` what one host's shard says
about itself; ``_Read`` one read of every source, which a write plans from. :class:`StoreError` is the
store's refusal of an operation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from ..conflicts import copies
from ..clock import ZERO, Stamp
from ..files import Problem
from ..order import AdoptedRecords
from .plan import FLOOR_SETTING
from ..records import Conversation, Record, Setting, parse_record
from ..sources import Read
from ..conflicts.viewlines import ViewLines

CONVERSATIONS = "conversations.json"
HOSTS = "hosts"
BACKUPS = "backups"
SHARD_FORMAT = 1
DAY_MS = 86_400_000
TOMBSTONE_RETENTION_MS = 90 * DAY_MS
MAX_REDO = 16
HEARTBEAT_MS = DAY_MS  # a host's shard is rewritten at least this often while the host writes anything


class StoreError(RuntimeError):
    """The store refuses an operation; the message says why and what to do."""


@dataclass(frozen=True)
class ShardInfo:
    host: str
    name: str
    clock: Stamp
    written_ms: int  # the writer's wall clock when it wrote the shard
    format: int
    entries: int


@dataclass
class Snapshot:
    """Everything the directory says, merged: what a reader sees.

    ``raw`` holds each session's winning version in its canonical JSON form; records are built
    from it only when asked for (a home can hold thousands of sessions, a hook needs one).
    """

    raw: dict[str, dict] = field(default_factory=dict)
    settings: dict[str, Setting] = field(default_factory=dict)
    shards: dict[str, ShardInfo] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    newest: Stamp = ZERO
    copies: list[copies.Found] = field(default_factory=list)  # conflict copies merged into this view
    folded: list[Path] = field(default_factory=list)  # where a write filed the copies it merged (backups/)

    @cached_property
    def conversations(self) -> dict[str, Record]:
        return {k: parse_record(v) for k, v in self.raw.items()}

    @cached_property
    def live(self) -> dict[str, Conversation]:
        return {k: r for k, r in self.conversations.items() if isinstance(r, Conversation)}

    def get(self, session_id: str) -> Conversation | None:
        value = self.raw.get(session_id)
        return None if value is None or value.get("deleted") is True else parse_record(value)  # type: ignore[return-value]


@dataclass
class _Read:
    """One read of everything the conversations map lives in."""

    snap: Snapshot
    own_convs: dict[str, dict]
    own_settings: dict[str, Setting]
    shard_convs: dict[str, dict]  # the real shards' merged conversations
    shard_settings: dict[str, Setting]
    own_raw: bytes | None = None  # this host's shard as read (what a publish expects)
    view_raw: bytes | None = None
    sources: list[dict[str, dict]] = field(default_factory=list)  # every map read (for pruning)
    shard_clocks: list[Stamp] = field(default_factory=list)
    displaced: list[Read] = field(default_factory=list)
    folds: list[Read] = field(default_factory=list)  # conflict copies to fold once merged
    view_lines: ViewLines | None = None  # the view's entry lines, once it was read clean
    floor: Stamp = ZERO  # the tombstone prune floor
    adopted: AdoptedRecords = field(default_factory=AdoptedRecords)  # every shard's adoption record
    own_adopted: list = field(default_factory=list)  # this host's record, as its shard holds it (raw)
    carried_adopted: list = field(default_factory=list)  # records of files that may go (raw)
    bound: Stamp | None = None  # the largest stamp that counts (clock.bound of this read's now)
    demote: bool = False  # versions stamped beyond ``bound`` are in the home: order them as the oldest
    ahead: Any = None  # every shard's ahead record as read (bounds.AheadRecords: key -> {(hlc, host)})
    own_ahead: list = field(default_factory=list)  # this host's ahead record, as its shard holds it (raw)
    carried_ahead: list = field(default_factory=list)  # records of files that may go (copies, displaced, retiring)
    setting_sources: list = field(default_factory=list)  # every source's settings (key -> Setting), as read
    apply_ahead: bool = False  # the ahead records are applied (versions they name ordered as the oldest)
    originals: dict = field(default_factory=dict)  # key -> {(hlc, host)} of versions read demoted


def floor_of(settings: dict[str, Setting]) -> Stamp:
    record = settings.get(FLOOR_SETTING)
    try:
        return Stamp.decode(record.value) if record is not None else ZERO
    except ValueError:
        return ZERO
