"""Reading the store: the view, every host's shard, their conflict copies and displaced versions,
merged into one :class:`~.snapshot.Snapshot` (a mixin of :class:`~.store.Store`; takes no lock).

Sources are read in the order content moves between them (see ``_read_root``), so whatever a writer
moves meanwhile is seen at least once; entries equal to the canonical view's are validated once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from . import copies
from .clock import ZERO, Stamp
from .conflicts import is_original
from .ids import check_session_id, is_host_id, is_session_id
from .merge import max_stamp, merge_maps, merge_raw
from .plan import below_floor, view_versions
from .publish import displaced_names, displaced_original
from .records import Conversation, RecordError, Setting, normalize_record, parse_setting, raw_stamp
from .snapshot import CONVERSATIONS, HOSTS, ShardInfo, Snapshot, _Read, floor_of
from .sources import Read, Source, copy_source
from .viewlines import member_lines, read_against, shard_against


_MISSING = object()  # a key the other map lacks (None could be a value read from a file)


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
            sets = self._parse_map(read, value.get("settings", {}), parse_setting, "settings")
            out.append((convs, sets, value))
        if not self._accept(got, read, bool(out)):
            return []
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
            maps.append(self._parse_map(read, value, normalize_record, "conversations"))
        if not self._accept(got, read, bool(maps) or not read.values):
            return {}
        for m in maps:
            if source.upstream_writable:
                m = view_versions(m, shard_maps, from_shards)
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

    def _names_host(self, path: Path, original: str) -> bool:
        """Does the shard file at ``path`` say it belongs to the host of ``original`` (``<host>.json``)?"""
        got = self.fs.read(path)
        try:
            value = json.loads(got.data) if got.ok else None
        except (ValueError, RecursionError):
            return False
        return isinstance(value, dict) and value.get("host") == original[: -len(".json")]

    def _read(self, writing: bool = False) -> _Read:
        """The merged snapshot, this host's own shard, and what the real shards alone say (so a
        writer can adopt versions that live only in the view or in conflict copies)."""
        got = _Read(Snapshot(), {}, {}, {}, {})
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
        got.shard_convs = from_shards
        # a shard's versions are never newer than its clock (a writer ticks past all it read), so only
        # what came from elsewhere (views, copies) and shards whose clock is unreadable are looked at
        # entry by entry: not 100,000 stamps on every write of a large home
        unclocked = [shard_maps[h] for h, info in snap.shards.items() if info.clock == ZERO and h in shard_maps]
        snap.newest = max(
            max((raw_stamp(v) for m in [*extras, *unclocked] for v in m.values()), default=ZERO),
            max_stamp(snap.settings.values()),
            max((s.clock for s in snap.shards.values()), default=ZERO),
        )
        return got

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
