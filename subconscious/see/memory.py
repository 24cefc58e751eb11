"""The agent's memory blocks, and what changed in them since a time.

Letta keeps no history of a block, so the history is what was seen of them, each with its time:

- ``session``: the values a session was last shown (``lastBlockValues`` of its shared state, full mode),
  at the time its record was last written (the wall part of its clock stamp) — from every machine;
- ``seen``: the values read from the server by ``see`` on this machine (the ``memory`` command, the
  viewer), appended to ``<state dir>/see/blocks.jsonl`` whenever they differ from the last line;
- ``server``: the values now.

``--since T`` diffs the blocks now against the newest snapshot taken at or before T, as the hooks
inject a change (:func:`subconscious.injection.context.changed_blocks`: new / modified with ``-``/``+`` lines /
removed).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..injection.context import as_block, changed_blocks
from .when import iso_ms

HISTORY_FILE = "blocks.jsonl"
HISTORY_KEEP = 200  # snapshots kept when the file is rewritten (past twice as many): a few MB at most


# --------------------------------------------------------------------------- pure

def block_rows(blocks: Iterable[Mapping[str, Any]]) -> list[dict]:
    """One row per block, by label: label, description, size (characters), limit, value, id."""
    rows = []
    for b in blocks:
        value = str(b.get("value") or "")
        rows.append({"label": str(b.get("label", "")), "description": str(b.get("description") or ""),
                     "size": len(value), "limit": b.get("limit"), "value": value, "id": b.get("id")})
    return sorted(rows, key=lambda r: r["label"])


def values_of(rows: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    return {str(r["label"]): str(r.get("value") or "") for r in rows}


def changes(now_values: Mapping[str, str], before: Mapping[str, str]) -> list[dict]:
    """How ``now_values`` differ from ``before``: the change the hooks would inject, as dicts
    (label, status new|modified|removed, removed lines, added lines, value)."""
    blocks = [as_block({"label": k, "value": v}) for k, v in sorted(now_values.items())]
    return [{"label": c.label, "status": c.status, "removed": list(c.removed), "added": list(c.added),
             "value": c.value} for c in changed_blocks(blocks, dict(before))]


def snapshot(at_ms: int, source: str, values: Mapping[str, str], **about: Any) -> dict:
    return {"at_ms": int(at_ms), "at": iso_ms(int(at_ms)), "source": source, "values": dict(values), **about}


def session_snapshots(states: Mapping[str, Any], agent_id: str | None, open_values, host_names: Mapping[str, str]
                      ) -> list[dict]:
    """Snapshots from sessions' ``lastBlockValues`` (``open_values(stored, session_id)`` gives the readable
    values; a snapshot with a value this machine cannot open is left out: it would read as a change)."""
    out = []
    for sid, state in states.items():
        stored = getattr(state, "last_block_values", None)
        if not stored or (agent_id and state.agent_id and state.agent_id != agent_id):
            continue
        values = open_values(stored, sid)
        if len(values) != len(stored):
            continue
        out.append(snapshot(state.stamp.wall, "session", values, session=sid, host=state.host,
                            host_name=host_names.get(state.host, state.host)))
    return out


def baseline_at(snapshots: Iterable[dict], at_ms: int) -> dict | None:
    """The newest snapshot taken at or before ``at_ms`` (None: nothing was seen that early)."""
    before = [s for s in snapshots if s["at_ms"] <= at_ms]
    return max(before, key=lambda s: s["at_ms"]) if before else None


def timeline(snapshots: Iterable[dict]) -> list[dict]:
    """Snapshots oldest first, each with ``changes`` from the one before (a snapshot equal to the one
    before it is dropped; the first has no ``changes``: nothing earlier to compare with)."""
    out: list[dict] = []
    for s in sorted(snapshots, key=lambda s: s["at_ms"]):
        if out and out[-1]["values"] == s["values"]:
            continue
        item = dict(s)
        item["changes"] = changes(s["values"], out[-1]["values"]) if out else None
        out.append(item)
    return out


# --------------------------------------------------------------------------- machine-local history

def history_path(local_root: Path) -> Path:
    return Path(local_root) / "see" / HISTORY_FILE


def read_history(path: Path, agent_id: str | None = None) -> list[dict]:
    """The ``seen`` snapshots of ``path`` (for ``agent_id`` if given); unreadable lines are skipped."""
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    for line in text.splitlines():
        try:
            item = json.loads(line)
            at, values = int(item["at_ms"]), item["values"]
        except (ValueError, KeyError, TypeError):
            continue
        if not isinstance(values, dict) or (agent_id and item.get("agent") != agent_id):
            continue
        out.append(snapshot(at, "seen", {str(k): str(v) for k, v in values.items()}, agent=item.get("agent")))
    return out


def record_history(path: Path, agent_id: str, values: Mapping[str, str], now_ms: int) -> bool:
    """Append ``values`` when they differ from the last snapshot of this agent; True if appended."""
    past = read_history(path, agent_id)
    if past and past[-1]["values"] == dict(values):
        return False
    from ..base.atomic import ensure_dir

    ensure_dir(path.parent)
    line = json.dumps({"at_ms": int(now_ms), "agent": agent_id, "values": dict(values)}, sort_keys=True) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    if len(lines) > 2 * HISTORY_KEEP:  # bounded: keep the newest lines
        from ..base.atomic import atomic_write

        atomic_write(path, "".join(lines[-HISTORY_KEEP:]), durable=False)
    return True


# --------------------------------------------------------------------------- shell

def _agent(home, agent_id: str | None) -> dict:
    aid = agent_id or home.agent_id()
    if not aid:
        raise LookupError("no agent yet: no session has started and LETTA_AGENT_ID is not set")
    return home.letta().get_agent(aid, include_blocks=True)


def _open_values(home):
    from ..injection.blockcache import machine_policy, open_blocks
    from ..privacy.keys import policy_of

    # as the hooks read them: while encryption is on, a plain or retired-key value is nobody's snapshot
    policy = machine_policy(home.store, home.keyring, policy_of(home.snapshot.settings))
    return lambda stored, sid: open_blocks(stored, home.keyring, sid, policy)


def snapshots(home, agent_id: str) -> list[dict]:
    """Every snapshot this machine knows of the agent's blocks: sessions' and its own ``seen`` ones."""
    return (session_snapshots(home.session_states, agent_id, _open_values(home), home.host_names())
            + read_history(history_path(home.local_root), agent_id))


def memory(home, *, label: str | None = None, since_ms: int | None = None, agent_id: str | None = None,
           now_ms: int | None = None) -> dict:
    """``{agent: {id, name}, blocks: [row…], since: None | {at, baseline, changes}}``.

    ``label`` keeps that block only (LookupError naming the labels there are if it has none); ``since_ms``
    adds what changed since then (``baseline`` None: nothing was seen that early, every block counts as new)."""
    import time

    now = int(time.time() * 1000) if now_ms is None else now_ms
    agent = _agent(home, agent_id)
    rows = block_rows(agent.get("blocks") or [])
    current = values_of(rows)
    try:
        record_history(history_path(home.local_root), agent["id"], current, now)
    except OSError:
        pass  # the history is a convenience; reading memory still works
    out: dict[str, Any] = {"agent": {"id": agent["id"], "name": agent.get("name")}, "blocks": rows, "since": None}
    if since_ms is not None:
        base = baseline_at([s for s in snapshots(home, agent["id"]) if s["at_ms"] < now], since_ms)
        diff = changes(current, base["values"] if base else {})
        out["since"] = {"at": iso_ms(since_ms), "baseline": {k: v for k, v in base.items() if k != "values"} if base else None,
                        "changes": diff}
    if label is not None:
        out["blocks"] = [r for r in rows if r["label"] == label]
        if not out["blocks"]:
            raise LookupError(f"no block labelled {label!r}; the agent has: {', '.join(r['label'] for r in rows) or 'none'}")
        if out["since"]:
            out["since"]["changes"] = [c for c in out["since"]["changes"] if c["label"] == label]
    return out


def memory_history(home, *, agent_id: str | None = None, now_ms: int | None = None) -> dict:
    """``{agent, timeline: [snapshot + changes…]}``: how the blocks changed, oldest first, ending with now."""
    import time

    now = int(time.time() * 1000) if now_ms is None else now_ms
    agent = _agent(home, agent_id)
    current = values_of(block_rows(agent.get("blocks") or []))
    try:
        record_history(history_path(home.local_root), agent["id"], current, now)
    except OSError:
        pass
    snaps = [s for s in snapshots(home, agent["id"]) if s["source"] != "seen" or s["at_ms"] < now]
    snaps.append(snapshot(now, "server", current))
    return {"agent": {"id": agent["id"], "name": agent.get("name")}, "timeline": timeline(snaps)}


def set_block(home, label: str, value: str, *, agent_id: str | None = None) -> dict:
    """Set one block's value through the Letta API (the viewer's explicit edit): the block's new row."""
    aid = agent_id or home.agent_id()
    if not aid:
        raise LookupError("no agent yet: no session has started and LETTA_AGENT_ID is not set")
    return block_rows([home.letta().modify_block(aid, label, value)])[0]


