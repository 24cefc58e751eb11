"""Pure: what the sources say, and what a write must put where.

The store reads every source (:mod:`..sources`), hands the parsed maps to these functions and applies
the result. Nothing here touches a file, so every rule is property-tested on its own:

- :func:`view_versions` — a version in a view (``conversations.json``, where upstream writes) that is
  not what we wrote counts as upstream's newer write: it gets a stamp just above the version it
  replaced, so it beats that version and loses to any later write of anyone;
- :func:`below_floor` — once tombstones are pruned, versions older than the prune floor that come
  from anything but a live shard (a conflict copy, a restored backup, a stale shard) are ignored, so a
  delete stays a delete;
- :func:`plan_conversations` — the merged whole, this host's new shard and the new view;
- :func:`prunable` — which tombstones may go: old enough, every shard has written since, and no
  source still holds a live version of the key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ..clock import ZERO, Stamp, tick
from ..merge import merge_raw
from ..order import adoption_digest, already_adopted, same_json, upstream_content
from ..records import LEGACY_HOST, raw_stamp

FLOOR_SETTING = "tombstone-floor"
# A legacy entry (unstamped, nothing of ours before it) is older than every write of anyone, but two
# adoptions of the key (of its original and of upstream's rewrite, read at different times) must still be
# ordered by time: it is stamped with the adopting write's stamp moved this far back, below every stamp a
# wall clock gave since 2001 (LEGACY_EPOCH_MS) and in the same order as the adopting writes.
LEGACY_BACK_MS = 10**12
LEGACY_EPOCH_MS = 10**12


def legacy_adopted(stamp: Stamp) -> Stamp:
    return Stamp(max(1, stamp.wall - LEGACY_BACK_MS), stamp.count)


def is_legacy_adoption(stamp: Stamp) -> bool:
    """A stamp :func:`legacy_adopted` gave (no write of anyone is that old): the entry's age is unknown."""
    return ZERO < stamp and stamp.wall < LEGACY_EPOCH_MS

_META = ("hlc", "host")


def content(value: Mapping) -> dict:
    return {k: v for k, v in value.items() if k not in _META}


def _unstamped(value: Mapping) -> bool:
    return value.get("hlc") == "0:0" and value.get("host") == LEGACY_HOST


def bumped(value: Mapping, above: Stamp) -> dict:
    """``value`` restamped just above ``above`` (as nobody: the first writer that sees it stamps it)."""
    out = dict(value)
    out["hlc"] = tick(above, 0).encode()
    out["host"] = LEGACY_HOST
    return out


def view_versions(view: Mapping[str, dict], shards: Mapping[str, Mapping[str, dict]],
                  winners: Mapping[str, dict], adopted: Mapping[str, frozenset[str]] | None = None) -> dict[str, dict]:
    """The versions a view contributes, given every shard's map (host → key → normalized value), the
    shards' merged winners and the adoption record (key → digests of unstamped contents already adopted).

    - equal to the winner: nothing new;
    - unstamped (or upstream's edit of ours) with a content already adopted for the key: upstream's stale
      read-change-write (or a restored old file) bringing back a version that counted once already —
      nothing new (:func:`.order.already_adopted`), even where nothing else holds the key any more;
    - unstamped (upstream writes ``{conversationId, agentId}``) and different from the winner: a newer
      write than the winner (upstream re-created the entry); with no winner: a legacy entry;
    - stamped like a version of ours (same key, host and stamp) but with other content: upstream
      edited our entry in place — newer than it;
    - otherwise (our own version, possibly stale): ordered as it is.
    """
    out: dict[str, dict] = {}
    adopted = adopted or {}
    for key, value in view.items():
        won = winners.get(key)
        if won is not None and (value is won or same_json(value, won)):
            continue
        if adopted and already_adopted(value, adopted.get(key)) and (_unstamped(value) or _upstream_edit(value, key, shards)):
            continue
        if _unstamped(value):
            if won is None:
                out[key] = value
            elif not same_json(content(value), content(won)):
                out[key] = bumped(value, raw_stamp(won))
            continue
        mine = shards.get(value.get("host", ""), {}).get(key)
        if mine is not None and mine.get("hlc") == value.get("hlc") and not same_json(content(mine), content(value)):
            above = max(raw_stamp(mine), raw_stamp(won)) if won is not None else raw_stamp(mine)
            out[key] = bumped(value, above)
            continue
        out[key] = value
    return out


