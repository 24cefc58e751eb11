"""Daily budgets for what is delivered to the agent: characters and agent turns, per machine and in total
across machines. Optional: no variable set, no cap.

    SUBCONSCIOUS_DAILY_CHARS         characters this machine may send per day
    SUBCONSCIOUS_DAILY_TURNS         agent turns (messages sent) this machine may start per day
    SUBCONSCIOUS_DAILY_CHARS_TOTAL   the same for all machines sharing the home together
    SUBCONSCIOUS_DAILY_TURNS_TOTAL

A day is a UTC day, the same on every machine. The counters live in the shared home as settings of the
store, one key per host (``usage.<host>``: ``{"day", "chars", "turns", "summarised"}``), written only by that
host (under a machine-local lock, so this host's workers never lose each other's counts) and merged like
every setting (newest version wins: there is only one writer per key); the total is the sum over hosts.
Over a cap, an update is summarised — what happened, in counts, no transcript text — instead of sent in
full; the summary still takes a turn (it moves the cursor, so the lines are not sent again tomorrow).

Pure except :func:`read_usage` and :func:`record` (the store).
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

log = logging.getLogger("subconscious")

USAGE_PREFIX = "usage."
ENV = {"chars": "SUBCONSCIOUS_DAILY_CHARS", "turns": "SUBCONSCIOUS_DAILY_TURNS",
       "total_chars": "SUBCONSCIOUS_DAILY_CHARS_TOTAL", "total_turns": "SUBCONSCIOUS_DAILY_TURNS_TOTAL"}


class BudgetError(ValueError):
    """A cap that is not a whole number."""


@dataclass(frozen=True)
class Caps:
    chars: int | None = None
    turns: int | None = None
    total_chars: int | None = None
    total_turns: int | None = None

    @property
    def any(self) -> bool:
        return any(v is not None for v in (self.chars, self.turns, self.total_chars, self.total_turns))


@dataclass(frozen=True)
class Usage:
    day: str
    chars: int = 0
    turns: int = 0
    summarised: int = 0

    def plus(self, chars: int, turns: int = 1, summarised: int = 0) -> "Usage":
        return Usage(self.day, self.chars + chars, self.turns + turns, self.summarised + summarised)

    def to_json(self) -> dict:
        return {"day": self.day, "chars": self.chars, "turns": self.turns, "summarised": self.summarised}


def caps_from_env(env: Mapping[str, str] = os.environ) -> Caps:
    """The caps set in the environment (unset or empty: no cap; ``1_000`` and ``1,000`` are accepted)."""
    got: dict[str, int | None] = {}
    for field, name in ENV.items():
        raw = (env.get(name) or "").strip().replace("_", "").replace(",", "")
        if not raw:
            got[field] = None
        elif raw.isdigit():
            got[field] = int(raw)
        else:
            raise BudgetError(f"{name}={env.get(name)!r} is not a whole number")
    return Caps(**got)


def today(now_s: float | None = None) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(time.time() if now_s is None else now_s))


def usage_key(host: str) -> str:
    return USAGE_PREFIX + host


def parse_usage(value: Any, day: str) -> Usage:
    """A host's counter as stored; another day's (or a damaged one) counts as nothing used today."""
    if not isinstance(value, dict) or value.get("day") != day:
        return Usage(day)
    def n(k: str) -> int:
        v = value.get(k)
        return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else 0
    return Usage(day, n("chars"), n("turns"), n("summarised"))


def usage_by_host(settings: Mapping[str, Any], day: str) -> dict[str, Usage]:
    """Today's counters per host from the store's settings (``{key: value}``)."""
    return {k[len(USAGE_PREFIX):]: parse_usage(v, day) for k, v in settings.items() if k.startswith(USAGE_PREFIX)}


def total(by_host: Mapping[str, Usage], day: str) -> Usage:
    out = Usage(day)
    for u in by_host.values():
        out = out.plus(u.chars, u.turns, u.summarised)
    return out


def over(caps: Caps, mine: Usage, everyone: Usage, chars: int) -> str | None:
    """Why a message of ``chars`` characters may not be sent in full today (None: it may)."""
    checks = [(caps.chars, mine.chars + chars, "this machine's daily characters"),
              (caps.turns, mine.turns + 1, "this machine's daily turns"),
              (caps.total_chars, everyone.chars + chars, "the daily characters of all machines"),
              (caps.total_turns, everyone.turns + 1, "the daily turns of all machines")]
    for cap, would, what in checks:
        if cap is not None and would > cap:
            used = would - (chars if "characters" in what else 1)
            return f"{what}: {used:,} of {cap:,} used today (UTC)"
    return None


_TOOL = re.compile(r"\[Tool: ([^\]]+)\]")


def counts(messages: Sequence[Any]) -> dict[str, Any]:
    """What a run of transcript messages (transcript.Message) holds, in counts only."""
    tools: Counter = Counter()
    c = {"prompts": 0, "answers": 0, "thinking": 0, "tool_calls": 0, "tool_errors": 0, "other": 0, "chars": 0}
    for m in messages:
        c["chars"] += len(m.text)
        if m.role == "user":
            c["prompts"] += 1
        elif m.role == "claude_code":
            t = _TOOL.match(m.text)
            if t:
                c["tool_calls"] += 1
                tools[t.group(1)] += 1
            elif m.text.startswith("[Thinking]"):
                c["thinking"] += 1
            else:
                c["answers"] += 1
        elif m.text.startswith("[Tool Error"):
            c["tool_errors"] += 1
        elif not m.text.startswith("[Tool Result"):
            c["other"] += 1
    c["tools"] = dict(sorted(tools.items()))
    return c


def render_summary(session_id: str, messages: Sequence[Any], lines: tuple[int, int], key: str, why: str) -> str:
    """The update sent instead of transcript lines ``lines`` over a cap: the same session and delivery marker
    (so it is delivered exactly once like any update), counts instead of text."""
    from .transcript import xml_escape

    c = counts(messages)
    tools = ", ".join(f"{name} x{n}" for name, n in c["tools"].items()) or "none"
    body = (f"Transcript lines {lines[0]}-{lines[1]} are not sent in full: the daily budget is reached ({why}).\n"
            f"What happened in them: {c['prompts']} user prompts, {c['answers']} answers from Claude Code, "
            f"{c['tool_calls']} tool calls ({tools}), {c['tool_errors']} tool errors, {c['thinking']} thinking "
            f"blocks, {c['other']} other entries; {c['chars']:,} characters held back.")
    return ("<claude_code_session_update>\n<session_id>%s</session_id>\n"
            '<lines first="%d" last="%d" delivery="%s"/>\n<budget_summary>\n%s\n</budget_summary>\n\n'
            "<instructions>\nThe session went on; only these counts reach you today. Note what they tell you "
            "if anything; there is no transcript text to remember.\n</instructions>\n</claude_code_session_update>"
            % (xml_escape(session_id), lines[0], lines[1], key, xml_escape(body)))


# --------------------------------------------------------------------------- the store (thin)


@dataclass(frozen=True)
class Today:
    caps: Caps
    mine: Usage
    everyone: Usage
    by_host: dict[str, Usage]


def read_usage(store, host: str, caps: Caps, now_s: float | None = None) -> Today:
    day = today(now_s)
    settings = {k: v.value for k, v in store.read().settings.items() if k.startswith(USAGE_PREFIX)}
    by_host = usage_by_host(settings, day)
    return Today(caps, by_host.get(host, Usage(day)), total(by_host, day), by_host)


def record(rt, store, chars: int, summarised: bool = False) -> None:
    """Count one message sent by this host today — only while a cap is set: a count is a write of this host's
    shard (a new version of a file the sync engine carries, holding every conversation entry), not worth
    making after every delivery for nothing. Never raises: the message is delivered already, and a failure
    here must not make the worker send it again."""
    from .state.locks import host_lock

    try:
        if not caps_from_env().any:
            return
    except BudgetError:
        pass  # a cap is meant, if mistyped: count
    try:
        with host_lock(rt.local.locks, f"{rt.host.id}.usage", timeout=30.0):
            day = today()
            key = usage_key(rt.host.id)
            mine = parse_usage(store.setting(key), day)
            store.put_setting(key, mine.plus(chars, 1, 1 if summarised else 0).to_json())
    except Exception as exc:  # noqa: BLE001
        log.warning("worker: could not count %d characters against today's budget (%s)", chars, exc)


def report(settings: Mapping[str, Any], host: str, env: Mapping[str, str] = os.environ,
           now_s: float | None = None) -> dict:
    """Today's use and the caps, for ``status`` (``settings``: the store's, ``{key: Setting}``)."""
    day = today(now_s)
    by_host = usage_by_host({k: getattr(v, "value", v) for k, v in settings.items() if k.startswith(USAGE_PREFIX)},
                            day)
    mine, everyone = by_host.get(host, Usage(day)), total(by_host, day)
    try:
        caps, error = caps_from_env(env), None
    except BudgetError as exc:
        caps, error = Caps(), str(exc)
    reached = over(caps, mine, everyone, 0) if caps.any else None
    return {"day": day, "this_machine": mine.to_json(), "all_machines": everyone.to_json(),
            "hosts": len([u for u in by_host.values() if u.turns]),
            "caps": {"chars": caps.chars, "turns": caps.turns, "total_chars": caps.total_chars,
                     "total_turns": caps.total_turns},
            "reached": reached, "error": error}


def report_line(r: dict) -> str:
    """One line of ``status`` text for :func:`report`'s result."""
    def cap(v):
        return f"{v:,}" if v is not None else "no cap"
    me, all_, c = r["this_machine"], r["all_machines"], r["caps"]
    line = (f"{r['day']} (UTC): this machine {me['chars']:,} chars / {me['turns']} turns "
            f"(caps {cap(c['chars'])} / {cap(c['turns'])}); all machines {all_['chars']:,} chars / {all_['turns']} "
            f"turns (caps {cap(c['total_chars'])} / {cap(c['total_turns'])})")
    if all_["summarised"]:
        line += f"; {all_['summarised']} updates summarised"
    if r.get("reached"):
        line += f"; OVER BUDGET, updates are summarised: {r['reached']}"
    if r.get("error"):
        line += f"; {r['error']} (ignored)"
    return line
