"""Pure checks across hosts' shards: split sessions, split brain, clock skew, legacy entries."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from ..state.clock import ZERO, Stamp
from ..state.records import Setting, raw_stamp
from .findings import INFO, WARNING, Finding

AGENT_SETTING = "agentId"
DEFAULT_SKEW_S = 120.0
MAX_ROWS = 10  # per kind, before the rest is summed up in one row


@dataclass(frozen=True)
class ShardData:
    """One host's shard as doctor needs it (conversations in their normalized JSON form)."""

    host: str
    conversations: Mapping[str, dict] = field(default_factory=dict)
    settings: Mapping[str, Setting] = field(default_factory=dict)
    clock: Stamp = ZERO
    written_ms: int = 0
    path: str = ""


def _own_live(shard: ShardData) -> dict[str, dict]:
    """Live entries the shard's host wrote itself (adopted copies of others' entries keep their host)."""
    return {k: v for k, v in shard.conversations.items() if v.get("host") == shard.host and v.get("deleted") is not True}


def _capped(rows: list[Finding], kind: str, what: str) -> list[Finding]:
    if len(rows) <= MAX_ROWS:
        return rows
    rest = len(rows) - (MAX_ROWS - 1)
    return rows[: MAX_ROWS - 1] + [Finding(kind, rows[0].severity, "", f"... and {rest} more {what}", rows[0].fixable)]


def session_splits(shards: list[ShardData], winners: Mapping[str, dict]) -> list[Finding]:
    """Sessions that different hosts mapped to different conversations (both still in their shards)."""
    by_session: dict[str, dict[str, str]] = {}
    for shard in shards:
        for sid, entry in _own_live(shard).items():
            by_session.setdefault(sid, {})[shard.host] = entry.get("conversationId", "?")
    rows = []
    for sid in sorted(by_session):
        hosts = by_session[sid]
        if len(set(hosts.values())) < 2:
            continue
        win = winners.get(sid)
        if win is None or win.get("deleted") is True:
            continue
        used = win.get("conversationId")
        mapping = ", ".join(f"{conv} on {', '.join(h for h in sorted(hosts) if hosts[h] == conv)}"
                            for conv in sorted(set(hosts.values())))
        rows.append(Finding(
            "session-split", WARNING, "conversations.json",
            f"session {sid} was mapped to different conversations: {mapping}; {used} (the newest) is used, "
            "the other conversation keeps what was sent to it",
            details={"session": sid, "by_host": hosts, "used": used},
        ))
    return _capped(rows, "session-split", "sessions mapped to different conversations")


def agents_by_host(shards: list[ShardData]) -> dict[str, tuple[str, Stamp]]:
    """The agent each host used last: its newest own entry's agentId, or its own agentId setting if newer."""
    out: dict[str, tuple[str, Stamp]] = {}
    for shard in shards:
        best: tuple[str, Stamp] | None = None
        for entry in _own_live(shard).values():
            agent = entry.get("agentId")
            if isinstance(agent, str) and agent:
                stamp = raw_stamp(entry)
                if best is None or stamp > best[1]:
                    best = (agent, stamp)
        setting = shard.settings.get(AGENT_SETTING)
        if setting is not None and setting.host == shard.host and isinstance(setting.value, str) and setting.value:
            if best is None or setting.stamp > best[1]:
                best = (setting.value, setting.stamp)
        if best is not None:
            out[shard.host] = best
    return out


def split_brain(shards: list[ShardData], pinned: Setting | None = None) -> list[Finding]:
    agents = agents_by_host(shards)
    groups: dict[str, list[str]] = {}
    for host, (agent, _) in sorted(agents.items()):
        groups.setdefault(agent, []).append(host)
    if len(groups) < 2:
        return []
    pin = pinned.value if pinned is not None and isinstance(pinned.value, str) else None
    text = "; ".join(f"{agent} on {', '.join(hosts)}" for agent, hosts in sorted(groups.items()))
    advice = (f"the home pins {pin}" if pin else "no agent is pinned in the home") + \
        "; set the same LETTA_AGENT_ID on every machine (or unset it everywhere) so they share one memory"
    return [Finding("split-brain", WARNING, "hosts/", f"hosts use different agents: {text}; {advice}",
                    details={"agents": groups, "pinned": pin})]


def clock_skew(shards: list[ShardData], now_ms: int, threshold_s: float = DEFAULT_SKEW_S) -> list[Finding]:
    """Hosts whose clock runs ahead of this machine's, or behind stamps they had read.

    A shard records its writer's wall clock (``written``) and the hybrid clock it issued (``clock``):
    ``clock`` runs ahead of ``written`` only when the writer had read a stamp from a clock ahead of its
    own; ``written`` after this machine's now means the writer's clock is ahead of this one's.
    """
    limit = int(threshold_s * 1000)
    rows = []
    for shard in sorted(shards, key=lambda s: s.host):
        if shard.written_ms <= 0:
            continue
        ahead = shard.written_ms - now_ms
        if ahead > limit:
            rows.append(Finding(
                "clock-skew", WARNING, shard.path or f"hosts/{shard.host}.json",
                f"host {shard.host} wrote its shard {ahead / 1000:.0f} s in the future by this machine's clock: "
                "one of the two clocks is wrong (enable NTP time sync on both)",
                host=shard.host, details={"ahead_ms": ahead}))
        lag = shard.clock.wall - shard.written_ms
        if lag > limit:
            rows.append(Finding(
                "clock-skew", WARNING, shard.path or f"hosts/{shard.host}.json",
                f"when host {shard.host} last wrote, its clock was {lag / 1000:.0f} s behind the newest stamp it "
                "had read: another host's clock runs ahead (or this one's behind); ordering stays correct, "
                "but fix the clocks (NTP)",
                host=shard.host, details={"behind_ms": lag}))
    return rows


def legacy_unadopted(view: Mapping[str, dict], in_shards: Mapping[str, dict]) -> list[Finding]:
    """Upstream-written entries (no clock) that only the view holds: one rewrite of the view and they
    would be gone; ``--fix`` copies them into this host's shard."""
    legacy = sorted(k for k, v in view.items() if v.get("hlc") == ZERO.encode() and v.get("host") == ""
                    and in_shards.get(k) != v)
    if not legacy:
        return []
    shown = ", ".join(legacy[:5]) + (f" and {len(legacy) - 5} more" if len(legacy) > 5 else "")
    return [Finding("legacy-entry", WARNING, "conversations.json",
                    f"{len(legacy)} entries written by the upstream plugin live only in the view ({shown}); "
                    "--fix keeps them in this host's shard", fixable=True, details={"sessions": legacy})]


def quarantine_note(items: list[dict]) -> list[Finding]:
    if not items:
        return []
    shown = "; ".join(f"{i.get('original', '?')} ({i.get('kind', '?')}, {i.get('at', '?')} by {i.get('host', '?')})"
                      for i in items[:4])
    more = f"; and {len(items) - 4} more" if len(items) > 4 else ""
    return [Finding("quarantined", INFO, "quarantine/",
                    f"{len(items)} set-aside file{'s' * (len(items) != 1)} kept for you to inspect: {shown}{more}",
                    details={"items": items})]
