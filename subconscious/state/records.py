"""The records kept in the shared state directory, and their JSON forms.

Plain frozen dataclasses with explicit parsers: the store sits on every hook's hot path, so it avoids
pydantic's import cost; parsing is strict about types and preserves fields it does not know.

JSON forms (camelCase keys as upstream's TypeScript plugin writes them):
- conversation entry: ``{"agentId", "conversationId", "hlc", "host", ...}``; upstream's legacy forms
  (a bare conversation-id string, or an object without ``hlc``) are read with the zero stamp.
- tombstone: ``{"deleted": true, "hlc", "host"}``
- setting: ``{"value": <json>, "hlc", "host"}``
- session state: upstream's ``session-<id>.json`` plus ``host`` and ``hlc``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from . import order
from .clock import STAMP_RE, ZERO, Stamp
from .order import canonical  # noqa: F401  (re-exported: the canonical JSON text of the one order)

LEGACY_HOST = ""  # host recorded for entries written without metadata (upstream)


class RecordError(ValueError):
    """A value in a state file that is not of our format."""


def _stamp_of(obj: Mapping[str, Any]) -> tuple[Stamp, str]:
    if "hlc" not in obj:
        return ZERO, LEGACY_HOST
    try:
        stamp = Stamp.decode(obj["hlc"])
    except ValueError as exc:
        raise RecordError(str(exc)) from None
    host = obj.get("host", LEGACY_HOST)
    if not isinstance(host, str):
        raise RecordError(f"'host' must be a string, got {type(host).__name__}")
    return stamp, host


def _extra(obj: Mapping[str, Any], known: frozenset[str]) -> str:
    rest = {k: v for k, v in obj.items() if k not in known}
    return canonical(rest) if rest else ""


# --------------------------------------------------------------------------- conversations


@dataclass(frozen=True, slots=True)
class Conversation:
    """A live mapping session → conversation, as last written by ``host`` at ``stamp``."""

    conversation_id: str
    agent_id: str | None
    stamp: Stamp
    host: str
    extra: str = ""  # canonical JSON of fields we do not know, kept as written
    raw: dict | None = field(default=None, compare=False, repr=False, hash=False)  # as parsed, if it was

    deleted = False

    @property
    def legacy(self) -> bool:
        return self.stamp == ZERO

    def to_json(self) -> dict[str, Any]:
        if self.raw is not None and "hlc" in self.raw:
            return self.raw
        out: dict[str, Any] = json.loads(self.extra) if self.extra else {}
        out["conversationId"] = self.conversation_id
        if self.agent_id is not None:
            out["agentId"] = self.agent_id
        out["hlc"] = self.stamp.encode()
        out["host"] = self.host
        return out


@dataclass(frozen=True, slots=True)
class Tombstone:
    """A deleted mapping; kept so a stale copy cannot bring the entry back. A tombstone gc wrote holds the
    retirement record (``"retired": {"conversationId", "agentId", "cursor"}``, in ``extra``): a session that
    comes back later goes on in its conversation from its cursor (hooks/events/session_start.py)."""

    stamp: Stamp
    host: str
    extra: str = ""  # canonical JSON of the fields besides deleted/hlc/host, kept as written

    deleted = True
    legacy = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(self.extra) if self.extra else {}
        out.update({"deleted": True, "hlc": self.stamp.encode(), "host": self.host})
        return out

    @property
    def retired(self) -> dict[str, Any] | None:
        """The retirement record, when it is one of ours and well formed."""
        got = json.loads(self.extra).get("retired") if self.extra else None
        if (isinstance(got, dict) and isinstance(got.get("conversationId"), str) and got["conversationId"]
                and isinstance(got.get("agentId"), (str, type(None)))
                and type(got.get("cursor", -1)) is int):
            return got
        return None


Record = Conversation | Tombstone

_CONV_KEYS = frozenset({"conversationId", "agentId", "hlc", "host"})
_TOMB_KEYS = frozenset({"deleted", "hlc", "host"})


def parse_record(value: Any) -> Record:
    """One value of ``conversations.json`` or of a shard's ``conversations`` map."""
    if isinstance(value, str):  # upstream legacy: a bare conversation id
        if not value:
            raise RecordError("empty conversation id")
        return Conversation(value, None, ZERO, LEGACY_HOST)
    if not isinstance(value, dict):
        raise RecordError(f"expected an object or a string, got {type(value).__name__}")
    stamp, host = _stamp_of(value)
    if value.get("deleted") is True:
        if "hlc" not in value:
            raise RecordError("a tombstone without 'hlc'")
        return Tombstone(stamp, host, _extra(value, _TOMB_KEYS))
    conv = value.get("conversationId")
    if not isinstance(conv, str) or not conv:
        raise RecordError("missing or non-string 'conversationId'")
    agent = value.get("agentId")
    if agent is not None and not isinstance(agent, str):
        raise RecordError(f"'agentId' must be a string, got {type(agent).__name__}")
    if agent is not None and len(value) == 4 and value.keys() == _CONV_KEYS:
        return Conversation(conv, agent, stamp, host, "", value)  # already canonical: keep it as is
    return Conversation(conv, agent, stamp, host, _extra(value, _CONV_KEYS))