def matching_lines(rows: Iterable[Mapping[str, Any]], query: str) -> list[dict]:
    """Lines of the blocks that hold every word of ``query`` (case-insensitive): {label, line}. Pure."""
    words = [w for w in query.lower().split() if w]
    out = []
    for r in rows:
        for line in str(r.get("value") or "").splitlines():
            low = line.lower()
            if line.strip() and words and all(w in low for w in words):
                out.append({"label": r["label"], "line": line.strip()})
    return out


def search_memory(home, query: str, *, top_k: int = 10, agent_id: str | None = None) -> dict:
    """``{blocks: [{label, line}], archival: [{content, timestamp, tags}] | None, archival_error}``: block
    lines holding every word of ``query``, and archival passages nearest it (None when the server could not
    search, with the reason in ``archival_error``)."""
    agent = _agent(home, agent_id)
    rows = block_rows(agent.get("blocks") or [])
    out: dict[str, Any] = {"agent": {"id": agent["id"], "name": agent.get("name")},
                           "blocks": matching_lines(rows, query), "archival": None, "archival_error": None}
    try:
        out["archival"] = [{"content": p.get("content"), "timestamp": p.get("timestamp"), "tags": p.get("tags") or []}
                           for p in home.letta().search_archival(agent["id"], query, top_k=top_k)]
    except Exception as exc:  # noqa: BLE001 - a server without archival search still answers with the blocks
        out["archival_error"] = str(exc)
    return out
