"""Pure: stamps and floors from beyond this machine's clock + :data:`~.clock.ALLOWED_SKEW_MS`.

A stamp is a claim of the writer's clock. Within the bound (:func:`~.clock.bound`) the hybrid clock
orders writes as usual; beyond it the claim is a broken clock or a crafted file, and taking it would let
one file decide every later merge (a version at ``9999999999999999:999999999`` beats every write made
after it, and a clock that follows it pins every host's clock at the end of the text form). So:

- a **version** (conversation entry, tombstone, setting, session version) stamped beyond the bound is
  kept, and ordered as the **oldest** version of its key: its stamp counts as ``0:0`` (its host and
  content still order it among equal stamps). Where nothing else was ever written for the key it is
  still what a read returns (nothing is lost: a machine whose clock ran days ahead keeps what it wrote);
  any in-bound write of the key wins over it, now and later (an attacker's copy never hides a put).
  A session version's cursor still counts (the cursor never moves back: what it records was delivered).
  The next writer of the key stores it demoted, so it stays the oldest even once real time passes its
  stamp.
- a **floor** (the tombstone prune floor, a session floor) beyond the bound is no floor: ignored, never
  adopted into this host's files;
- a **shard clock** beyond the bound counts as unknown (its entries are looked at one by one);
- the **clock** never follows a stamp beyond the bound, and a write of the conversations map none beyond
  :func:`~.clock.follow_limit` (now + a few minutes): what such a write replaces from beyond it is recorded
  as *ahead* and ordered as the oldest by every reader (see the ahead records below, and
  :meth:`.writing.Writing._next_stamps`).

Every case is reported (``future-stamp``: ``doctor``, ``doctor --json``, ``status``).
"""

from __future__ import annotations

import time
from itertools import repeat
from operator import itemgetter
from typing import Any, Mapping

from .clock import STAMP_RE, ZERO, Stamp

DEMOTED = ZERO.encode()  # the stamp a version beyond the bound is ordered with
_HLC = itemgetter("hlc")


def over_bound(values: Mapping[str, dict], limit: Stamp) -> dict[str, Stamp]:
    """Key -> stamp of the normalized versions in ``values`` stamped beyond ``limit`` (exact)."""
    out = {}
    for key, value in values.items():
        stamp = Stamp.decode(value["hlc"])
        if stamp > limit:
            out[key] = stamp
    return out


def winners_beyond(values: Mapping[str, dict], limit: Stamp) -> bool:
    """Does any version in ``values`` carry a stamp beyond ``limit``? Three passes in C over the stamps'
    text (this runs on every read of the home), exact only for the few it cannot rule out: a stamp beyond
    the bound has a longer wall than the bound's, or one of equal length that sorts after it."""
    if not values:
        return False
    stamps = list(map(_HLC, values.values()))
    text = str(limit.wall)
    if max(map(str.find, stamps, repeat(":"))) <= len(text) and max(stamps) <= text:
        return False
    return bool(over_bound(values, limit))


def demoted(values: Mapping[str, dict], limit: Stamp) -> tuple[dict[str, dict], dict[str, Stamp]]:
    """``values`` with each version beyond ``limit`` ordered as the oldest (stamp ``0:0``), and what was."""
    over = over_bound(values, limit)
    if not over:
        return dict(values), over
    out = dict(values)
    for key in over:
        out[key] = dict(values[key], hlc=DEMOTED)
    return out, over


def when(stamp: Stamp) -> str:
    """A stamp's wall part as a UTC date a user can read (or 'beyond year 9999')."""
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamp.wall / 1000))
    except (OverflowError, OSError, ValueError):
        return "beyond year 9999"


def future_message(over: Mapping[str, Stamp], kind: str, what: str | None = None) -> str:
    """The report of stamps beyond the bound found in one file."""
    first, stamp = next(iter(sorted(over.items(), key=lambda kv: kv[1], reverse=True)))
    head = what or f"{len(over)} {kind if len(over) != 1 else kind.rstrip('s')}"
    more = f" (e.g. {str(first)[:60]!r})" if what is None else ""
    if kind == "floor":
        effect = "ignored (never adopted into this host's files)"
    elif kind == "clock":
        effect = "not followed (this machine's clock stays its own)"
    else:
        effect = ("ordered as the oldest version of their key: any write within the bound wins; "
                  "kept where nothing else was written")
    return (f"{head}{more} stamped {stamp.encode()} ({when(stamp)}), beyond this machine's clock + 24 h: "
            f"{effect}. A clock that was wrong, or a crafted file")


# --------------------------------------------------------------------------- ahead records
#
# A write that replaces a version stamped beyond the writer's follow limit (clock.follow_limit: its clock
# + a few minutes) does not follow that stamp; it records the version (its stamp and host) as *ahead* for
# the key in the writer's shard (``"ahead": {key: ["<hlc>@<host>", ...]}``), and every reader orders a
# version named by any shard's record as the oldest of its key (stamp 0:0), as it orders a version beyond
# the bound. The records only grow (a union), so every reader of the same files picks the same winner.

AHEAD_MAX = 16  # versions recorded per key (the newest)
# a setting's versions are recorded under this prefix and its key (no session id starts with it): a setting
# is last-writer-wins like an entry, and a correct host's write of one a host far ahead wrote lost to it
SETTING_AHEAD = "setting "


