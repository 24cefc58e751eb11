"""Shards nobody writes any more: a machine retired, or a host id replaced on the same machine (its
state dir was reset). Until such a shard is retired, tombstones for the keys it could hold are kept
forever (a delete must not come back from it); ``doctor --fix`` retires it: everything it holds is
adopted into this host's files, then it is moved to ``backups/`` (see ``Store.retire_host``)."""

from __future__ import annotations

from typing import Mapping

from .findings import WARNING, Finding

DAY_MS = 86_400_000


def stale_shards(shards: Mapping[str, object], this_host: str, this_name: str, now_ms: int,
                 window_ms: int) -> list[Finding]:
    """``shards``: host → ShardInfo (``name``, ``written_ms``). Pure."""
    rows = []
    for host, info in sorted(shards.items()):
        if host == this_host:
            continue
        written = getattr(info, "written_ms", 0)
        name = getattr(info, "name", host)
        if name == this_name and name != host:
            why = (f"host {host} has this machine's name ({name}) but another id: this machine's state dir "
                   "was reset and it writes as a new host now")
        elif written and now_ms - written > window_ms:
            why = f"host {host} ({name}) has not written for {(now_ms - written) // DAY_MS} days"
        else:
            continue
        rows.append(Finding("stale-shard", WARNING, f"hosts/{host}.json",
                            f"{why}; its shard keeps old deletes from being pruned. --fix retires it "
                            "(adopts what it holds, then moves it to backups/)",
                            fixable=True, host=host, details={"written_ms": written, "name": name}))
    return rows


def gc_due(store, local_root, now_ms: int, snap=None, problems: list | None = None) -> list[Finding]:
    """A note when ``subconscious gc`` (default age) would retire sessions or prune set-aside files
    (``problems``: what reading every session found is appended to it)."""
    from ..sync.gc import make_plan
    from ..state.store.retention import DEFAULT_AGE, parse_age

    from .findings import INFO

    plan = make_plan(store, local_root, age_ms=parse_age(DEFAULT_AGE), now_ms=now_ms, snap=snap, problems=problems)
    if not plan.retire and not plan.prune:
        return []
    return [Finding("gc-due", INFO, "", f"{len(plan.retire)} session(s) have had no activity for over {DEFAULT_AGE} "
                    f"on every machine, and {len(plan.prune)} set-aside path(s) under backups/ or quarantine/ are "
                    f"that old: `subconscious gc` retires them (`subconscious gc --dry-run` shows which)",
                    details={"sessions": sorted(plan.retire), "set_aside": sorted(plan.prune)})]