def _upstream_edit(value: Mapping, key: str, shards: Mapping[str, Mapping[str, dict]]) -> bool:
    mine = shards.get(value.get("host", ""), {}).get(key)
    return mine is not None and mine.get("hlc") == value.get("hlc") and not same_json(content(mine), content(value))


def adoptions(adopt: Mapping[str, dict]) -> dict[str, list[str]]:
    """The digests a write records for the versions it adopts that nobody had stamped (upstream's, legacy):
    the same content seen unstamped again counts as that old version (see :func:`view_versions`)."""
    return {k: [adoption_digest(upstream_content(v))] for k, v in adopt.items() if v.get("host") == LEGACY_HOST}


def below_floor(values: Mapping[str, dict], floor: Stamp, *, keep_unstamped: bool) -> dict[str, dict]:
    """``values`` without the versions older than the prune floor (kept: unstamped view entries, which
    are upstream's writes, when ``keep_unstamped``)."""
    if floor == ZERO:
        return dict(values)
    return {k: v for k, v in values.items()
            if raw_stamp(v) >= floor or (keep_unstamped and _unstamped(v))}


def prunable(merged: Mapping[str, dict], sources: list[Mapping[str, dict]], shard_clocks: list[Stamp],
             now_ms: int, retention_ms: int) -> dict[str, Stamp]:
    """Tombstones that may be dropped (key → stamp): older than the retention window, every shard has
    written after them, and no source holds a live version of the key."""
    horizon = now_ms - retention_ms
    oldest_clock = min(shard_clocks, default=ZERO)
    out = {}
    for key, value in merged.items():
        if value.get("deleted") is not True:
            continue
        stamp = raw_stamp(value)
        if stamp.wall >= horizon or oldest_clock < stamp:
            continue
        if any((v := s.get(key)) is not None and v.get("deleted") is not True for s in sources):
            continue
        out[key] = stamp
    return out


@dataclass
class ConversationPlan:
    merged: dict[str, dict]  # every key's winner (tombstones included, pruned ones gone)
    own: dict[str, dict]  # this host's new shard map
    view: dict[str, dict]  # the new conversations.json (live entries)
    pruned: dict[str, Stamp]
    adopted: dict[str, list[str]] = None  # type: ignore[assignment]  # key → digests this write adopts


def plan_conversations(
    *,
    winners: Mapping[str, dict],
    shard_winners: Mapping[str, dict],
    own: Mapping[str, dict],
    change: Mapping[str, dict],
    stamp: Stamp,  # what versions stamped when first seen get: below every stamp in ``change``
    host: str,
    sources: list[Mapping[str, dict]],
    shard_clocks: list[Stamp],
    now_ms: int,
    retention_ms: int,
    legacy_stamp: Stamp | None = None,  # what legacy entries get (legacy_adopted of when they were read)
) -> ConversationPlan:
    """The write: ``winners`` (everything merged), ``shard_winners`` (what the real shards alone say),
    this host's current shard map ``own`` and its ``change`` (already stamped ``stamp``).

    Every winning version must live in some shard, so versions found only in a view or a copy are
    adopted into this host's shard; those that nobody stamped yet (legacy, upstream's) are stamped now.
    This shard takes the merged winner of every key it holds, so shards converge too.
    """
    adopt, first_seen = {}, {}
    for key, value in winners.items():
        # mostly the very version the shards hold (``is``: no call per key of a large home)
        if (have := shard_winners.get(key)) is not None and (have is value or same_json(have, value)):
            continue
        if value.get("host") == LEGACY_HOST:
            first_seen[key] = value
            # a legacy entry (nothing of ours before it) is older than every write of anyone: stamped just
            # above nothing, so a delete or put racing its adoption on another host still wins over it;
            # upstream's rewrite of a version (bumped above it) takes this write's first stamp
            first = (legacy_stamp or legacy_adopted(stamp)) if value.get("hlc") == "0:0" else stamp
            value = dict(value, hlc=first.encode(), host=host)
        adopt[key] = value
    merged = merge_raw([winners, adopt, change])
    dead = {k: v for k, v in merged.items() if v.get("deleted") is True}  # prunable looks only at these
    pruned = prunable(dead, sources, shard_clocks, now_ms, retention_ms)
    for key in pruned:
        del merged[key]
    keys = own.keys() | adopt.keys() | change.keys()
    own_new = {k: merged[k] for k in keys if k in merged}
    view = {k: v for k, v in merged.items() if k not in dead} if dead else dict(merged)
    return ConversationPlan(merged, own_new, view, pruned, adoptions(first_seen))
