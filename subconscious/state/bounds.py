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

**What one read spends on ahead records is bounded** (red team, issue 37: five planted shards of 60 MiB
with forged records made a SessionStart take 8.4 s and 1.3 GB: every shard's parsed record was kept for the
whole read and passed to its second pass, the record in this host's own shard was parsed entry by entry on
every read and written back whole by every write, and a git merge parsed, sorted and kept a forged record
whole). A record is kept as what a reader looks at, the last :data:`AHEAD_MAX` strings of each key, and
costs one per key and per entry kept (and one per :data:`_CHARS_PER_ITEM` characters of them). The records
of one read keep at most :data:`AHEAD_TOTAL_MAX` in all: past it the largest records are left out (this
host's own last; one that would be the first left out is counted, never copied), and each one left out is
reported (``future-stamp``, naming its file: ``doctor`` shows it). A record costing more than
:data:`AHEAD_WHOLE_MAX` is carried on whole by no writer: this host keeps only its entries for keys the
home holds, a git merge of a shard only those for keys the merged shard holds. On a read a key the home
does not hold is never parsed (:class:`AheadRecords`). The planted files themselves are still parsed, as
any file is (at most ``fs.READ_CAP`` each): what is bounded is what their ahead records add to that.

What leaving a record out can do, and what it cannot. A record only *demotes* the versions it names
(orders them as the oldest of their key); it never adds, removes or promotes a version. So leaving it out
loses no entry and no setting: every version of every file is still read, merged and kept where it was;
a version beyond the bound is still ordered as the oldest (that takes no record); no clock follows a stamp
past its follow limit (that takes no record either); and no writer carries it into its shard (of its own
record left out, this host keeps the entries for keys the home holds). What it can do: a version it names
that is stamped inside the bound (from a clock minutes to hours ahead) orders by its own stamp again, so it
wins its key over the later write that replaced it for as long as the record is left out: a delete or an
update shows as not made. Not lost: that write's version stays in its shard and wins again once the record
is used (the planted records gone) or the key is written again (the writer records the version as ahead
once more). No honest home comes near the bound: a record names only versions a writer replaced without
following their stamp, a few per key at most, and 1,000,000 holds a record naming every key of a
100,000-session home from each of four hosts (248,000 each), or twice from each of two (367,000). And the
largest records are left out first: an honest record is left out only when records no larger than it fill
the bound by themselves (each one left out reported).
"""

from __future__ import annotations

import heapq
import time
from itertools import chain, repeat
from operator import itemgetter
from typing import Any, Callable, Mapping

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


AHEAD_TOTAL_MAX = 1_000_000  # keys and entries the ahead records of one read keep in all (see the docstring)
AHEAD_WHOLE_MAX = 50_000  # a record larger than this is carried on by a writer only for keys the home holds
_CHARS_PER_ITEM = 128  # a record's text costs one more per this many characters (honest strings are shorter)
_STRINGS = {str}
_LISTS = {list}


def _count(raw: dict, limit: int) -> int:
    """The cost of ``raw`` without its characters (at most its cost), counted until it passes ``limit``."""
    cost = len(raw)
    if cost > limit:
        return cost
    for entries in raw.values():
        if type(entries) is list:
            cost += len(entries) if len(entries) < AHEAD_MAX else AHEAD_MAX
            if cost > limit:
                return cost
    return cost


def kept_record(raw, limit: int) -> tuple[dict[str, list[str]] | None, int]:
    """What a reader looks at in the ``ahead`` record ``raw`` (key -> the strings among the last
    :data:`AHEAD_MAX` of its list: :func:`ahead_map` of it is :func:`ahead_map` of ``raw``), and its cost:
    its keys, the last :data:`AHEAD_MAX` entries of each, and one per :data:`_CHARS_PER_ITEM` characters of
    the keys and strings kept. ``(None, cost)`` once the cost passes ``limit``. A record as a writer writes
    it (lists of at most :data:`AHEAD_MAX` strings) is taken as it is, counted in C; any other is counted
    first (refused before anything is copied), then copied."""
    if type(raw) is not dict:
        return {}, 0
    if len(raw) > limit:
        return None, len(raw)
    lists = raw.values()
    if set(map(type, lists)) <= _LISTS and max(map(len, lists), default=0) <= AHEAD_MAX:
        entries = list(chain.from_iterable(lists))
        if set(map(type, entries)) <= _STRINGS:  # as a writer writes it: taken as it is, counted in C
            cost = len(raw) + len(entries) + (sum(map(len, raw)) + sum(map(len, entries))) // _CHARS_PER_ITEM
            return (raw if cost <= limit else None), cost
    cost = _count(raw, limit)
    if cost > limit:
        return None, cost
    out: dict[str, list[str]] = {}
    chars = 0
    for key, entries in raw.items():
        chars += len(key)
        if type(entries) is list and entries:
            tail = entries[-AHEAD_MAX:] if len(entries) > AHEAD_MAX else entries
            if set(map(type, tail)) != _STRINGS:  # anything else is no entry (and may be large): left out
                tail = [e for e in tail if type(e) is str]
                if not tail:
                    continue
            out[key] = tail
            chars += sum(map(len, tail))
            if cost + chars // _CHARS_PER_ITEM > limit:
                return None, cost + chars // _CHARS_PER_ITEM
    return out, cost + chars // _CHARS_PER_ITEM


def held_only(record: Mapping, held) -> dict[str, frozenset[tuple[str, str]]]:
    """:func:`ahead_map` of ``record`` for the keys in ``held`` only (looked up from the smaller side)."""
    if type(record) is not dict:
        return {}
    keys = held if len(held) <= len(record) else [k for k in record if k in held]
    return ahead_map(record, keys)


class AheadRecords:
    """Every shard's ``ahead`` record as read, within :data:`AHEAD_TOTAL_MAX` for one read (see the module
    docstring), parsed one key at a time when a reader asks about it: a record is looked at only for the
    keys the home holds, so a crafted record of 20,000 keys (8.7 MB) costs a read a dict lookup per key it
    holds, not 1.9 s.

    ``kind`` of a record: ``"own"`` (this host's shard: a writer carries it on, see :meth:`settle`),
    ``"carried"`` (a file that may go: a copy, a displaced or retiring shard, whose record a writer carries
    on for the keys the home holds) or ``"shard"``."""

    def __init__(self, budget: int | None = None) -> None:
        self.budget = AHEAD_TOTAL_MAX if budget is None else budget
        self.total = 0  # the cost of the records kept
        self.kept: dict[int, list] = {}  # order added -> [cost, order, where, kind, record]
        self._largest: list[tuple[int, int]] = []  # (-cost, -order) of the kept records not this host's (a heap)
        self.refused: list[tuple[str, int, str]] = []  # (where, cost, kind) of each record not used
        self.own: list[dict[str, frozenset]] = []  # this host's record as a writer carries it on (settle)
        self._own_refused: list[tuple[int, dict]] = []  # this host's records not used: (cost, record)
        self._added = 0
        self._index: dict[str, list[list[str]]] | None = None
        self._cache: dict[str, frozenset] = {}

    def add(self, raw, where: str = "", kind: str = "shard") -> None:
        if type(raw) is not dict or not raw:
            return
        limit = self.budget
        if kind != "own":  # from this cost on it would be the first record left out: counted, not copied
            limit = max(-self._largest[0][0] if self._largest else 0, self.budget - self.total + 1) - 1
        record, cost = kept_record(raw, min(limit, self.budget))
        if record is None:
            self._refuse(where, cost, kind, raw)
            return
        if not record:  # nothing a reader looks at
            return
        self._added += 1
        self.kept[self._added] = [cost, self._added, where, kind, record]
        if kind != "own":
            heapq.heappush(self._largest, (-cost, -self._added))
        self.total += cost
        while self.total > self.budget:  # the largest records go first, this host's own last
            if self._largest:
                victim = self.kept.pop(-heapq.heappop(self._largest)[1])
            else:  # only this host's records are left (the sides of a git conflict)
                victim = self.kept.pop(max(self.kept.values(), key=lambda r: (r[0], r[1]))[1])
            self.total -= victim[0]
            self._refuse(victim[2], victim[0], victim[3], victim[4])
        self._index = None
        self._cache.clear()

    def _refuse(self, where: str, cost: int, kind: str, record: dict) -> None:
        self.refused.append((where, cost, kind))
        if kind == "own":  # dropped at settle, once the keys the home holds are known
            self._own_refused.append((cost, record))

    def settle(self, held: Callable[[], set[str]]) -> None:
        """This host's record as a writer carries it on (:attr:`own`): whole while it is used and within
        :data:`AHEAD_WHOLE_MAX`, else only its entries for the keys ``held()`` gives (the keys the home holds:
        those of every version read, and ``SETTING_AHEAD`` + every setting's). Done once per read."""
        if self._own_refused is None:
            return
        keys: set[str] | None = None
        self.own = []
        mine = [(r[0], r[4], True) for r in self.kept.values() if r[3] == "own"]
        for cost, record, used in [*mine, *((c, r, False) for c, r in self._own_refused)]:
            whole = used and cost <= AHEAD_WHOLE_MAX
            if not whole and keys is None:
                keys = held()
            self.own.append(ahead_map(record) if whole else held_only(record, keys))
        self._own_refused = None  # the raw records go now (a forged one may be tens of MB)

    def carried(self) -> list[dict[str, list[str]]]:
        """The records kept of files that may go (a writer carries them on for the keys the home holds)."""
        return [r[4] for r in self.kept.values() if r[3] == "carried"]

    def __bool__(self) -> bool:
        return bool(self.kept)

    def get(self, key: str, default=None):
        got = self._cache.get(key)
        if got is None:
            if len(self.kept) <= 8:  # a few records: looked up in each
                lists = [r[4][key] for r in self.kept.values() if key in r[4]]
            else:  # many (planted shards): one lookup per key, not one per key and record
                if self._index is None:
                    self._index = {}
                    for r in self.kept.values():
                        for k, entries in r[4].items():
                            self._index.setdefault(k, []).append(entries)
                lists = self._index.get(key, ())
            got = frozenset().union(*map(_entries, lists))
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
