"""Reading the store: the view, every host's shard, their conflict copies and displaced versions,
merged into one :class:`~.snapshot.Snapshot` (a mixin of :class:`~.store.Store`; takes no lock).

Sources are read in the order content moves between them (see ``_read_root``), so whatever a writer
moves meanwhile is seen at least once; entries equal to the canonical view's are validated once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..conflicts import copies
from ..clock import FOLLOW_MS, ZERO, Stamp, bound
from ..files import Problem
from ..copynames import is_original
from ..ids import check_session_id, is_host_id, is_session_id
from ..merge import max_stamp, merge_maps, merge_raw
from .plan import FLOOR_SETTING, below_floor, view_versions
from ..publish import displaced_names, displaced_original
from ..records import Conversation, RecordError, Setting, normalize_record, parse_setting, raw_stamp
from ..bounds import (DEMOTED, SETTING_AHEAD, AheadRecords, demoted, future_message, named_ahead, named_settings,
                     over_bound, when, winners_beyond)
from .snapshot import CONVERSATIONS, HOSTS, ShardInfo, Snapshot, _Read, floor_of
from ..sources import Read, Source, copy_source
from ..conflicts.viewlines import member_lines, read_against, shard_against


_MISSING = object()  # a key the other map lacks (None could be a value read from a file)


def _refused_message(cost: int, kind: str, budget: int) -> str:
    """The report of an ahead record a read does not use (see .bounds)."""
    size = f"at least {cost:,} keys and versions" if cost <= budget else f"over {budget:,} keys and versions"
    mine = (" This host's next write keeps only its entries for keys the home holds." if kind == "own" else "")
    return (f"an ahead record of {size} not used: the ahead records of one read hold at most {budget:,} in all "
            "(the largest are left out): the versions it names are ordered by their own stamps, so a write that "
            f"replaced one may show as not made (nothing is lost).{mine} Planted shards or a crafted record "
            "(check the `ahead` maps in hosts/*.json)")


class Reading:
    """The read side of :class:`~.store.Store`."""

    def _parse_map(self, read: Read, raw_map: Any, parse, what: str, known: dict | None = None) -> dict:
        """``known``: entries already validated (a canonical view's, see viewlines.ViewLines): an equal
        entry (all its fields are strings, so equal as JSON) is taken as it is."""
        if not isinstance(raw_map, dict):
            self.reader.wrong(read, "wrong-type", f"{what} is not a JSON object")
            return {}
        if known is not None:
            # ``k not in known`` first: ``known.get(k)`` is None for a key the view lacks, and would call
            # an entry that *is* ``null`` equal to it (trusted unvalidated, then a crash in raw_stamp)
            others = {k: v for k, v in raw_map.items() if k not in known or known[k] != v}
            if not others:
                return dict(raw_map)
            checked = self._parse_map(read, others, parse, what)
            return {k: checked[k] if k in others else v for k, v in raw_map.items() if k not in others or k in checked}
        out, bad = {}, []
        for key, value in raw_map.items():
            try:
                if what == "conversations" and not is_session_id(key):
                    raise RecordError("not a valid session id")
                out[key] = parse(value)
            except (RecordError, ValueError, TypeError) as exc:
                bad.append(f"{str(key)[:60]!r}: {exc}")
        if bad:
            more = f" (+{len(bad) - 3} more)" if len(bad) > 3 else ""
            self.reader.wrong(read, "invalid-entry", f"skipped {len(bad)} invalid {what} entries: "
                              + "; ".join(bad[:3]) + more)
        return out

    def _shard_names(self, names: list[str]) -> list[str]:
        return sorted(n for n in names if n.endswith(".json") and is_host_id(n[:-5]) and is_original(n, where="hosts"))

    def read(self) -> Snapshot:
        """Merge the view and every host's shard. Takes no lock."""
        return self._read().snap

    def _accept(self, got: _Read, read: Read, ok: bool) -> bool:
        """Record what reading one source found. A weak-name copy whose content is not ours is ignored
        altogether (it is some other file that happens to look like a copy)."""
        if read.source.weak and (read.problems or not ok):
            return False
        got.snap.problems += read.problems
        return True

    def _read_shard(self, got: _Read, source: Source) -> list[tuple[dict, dict, dict]]:
        lines = got.view_lines if got.view_lines is not None and got.view_lines.canonical else None
        # a shard mostly repeats the canonical view line for line: its entries are the view's, parsed once
        read = self.reader.read(source, None if lines is None else (lambda raw: shard_against(raw, lines)))
        out = []
        for value in read.values:
            owner = source.owner
            if not isinstance(value, dict) or (source.weak and value.get("host") != owner):
                self.reader.wrong(read, "wrong-type", "not a shard of ours")
                continue
            if read.quick:  # every entry is the canonical view's (validated there)
                convs = value["conversations"]
            else:
                known = lines.value if lines is not None else None
                convs = self._parse_map(read, value.get("conversations", {}), normalize_record, "conversations", known)
            sets = self._bounded_settings(got, read, self._parse_map(read, value.get("settings", {}), parse_setting,
                                                                     "settings"))
            if got.demote or got.apply_ahead:
                convs = self._demoted(got, read, convs)
            out.append((convs, sets, value))
        if not self._accept(got, read, bool(out)):
            return []
        for _, _, value in out:  # what upstream wrote that a writer already adopted (see plan.view_versions)
            ahead = value.get("ahead")
            if ahead and not got.apply_ahead:  # versions a writer replaced without following their stamp,
                # within the bound of one read (see .bounds); a copy, a displaced or retiring shard may go
                # away: its record is carried on by a writer (for the keys the home holds)
                kind = "own" if source.owner == self.host else "shard"
                got.ahead.add(ahead, str(source.path), kind if source.kind == "shard" else "carried")
            record = value.get("adopted")
            if record:
                got.adopted.add(record)
                if source.kind == "shard" and source.owner == self.host:
                    got.own_adopted.append(record)
                elif source.kind != "shard":  # a copy, a displaced or retiring shard: may go away, so kept
                    got.carried_adopted.append(record)
        if any("ahead" in value for _, _, value in out):  # handed over: not kept with the file's other fields
            # (a planted record would otherwise stay in memory for the whole read: a copy's values are kept)
            slim = {id(v): {k: x for k, x in v.items() if k != "ahead"} for _, _, v in out if "ahead" in v}
            out = [(convs, sets, slim.get(id(v), v)) for convs, sets, v in out]
            read.values = [slim.get(id(v), v) for v in read.values]
        if source.kind == "shard" and source.owner == self.host:
            got.own_raw = read.raw
        if source.foldable and read.raw:
            got.folds.append(read)
            got.snap.copies.append(copies.Found(source.path, source.copy, read.raw))
        if source.kind == "displaced" and read.raw is not None:
            got.displaced.append(read)
        return out

    def _read_root(self, got: _Read, writing: bool = False) -> list[tuple[Source, Read]]:
        """Read the view, then list the directory, then read the view's displaced versions and copies.

        The order is the order in which content moves (a publish swaps the view's version out to a
        displaced name; a fold files a copy away only after its content is in a shard, which is read
        after this): so whatever a writer moves while we read is seen at least once."""
        view = Source(self.view_path, "view")
        first = self.reader.read(view)
        names = self.fs.listdir(self.home)
        others = [Source(self.home / n, "displaced") for n in displaced_names(names, CONVERSATIONS)]
        others += [copy_source(self.home / c.name, c) for c in copies.find(names, "root", CONVERSATIONS)]
        if len(first.values) == 1 and not first.problems and first.raw is not None:
            # a canonical view validates the shards' equal entries and gives a write its unchanged lines
            # (a plain read with nothing else to read against does not pay for that check)
            if others or writing:
                got.view_lines = member_lines(first.raw, first.values[0], canonical_only=not others)
        lines = got.view_lines
        # a copy or displaced version mostly repeats the view: read only the lines the view lacks
        hook = None if lines is None else (lambda raw: read_against(raw, lines))
        return [(view, first), *((source, self.reader.read(source, hook)) for source in others)]

    def _read_view(self, got: _Read, source: Source, read: Read, shard_maps: dict[str, dict], from_shards: dict,
                   floor: Stamp) -> dict[str, dict]:
        merged: dict[str, dict] = {}
        maps = []
        for value in read.values:
            if isinstance(value, dict):  # the view mostly repeats the shards: validate only what differs
                # (a sentinel, not None: a ``null`` entry the shards lack is invalid, reported below)
                value = {k: v for k, v in value.items() if (w := from_shards.get(k, _MISSING)) is not v and w != v}
            m = self._parse_map(read, value, normalize_record, "conversations")
            maps.append(self._demoted(got, read, m) if got.demote or got.apply_ahead else m)
        if not self._accept(got, read, bool(maps) or not read.values):
            return {}
        for m in maps:
            if source.upstream_writable:
                kept = view_versions(m, shard_maps, from_shards, got.adopted)
                if got.adopted:
                    self._hidden_by_record(got, source, m, kept, from_shards)
                m = kept
            merged = merge_raw([merged, below_floor(m, floor, keep_unstamped=source.upstream_writable)])
        if source.kind == "view":
            got.view_raw = read.raw
        elif source.kind == "displaced" and read.raw is not None:
            got.displaced.append(read)
        elif source.foldable and read.raw:
            got.folds.append(read)
            got.snap.copies.append(copies.Found(source.path, source.copy, read.raw))
        got.sources.append(merged)
        return merged

    def _hidden_by_record(self, got: _Read, source: Source, view: dict, kept: dict, from_shards: dict) -> None:
        """Report the unstamped entries of ``view`` dropped as already adopted while no shard holds any version
        of their key: upstream's stale rewrite after the key's tombstone was pruned, or a forged adoption
        record hiding upstream's live entry (red team, issue 24). Never silent: the user can tell."""
        hidden = sorted(k for k, v in view.items()
                        if k not in kept and k not in from_shards and v.get("hlc") == DEMOTED and v.get("host") == "")
        if hidden:
            shown = ", ".join(hidden[:5]) + (f" and {len(hidden) - 5} more" if len(hidden) > 5 else "")
            got.snap.problems.append(Problem("adopted-hidden", str(source.path), (
                f"{len(hidden)} entr{'y' if len(hidden) == 1 else 'ies'} written by the upstream plugin ({shown}) "
                "are not shown: a shard's adoption record says they were adopted already, and no shard holds a "
                "version of them. Upstream's stale rewrite of an entry deleted long ago, or a forged record "
                "(check the `adopted` maps in hosts/*.json); put the entry again to keep it")))

    def _demoted(self, got: _Read, read: Read, convs: dict) -> dict:
        """``convs`` with every version stamped beyond the bound, or named by an ahead record, ordered as the
        oldest (see .bounds)."""
        named = named_ahead(convs, got.ahead) if got.apply_ahead else {}
        if named:
            convs = dict(convs)
            for key, value in named.items():
                got.originals.setdefault(key, set()).add((value["hlc"], value["host"]))
                convs[key] = dict(value, hlc=DEMOTED)
            first = max(named.values(), key=lambda v: raw_stamp(v))
            read.problems.append(Problem("future-stamp", str(read.source.path), (
                f"{len(named)} entr{'y' if len(named) == 1 else 'ies'} (e.g. {next(iter(named))[:60]!r} stamped "
                f"{first['hlc']} by {first['host'][:60]!r}) replaced by a later write whose machine's clock was more "
                f"than {FOLLOW_MS // 60_000} minutes behind that stamp (its shard's ahead record names "
                f"{'it' if len(named) == 1 else 'them'}): ordered as the oldest of their key. A machine whose clock "
                "runs ahead, or a crafted record")))
        if not got.demote:
            return convs
        out, over = demoted(convs, got.bound)
        for key, stamp in over.items():
            got.originals.setdefault(key, set()).add((stamp.encode(), convs[key]["host"]))
        if over:
            read.problems.append(Problem("future-stamp", str(read.source.path), future_message(over, "entries")))
        return out

    def _bounded_settings(self, got: _Read, read: Read, sets: dict[str, Setting]) -> dict[str, Setting]:
        """Settings stamped beyond the bound ordered as the oldest; a prune floor beyond it is no floor."""
        limit = got.bound
        over = {k: s.stamp for k, s in sets.items() if s.stamp > limit}
        for key in over:
            got.originals.setdefault(SETTING_AHEAD + key, set()).add((sets[key].stamp.encode(), sets[key].host))
        named = named_settings(sets, got.ahead) if got.apply_ahead else set()
        if named:  # replaced by a later write whose clock did not follow them (see .bounds)
            for key in named:
                got.originals.setdefault(SETTING_AHEAD + key, set()).add((sets[key].stamp.encode(), sets[key].host))
            read.problems.append(Problem("future-stamp", str(read.source.path), (
                f"{len(named)} setting(s) ({', '.join(sorted(named)[:5])}) replaced by a later write whose machine's "
                f"clock was more than {FOLLOW_MS // 60_000} minutes behind their stamp (its shard's ahead record "
                "names them): ordered as the oldest of their key. A machine whose clock runs ahead, or a crafted record")))
            sets = {k: Setting(s.value, ZERO, s.host) if k in named else s for k, s in sets.items()}
        floor = sets.get(FLOOR_SETTING)
        floor_value = floor_of(sets) if floor is not None else ZERO
        # a floor is set by a write that pruned tombstones stamped below it, so it is never above its own
        # stamp: one that is (``value`` far ahead, ``hlc`` now) is crafted, whatever the bound says
        crafted = floor is not None and floor_value > floor.stamp
        # ... and only tombstones older than the retention window are pruned, by a clock at most the allowed
        # skew ahead: a floor newer than that (a day ago, or 23 h ahead: inside the bound) hides every live
        # entry of every shard that has not written since, which no prune does (red team, issue 24)
        young = floor_value > bound(self.now() - self.retention_ms)
        crafted = crafted or young
        if not over and floor_value <= limit and not crafted:
            return sets
        out = {k: Setting(s.value, ZERO, s.host) if k in over else s for k, s in sets.items()}
        if over:
            read.problems.append(Problem("future-stamp", str(read.source.path), future_message(over, "settings")))
        if floor_value > limit or crafted:
            del out[FLOOR_SETTING]
            message = future_message({FLOOR_SETTING: floor_value}, "floor", what="a tombstone floor")
            if floor_value <= limit and floor_value > floor.stamp:
                message = (f"a tombstone floor {floor_value.encode()} above its own stamp {floor.stamp.encode()} "
                           "(no write sets that): ignored (never adopted into this host's files). A crafted file")
            elif floor_value <= limit and young:
                message = (f"a tombstone floor {floor_value.encode()} ({when(floor_value)}) newer than this machine's "
                           f"clock - {self.retention_ms // 86_400_000} days of tombstone retention + 24 h (no prune sets "
                           "that): ignored (never adopted into this host's files). A clock that was wrong, or a crafted file")
            read.problems.append(Problem("future-stamp", str(read.source.path), message))
        return out

    def _names_host(self, path: Path, original: str) -> bool:
        """Does the shard file at ``path`` say it belongs to the host of ``original`` (``<host>.json``)?"""
        got = self.fs.read(path)
        try:
            value = json.loads(got.data) if got.ok else None
        except (ValueError, RecursionError):
            return False
        return isinstance(value, dict) and value.get("host") == original[: -len(".json")]

    def _read(self, writing: bool = False, demote: bool = False, ahead: dict | None = None) -> _Read:
        """The merged snapshot, this host's own shard, and what the real shards alone say (so a
        writer can adopt versions that live only in the view or in conflict copies).

        A read whose merge would let a version stamped beyond the bound win is done again with such
        versions ordered as the oldest of their key (``demote``): a hostile or broken clock's stamp never
        hides a later write, never moves a clock (see .bounds). The check costs one pass in C over the
        winners; the read is done twice only in a home that holds such a stamp. Likewise a read whose winner
        an ahead record names (``ahead``: the records of the first read) is done again with the versions
        the records name ordered as the oldest."""
        got = _Read(Snapshot(), {}, {}, {}, {}, bound=bound(self.now()), demote=demote, ahead=AheadRecords())
        if ahead is not None:
            got.ahead, got.apply_ahead = ahead, True
        snap = got.snap
        root_reads = self._read_root(got, writing)  # before the shards: see _read_root
        hosts_dir = self.home / HOSTS
        host_names = self.fs.listdir(hosts_dir)
        host_copies = [c for c in copies.find(host_names, "hosts", include_ambiguous=True)
                       if not c.ambiguous or self._names_host(hosts_dir / c.name, c.original)]
        copy_names = {c.name for c in host_copies}
        shard_maps: dict[str, dict] = {}
        shard_sets: list[dict[str, Setting]] = []
        extra_shards: list[tuple[Source, list]] = []
        for name in self._shard_names(host_names):
            if name in copy_names:  # e.g. OneDrive's "<host>-<PC>.json" holding <host>'s shard
                continue
            host = name[:-5]
            if host in self.retiring:
                source = Source(hosts_dir / name, "copy", owner=host)
                extra_shards.append((source, self._read_shard(got, source)))
                continue
            for convs, sets, value in self._read_shard(got, Source(hosts_dir / name, "shard", owner=host)):
                shard_maps[host] = merge_raw([shard_maps.get(host, {}), convs])
                shard_sets.append(sets)
                info = self._shard_info(host, value, len(convs))
                if info.clock > got.bound:  # never followed by the clock (its entries are looked at one by one)
                    got.snap.problems.append(Problem("future-stamp", str(hosts_dir / name),
                                                     future_message({"clock": info.clock}, "clock", what="its clock")))
                snap.shards[host] = info
                got.shard_clocks.append(info.clock)
                if host == self.host:
                    got.own_convs = merge_raw([got.own_convs, convs])
                    got.own_settings = merge_maps([got.own_settings, sets])
        for copy in host_copies:
            source = copy_source(hosts_dir / copy.name, copy, copy.original[:-5])
            extra_shards.append((source, self._read_shard(got, source)))
        for name in host_names:
            original = displaced_original(name)
            if original is not None and original.endswith(".json"):
                source = Source(hosts_dir / name, "displaced", owner=original[:-5])
                extra_shards.append((source, self._read_shard(got, source)))
        from_shards = merge_raw(shard_maps.values())
        got.shard_settings = merge_maps(shard_sets)
        extra_sets = [sets for _, found in extra_shards for _, sets, _ in found]
        snap.settings = merge_maps([got.shard_settings, *extra_sets])
        got.setting_sources = [*shard_sets, *extra_sets]
        # the floor only rises: the largest any source holds (two hosts pruning at once both count)
        floor = got.floor = max((floor_of(sets) for sets in [*shard_sets, *extra_sets]), default=ZERO)
        # a shard that has not written since the floor was set (restored, or back from retirement)
        # cannot bring back what was deleted before it
        stale = [h for h, info in snap.shards.items() if info.clock < floor]
        for host in stale:
            shard_maps[host] = below_floor(shard_maps[host], floor, keep_unstamped=False)
        if stale:
            from_shards = merge_raw(shard_maps.values())
        got.sources = list(shard_maps.values())
        extras = [below_floor(convs, floor, keep_unstamped=False)
                  for _, found in extra_shards for convs, _, _ in found]
        got.sources += extras
        for source, read in root_reads:
            extras.append(self._read_view(got, source, read, shard_maps, from_shards, floor))
        snap.raw = merge_raw([from_shards, *extras])
        got.ahead.settle(lambda: self._held_keys(got))  # what a writer carries on of this host's record
        got.own_ahead, got.carried_ahead = got.ahead.own, got.ahead.carried()
        again = not demote and winners_beyond(snap.raw, got.bound)
        named = ahead is None and bool(got.ahead) and bool(named_ahead(snap.raw, got.ahead)
                                                          or named_settings(snap.settings, got.ahead))
        if again or named:
            return self._read(writing, demote=demote or again, ahead=got.ahead if named or ahead is not None else None)
        got.shard_convs = from_shards
        # a shard's versions are never newer than its clock (a writer ticks past all it read), so only
        # what came from elsewhere (views, copies) and shards whose clock is unreadable are looked at
        # entry by entry: not 100,000 stamps on every write of a large home
        # (a clock beyond the bound is no clock: see .bounds)
        unclocked = [shard_maps[h] for h, info in snap.shards.items()
                     if (info.clock == ZERO or info.clock > got.bound) and h in shard_maps]
        snap.newest = max(
            max((raw_stamp(v) for m in [*extras, *unclocked] for v in m.values()), default=ZERO),
            max_stamp(snap.settings.values()),
            max((s.clock for s in snap.shards.values() if s.clock <= got.bound), default=ZERO),
        )
        for where, cost, kind in got.ahead.refused:
            snap.problems.append(Problem("future-stamp", where, _refused_message(cost, kind, got.ahead.budget)))
        return got

    @staticmethod
    def _held_keys(got: _Read) -> set[str]:
        """The keys the home holds: those of every version read, and each setting's under SETTING_AHEAD."""
        held = {SETTING_AHEAD + k for k in got.snap.settings}
        for m in got.sources:
            held.update(m)
        return held

    @staticmethod
    def _shard_info(host: str, value: dict, entries: int) -> ShardInfo:
        try:
            clock = Stamp.decode(value.get("clock", "0:0"))
        except ValueError:
            clock = ZERO
        written, fmt = value.get("written"), value.get("format")
        return ShardInfo(
            host=host,
            name=str(value.get("name") or host),
            clock=clock,
            written_ms=written if isinstance(written, int) and not isinstance(written, bool) else 0,
            format=fmt if isinstance(fmt, int) and not isinstance(fmt, bool) else 0,
            entries=entries,
        )

    def conversation(self, session_id: str) -> Conversation | None:
        return self.read().get(check_session_id(session_id))

    def setting(self, key: str, default: Any = None) -> Any:
        record = self.read().settings.get(key)
        return default if record is None else record.value
