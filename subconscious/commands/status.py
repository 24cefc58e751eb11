"""``subconscious status``: where state lives, who this host is, and what the store found."""

from __future__ import annotations

import argparse

from ..local.sessions import gave_up_deliveries, pending_deliveries  # noqa: F401 (read by see/sessions.py too)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def collect() -> dict:
    from ..local.runtime import runtime

    rt = runtime()
    s = rt.settings
    store = rt.store(read_only=True)
    snap = store.read()
    sessions = list(store.sessions())
    session_ids = [sid for sid, _, _ in sessions]
    session_problems = [p for _, _, problems in sessions for p in problems]
    from ..state.conflicts import copies

    session_copies: dict[str, list] = {}
    for c in copies.find(copies.listdir(store.home), "root"):
        if c.original != "conversations.json":
            session_copies.setdefault(c.original, []).append(c)
    live = snap.live
    pinned = snap.settings.get("agentId")
    agents = sorted({c.agent_id for c in live.values() if c.agent_id})
    return {
        "home": str(s.state_home),
        "letta_home": str(s.letta_home),
        "host": {"id": rt.host.id, "name": rt.host.name},
        "state_dir": str(rt.local.root),
        "mode": s.mode,
        "sdk_tools": s.sdk_tools,
        "base_url": s.base_url,
        "api_key": "set" if s.api_key else "not set",
        "agent": s.agent_id or (pinned.value if pinned else None),
        "agent_source": "LETTA_AGENT_ID" if s.agent_id else ("pinned in home" if pinned else None),
        "found": {
            "sessions": len(session_ids),
            "conversations": len(live),
            "legacy_entries": sum(1 for c in live.values() if c.legacy),
            "tombstones": len(snap.conversations) - len(live),
            "hosts": len(snap.shards),
            "agents_in_use": len(agents),
            "conflict_copies": len(snap.copies) + sum(len(c) for c in session_copies.values()),
            "problems": len(snap.problems) + len(session_problems),
        },
        "problems": [
            {"kind": p.kind, "path": p.path, "message": p.message} for p in snap.problems + session_problems
        ],
        "pending": pending_deliveries(rt.local.root / "sessions"),
        "gave_up": gave_up_deliveries(rt.local.root / "sessions"),
        "budget": _budget(snap.settings, rt.host.id, rt.settings.state_home),
    }


def _budget(settings, host: str, home=None) -> dict:
    from ..delivery.budget import report

    return report(settings, host, home=home)


def run(args: argparse.Namespace) -> int:
    from ..config import ConfigError
    from ..state.ids import InvalidIdentifier

    try:
        info = collect()
    except (ConfigError, InvalidIdentifier) as exc:
        from .common import fail

        return fail(None, exc, "config", 2)
    if args.json:
        from ..base.termtext import json_dumps

        print(json_dumps(info, indent=2))
        return 0
    from .tables import console

    render(info, console())
    return 0


def text_rows(info: dict) -> list[tuple[str, str]]:
    """What ``status`` shows people, as (key, value) rows; the value column wraps, the keys stay put."""
    found = info["found"]
    rows = [
        ("home", info["home"]),
        ("host", f"{info['host']['id']} ({info['host']['name']})"),
        ("state dir", info["state_dir"]),
        ("mode", f"{info['mode']} (sdk tools: {info['sdk_tools']})"),
        ("server", f"{info['base_url']} (API key {info['api_key']})"),
        ("agent", f"{info['agent']} ({info['agent_source']})" if info["agent"] else "not resolved yet"),
        (
            "found",
            f"{found['sessions']} sessions, {found['conversations']} conversations "
            f"({found['legacy_entries']} legacy), {found['tombstones']} deleted, {found['hosts']} hosts, "
            f"{found['conflict_copies']} conflict copies, {found['problems']} problems",
        ),
    ]
    for p in info["problems"]:
        rows.append(("", f"! {p['kind']}: {p['path']}: {p['message']}"))
    from ..delivery.budget import report_line

    rows.append(("budget", report_line(info["budget"])))
    pend = info.get("pending") or []
    rows.append(("pending", f"{len(pend)} deliveries" if pend else "none"))
    for d in pend:
        what = "start message" if d["start_message"] else (f"lines {d['lines'][0]}-{d['lines'][1]}" if d["lines"] else "new lines")
        rows.append(("", f"- {d['session']}: {what}, {d['failures']} failures, next attempt in {d['next_attempt_in_s']} s: {d['why']}"))
    for g in info.get("gave_up") or []:
        lines = g.get("lines") if isinstance(g.get("lines"), list) and len(g["lines"]) == 2 else ["?", "?"]
        rows.append(("gave up", f"{g.get('session')}: lines {lines[0]}-{lines[1]} (delivery {g.get('delivery')}): "
                                f"{g.get('why')}"))
    return rows


def render(info: dict, con) -> None:
    from .tables import kv_table

    t = kv_table()
    for key, value in text_rows(info):
        t.add_row(key, value)
    con.print(t)