_HLC_RE = STAMP_RE  # the decoder's own definition: the fast path accepts exactly what decode does


def normalize_record(value: Any) -> dict[str, Any]:
    """Validate one stored version and return its canonical JSON form (what :meth:`to_json` gives).

    The common shape (written by us) is checked in place without building a record; anything else
    (legacy strings, upstream objects, unknown fields) goes through :func:`parse_record`. Raises
    :class:`RecordError` for values that are not ours.
    """
    if (
        type(value) is dict
        and len(value) == 4
        and type(value.get("conversationId")) is str
        and value["conversationId"]
        and type(value.get("agentId")) is str
        and type(value.get("host")) is str
        and type(value.get("hlc")) is str
        and _HLC_RE.fullmatch(value["hlc"])
    ):
        return value
    return parse_record(value).to_json()


raw_stamp = order.stamp_of  # the stamp of a normalized value
raw_later = order.wins  # :func:`later` for normalized values, without building records


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True, slots=True, eq=False)
class Setting:
    """A last-writer-wins value shared by every host of a home (e.g. the pinned agent).

    Two settings are equal when their JSON is (``value`` 1, 1.0 and true are three settings), as the
    one order (:mod:`.order`) sees them; Python's ``==`` on the values would merge them by read order.
    """

    value: Any
    stamp: Stamp
    host: str

    deleted = False

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Setting):
            return NotImplemented
        return self.stamp == other.stamp and self.host == other.host and order.same_json(self.value, other.value)

    def __hash__(self) -> int:
        return hash((self.stamp, self.host, canonical(self.value)))

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "hlc": self.stamp.encode(), "host": self.host}


def parse_setting(value: Any) -> Setting:
    if not isinstance(value, dict) or "value" not in value or "hlc" not in value:
        raise RecordError("a setting must be an object with 'value' and 'hlc'")
    stamp, host = _stamp_of(value)
    return Setting(value["value"], stamp, host)


def order_key(record: Conversation | Tombstone | Setting) -> tuple[Stamp, str, str]:
    """Total order of versions of one key: :func:`.order.version_key` of the record's JSON form."""
    return order.version_key(record.to_json())


def later(a: Conversation | Tombstone | Setting, b: Conversation | Tombstone | Setting) -> bool:
    """``order_key(a) >= order_key(b)``: :func:`.order.wins` on the JSON forms."""
    return a is b or order.wins(a.to_json(), b.to_json())


# --------------------------------------------------------------------------- sessions