def named_settings(values: Mapping[str, Any], ahead: Mapping[str, frozenset]) -> set[str]:
    """The keys of the settings in ``values`` whose version an ahead record names."""
    return {k for k, s in values.items()
            if (entries := ahead.get(SETTING_AHEAD + k)) and (s.stamp.encode(), s.host) in entries}


def ahead_entry(hlc: str, host: str) -> str:
    return f"{hlc}@{host}"


def _entries(entries) -> frozenset[tuple[str, str]]:
    got = set()
    if type(entries) is list:
        for entry in entries[-AHEAD_MAX:]:
            if type(entry) is str and "@" in entry:
                hlc, _, host = entry.partition("@")
                if STAMP_RE.fullmatch(hlc) is not None:  # what Stamp.decode takes, without building one
                    got.add((hlc, host))
    return frozenset(got)


def ahead_map(raw, keys=None) -> dict[str, frozenset[tuple[str, str]]]:
    """A shard's ``ahead`` record as read (key -> {(hlc, host)}), only ``keys`` if given: anything malformed
    is left out."""
    out: dict[str, frozenset[tuple[str, str]]] = {}
    if type(raw) is not dict:
        return out
    items = raw.items() if keys is None else ((k, raw[k]) for k in keys if k in raw)
    for key, entries in items:
        if type(key) is str and (got := _entries(entries)):
            out[key] = got
    return out


class AheadRecords:
    """Every shard's ``ahead`` record as read, parsed one key at a time when a reader asks about it: a
    record is looked at only for the keys the home holds, so a crafted record of 20,000 keys (8.7 MB) costs
    a read a dict lookup per key it holds, not 1.9 s."""

    def __init__(self) -> None:
        self.raws: list[dict] = []
        self._cache: dict[str, frozenset] = {}

    def add(self, raw) -> None:
        if type(raw) is dict and raw:
            self.raws.append(raw)
            self._cache.clear()

    def __bool__(self) -> bool:
        return bool(self.raws)

    def get(self, key: str, default=None):
        got = self._cache.get(key)
        if got is None:
            got = frozenset().union(*(_entries(r[key]) for r in self.raws if key in r))
            self._cache[key] = got
        return got or default


def add_ahead(into: dict[str, frozenset], more: Mapping[str, frozenset]) -> None:
    for key, entries in more.items():
        have = into.get(key)
        into[key] = entries if have is None else have | entries


def named_ahead(values: Mapping[str, dict], ahead: Mapping[str, frozenset]) -> dict[str, dict]:
    """The versions in ``values`` that an ahead record names (key -> version)."""
    out = {}
    for key, value in values.items():
        entries = ahead.get(key)
        if entries and (value["hlc"], value["host"]) in entries:
            out[key] = value
    return out


def outgrown(record: Mapping[str, list[str]], held: Mapping[str, str]) -> dict[str, list[str]]:
    """``record`` without the entries that no longer decide anything: a named version stamped before the
    version this shard holds for its key (``held``: key -> that version's stamp text) loses to it by
    plain order, as it would demoted, for as long as the shard holds it (a shard's version of a key is
    only ever replaced by a newer one). One stamped *equal* to it stays: equal stamps are ordered by host,
    and the named version may win that tie. So the record shrinks once this host's clock passes what it names,
    instead of growing with every key ever written over a clock that ran ahead."""
    out = {}
    for key, entries in record.items():
        mine = held.get(key)
        if mine is None:
            out[key] = entries
            continue
        floor = Stamp.decode(mine)
        kept = [e for e in entries if Stamp.decode(e.partition("@")[0]) >= floor]
        if kept:
            out[key] = kept
    return out


def _by_stamp(entry: tuple[str, str]) -> tuple[int, int, str]:
    """(hlc, host) in stamp order then host, as :class:`~.clock.Stamp` orders (wall, count): ints, not a
    Stamp per entry (a record of 20,000 keys is sorted on every write of its host and every git merge)."""
    wall, _, count = entry[0].partition(":")
    return int(wall), int(count), entry[1]


def ahead_record(own: Mapping[str, frozenset], new: Mapping[str, set]) -> dict[str, list[str]]:
    """This host's record: what its shard held, with ``new`` (key -> {(hlc, host)}) added, the newest
    :data:`AHEAD_MAX` per key kept (by stamp)."""
    keys = set(own) | set(new)
    out = {}
    for key in sorted(keys):
        entries = set(own.get(key, ())) | set(new.get(key, ()))
        best = sorted(entries, key=_by_stamp)[-AHEAD_MAX:] if len(entries) > 1 else entries
        out[key] = [ahead_entry(h, host) for h, host in best]
    return out


def demote_named(values: dict[str, dict], named: Mapping[str, set]) -> dict[str, dict]:
    """``values`` with the versions ``named`` (key -> {(hlc, host)}) ordered as the oldest."""
    hit = [k for k in named if (v := values.get(k)) is not None and (v["hlc"], v["host"]) in named[k]]
    if not hit:
        return values
    out = dict(values)
    for key in hit:
        out[key] = dict(values[key], hlc=DEMOTED)
    return out