@dataclass(frozen=True, slots=True)
class SessionState:
    """``session-<id>.json``: where this session's transcript delivery stands.

    ``last_processed_index`` is the index of the last transcript line delivered (-1 before any).
    """

    session_id: str
    conversation_id: str | None = None
    last_processed_index: int = -1
    started_at: str | None = None
    last_block_values: Mapping[str, Any] | None = None
    last_seen_message_id: str | None = None
    host: str = LEGACY_HOST
    stamp: Stamp = ZERO
    extra: str = ""
    agent_id: str | None = field(default=None)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(self.extra) if self.extra else {}
        out.update(
            sessionId=self.session_id,
            conversationId=self.conversation_id,
            lastProcessedIndex=self.last_processed_index,
            startedAt=self.started_at,
            lastBlockValues=dict(self.last_block_values) if self.last_block_values is not None else None,
            lastSeenMessageId=self.last_seen_message_id,
            host=self.host,
            hlc=self.stamp.encode(),
        )
        if self.agent_id is not None:
            out["agentId"] = self.agent_id
        return out

    def group_key(self) -> tuple[Stamp, str, str]:
        """Order of the last-writer-wins part (everything but the cursor and the start time)."""
        group = {
            "conversationId": self.conversation_id,
            "agentId": self.agent_id,
            "lastBlockValues": self.last_block_values,
            "lastSeenMessageId": self.last_seen_message_id,
            "extra": self.extra,
        }
        return (self.stamp, self.host, canonical(group))

    def evolve(self, **changes: Any) -> "SessionState":
        return replace(self, **changes)

    # When and why Claude Code ended the session (its SessionEnd hook: ``reason`` clear, logout, other, …),
    # None while it runs (a resume clears them). Kept as ``endedAt``/``endReason`` among the extra keys, so
    # they merge with the last-writer-wins part and upstream reads the file as before.
    @property
    def ended_at(self) -> str | None:
        value = self._extra_dict().get(END_KEYS[0])
        return value if isinstance(value, str) else None

    @property
    def end_reason(self) -> str | None:
        value = self._extra_dict().get(END_KEYS[1])
        return value if isinstance(value, str) else None

    def with_end(self, ended_at: str | None, end_reason: str | None) -> "SessionState":
        """This state with the end recorded (both None: the session runs again)."""
        rest = {k: v for k, v in self._extra_dict().items() if k not in END_KEYS}
        if ended_at is not None:
            rest[END_KEYS[0]], rest[END_KEYS[1]] = ended_at, end_reason
        return replace(self, extra=canonical(rest) if rest else "")

    @property
    def project(self) -> str | None:
        """The session's project as every machine names it (:mod:`subconscious.local.project`), kept as ``project``
        among the extra keys (SessionStart writes it)."""
        value = self._extra_dict().get(PROJECT_KEY)
        return value if isinstance(value, str) else None

    def with_project(self, project: str | None) -> "SessionState":
        rest = {k: v for k, v in self._extra_dict().items() if k != PROJECT_KEY}
        if project is not None:
            rest[PROJECT_KEY] = project
        return replace(self, extra=canonical(rest) if rest else "")

    def _extra_dict(self) -> dict[str, Any]:
        if not self.extra:
            return {}
        value = json.loads(self.extra)
        return value if isinstance(value, dict) else {}


END_KEYS = ("endedAt", "endReason")
PROJECT_KEY = "project"


_SESSION_KEYS = frozenset(
    {
        "sessionId", "conversationId", "lastProcessedIndex", "startedAt", "lastBlockValues",
        "lastSeenMessageId", "host", "hlc", "agentId",
    }
)


def _opt_str(obj: Mapping[str, Any], key: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise RecordError(f"'{key}' must be a string or null, got {type(value).__name__}")
    return value


def parse_session(value: Any, expected_id: str | None = None) -> SessionState:
    if not isinstance(value, dict):
        raise RecordError(f"a session file must hold an object, got {type(value).__name__}")
    sid = value.get("sessionId", expected_id)
    if not isinstance(sid, str) or (expected_id is not None and sid != expected_id):
        raise RecordError(f"'sessionId' {sid!r} does not match the file's session {expected_id!r}")
    index = value.get("lastProcessedIndex", -1)
    if isinstance(index, bool) or not isinstance(index, int) or index < -1:
        raise RecordError(f"'lastProcessedIndex' must be an integer >= -1, got {index!r}")
    blocks = value.get("lastBlockValues")
    if blocks is not None and not isinstance(blocks, dict):
        raise RecordError("'lastBlockValues' must be an object or null")
    stamp, host = _stamp_of(value)
    return SessionState(
        session_id=sid,
        conversation_id=_opt_str(value, "conversationId"),
        last_processed_index=index,
        started_at=_opt_str(value, "startedAt"),
        last_block_values=blocks,
        last_seen_message_id=_opt_str(value, "lastSeenMessageId"),
        host=host,
        stamp=stamp,
        extra=_extra(value, _SESSION_KEYS),
        agent_id=_opt_str(value, "agentId"),
    )
