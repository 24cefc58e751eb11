"""Daily budgets for what is delivered to the agent: characters and agent turns, per machine and in total
across machines. Optional: no variable set, no cap.

    SUBCONSCIOUS_DAILY_CHARS         characters this machine may send per day
    SUBCONSCIOUS_DAILY_TURNS         agent turns (messages sent) this machine may start per day
    SUBCONSCIOUS_DAILY_CHARS_TOTAL   the same for all machines sharing the home together
    SUBCONSCIOUS_DAILY_TURNS_TOTAL

    SUBCONSCIOUS_BUDGET_OVERFLOW     what happens to lines over a cap: defer (default) or summarise

A day is a UTC day, the same on every machine. The counters live in the shared home, one shard per host
and day, ``budget/<day>/<host>.json``, written only by that host (under a machine-local lock, so this
host's workers never lose each other's counts); readers sum the shards. (Older versions counted in the
store's settings, ``usage.<host>``; a host without a shard for the day counts by its setting.)

**Reserved before the send.** A worker first *reserves* the update's characters and one turn in its host's
shard, then reads every host's shard: the update goes only if the used counts plus every reservation it can
see stay within the caps; else its reservation is released (and, when only reservations made after its own
were in the way, it tries again after a short random pause: :func:`reserve`). After the send the reservation is settled (counted as used); a failed send
releases it; one a killed worker left expires after :data:`RESERVATION_TTL_S`. A reservation no reader
could see yet (the sync engine has not carried it) is the only way past a cap: the overshoot is at most
what the other hosts reserved unseen — with N hosts each sending one update meanwhile, (N-1) × one update.

**Over a cap** (``SUBCONSCIOUS_BUDGET_OVERFLOW``): ``defer`` — nothing is sent, the cursor stays, the lines
go when the budget allows (the retry is due at the next UTC midnight); ``summarise`` — an update of counts,
no transcript text, replaces the lines, which are then never sent: the shard lists them and ``status``
says "summarised for good". The summary itself takes a turn (counted, never refused).

Pure except the shard functions (:func:`read_day`, :func:`reserve`, :func:`settle`, :func:`release`, …).
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
OVERFLOW_ENV = "SUBCONSCIOUS_BUDGET_OVERFLOW"
OVERFLOWS = ("defer", "summarise")
DEFAULT_OVERFLOW = "defer"  # nothing is lost: the lines wait for the budget, they are not replaced by counts
BUDGET_DIR = "budget"
RESERVATION_TTL_S = 1800.0  # a reservation older than this was left by a killed worker: it counts no more
MAX_SHARD_BYTES = 1 << 20
_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_HOST = re.compile(r"[A-Za-z0-9_.-]{1,128}")


def overflow_from_env(env: Mapping[str, str] = os.environ) -> str:
    """``defer`` or ``summarise`` (anything else: the default, defer, with a warning)."""
    raw = (env.get(OVERFLOW_ENV) or "").strip().lower().replace("summarize", "summarise")
    if raw in OVERFLOWS:
        return raw
    if raw:
        log.warning("%s=%r is neither defer nor summarise; deferring", OVERFLOW_ENV, env.get(OVERFLOW_ENV))
    return DEFAULT_OVERFLOW


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
        return min(v, 10**15) if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else 0
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


TOOL_NAME_CUT = 64  # characters of a tool's name in a summary (the API's own limit for a tool name)


def render_summary(session_id: str, messages: Sequence[Any], lines: tuple[int, int], key: str, why: str,
                   max_chars: int | None = None) -> str:
    """The update sent instead of transcript lines ``lines`` over a cap: the same session and delivery marker
    (so it is delivered exactly once like any update), counts instead of text. Within ``max_chars``: the
    most used tools are named while they fit, the others counted ("N other tools xM")."""
    from .transcript import xml_escape

    c = counts(messages)
    tools = sorted(c["tools"].items(), key=lambda kv: (-kv[1], kv[0]))

    def render(k: int) -> str:  # the k most used tools by name
        named = [f"{name[:TOOL_NAME_CUT]}{'…' if len(name) > TOOL_NAME_CUT else ''} x{n}" for name, n in tools[:k]]
        if tools[k:]:
            named.append(f"{len(tools) - k} other tools x{sum(n for _, n in tools[k:])}")
        body = (f"Transcript lines {lines[0]}-{lines[1]} are not sent in full: the daily budget is reached ({why}).\n"
                f"What happened in them: {c['prompts']} user prompts, {c['answers']} answers from Claude Code, "
                f"{c['tool_calls']} tool calls ({', '.join(named) or 'none'}), {c['tool_errors']} tool errors, "
                f"{c['thinking']} thinking blocks, {c['other']} other entries; {c['chars']:,} characters held back.")
        return ("<claude_code_session_update>\n<session_id>%s</session_id>\n"
                '<lines first="%d" last="%d" delivery="%s"/>\n<budget_summary>\n%s\n</budget_summary>\n\n'
                "<instructions>\nThe session went on; only these counts reach you today. Note what they tell you "
                "if anything; there is no transcript text to remember.\n</instructions>\n</claude_code_session_update>"
                % (xml_escape(session_id), lines[0], lines[1], key, xml_escape(body)))

    text = render(len(tools))
    if max_chars is None or len(text) <= max_chars:
        return text
    lo, hi = 0, len(tools) - 1  # the most tools named that fit (sizes grow with k, give or take the count)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(render(mid)) <= max_chars:
            lo = mid
        else:
            hi = mid - 1
    while lo > 0 and len(render(lo)) > max_chars:
        lo -= 1
    return render(lo)


# --------------------------------------------------------------------------- the shards (thin)


def empty_shard(host: str, day: str) -> dict:
    return {"format": 1, "host": host, "day": day, "chars": 0, "turns": 0, "summarised": 0, "reserved": {},
            "deferred": {}, "summarised_lines": {}}


def parse_shard(raw: bytes, host: str, day: str) -> dict | None:
    """A host's shard as stored, checked (None: not one of ours for this host and day)."""
    import json

    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict) or value.get("host") != host or value.get("day") != day:
        return None
    out = empty_shard(host, day)
    for k in ("chars", "turns", "summarised"):
        out[k] = _n(value.get(k))
    for k in ("reserved", "deferred", "summarised_lines"):
        v = value.get(k)
        out[k] = {str(t): r for t, r in v.items() if isinstance(r, dict)} if isinstance(v, dict) else {}
    return out


MAX_COUNT = 10**15  # a count beyond this is damage (or hostile): it counts as this much, never more


def _n(v: Any) -> int:
    return min(v, MAX_COUNT) if type(v) is int and v >= 0 else 0


def _read_file(path) -> bytes | None:
    """A regular file's bytes, never through a symbolic link, never more than MAX_SHARD_BYTES."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        import stat

        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, MAX_SHARD_BYTES + 1)[:MAX_SHARD_BYTES + 1]
    except OSError:
        return None
    finally:
        os.close(fd)


def day_dir(home, day: str):
    from pathlib import Path

    return Path(home) / BUDGET_DIR / day


def read_day(home, day: str) -> dict[str, dict]:
    """Every host's shard of ``day`` (host → shard); files that are not ours are skipped."""
    d = day_dir(home, day)
    if os.path.islink(d.parent) or os.path.islink(d):
        return {}
    try:
        names = sorted(os.listdir(d))
    except OSError:
        return {}
    out = {}
    for name in names:
        host = name[:-5] if name.endswith(".json") else ""
        if not _HOST.fullmatch(host):
            continue
        raw = _read_file(d / name)
        shard = parse_shard(raw, host, day) if raw is not None and len(raw) <= MAX_SHARD_BYTES else None
        if shard is not None:
            out[host] = shard
    return out


def _live_reservations(shard: dict, now_ms: int) -> list[tuple[int, str, str, int]]:
    """(at, host, token, chars) of the shard's reservations not yet expired."""
    out = []
    for token, r in shard["reserved"].items():
        at = _n(r.get("at"))
        if now_ms - at < RESERVATION_TTL_S * 1000:
            out.append((at, shard["host"], token, _n(r.get("chars"))))
    return out


def _write_own(home, host: str, day: str, shard: dict) -> None:
    import json

    from ..base.atomic import atomic_write

    d = day_dir(home, day)
    for p in (d.parent, d):
        if os.path.islink(p):  # never written through a link planted in the synced folder
            raise OSError(f"{p} is a symbolic link; the budget is not written through it")
    atomic_write(day_dir(home, day) / f"{host}.json", json.dumps(shard, sort_keys=True, indent=1) + "\n",
                 durable=False)


def _own(home, host: str, day: str) -> dict:
    """This host's shard of ``day``; one it cannot parse is kept aside (``<host>.json.unparsed-…``, logged),
    never overwritten: its counts are lost to the sum, its bytes are not."""
    import secrets

    path = day_dir(home, day) / f"{host}.json"
    raw = _read_file(path)
    got = parse_shard(raw, host, day) if raw is not None and len(raw) <= MAX_SHARD_BYTES else None
    if got is not None:
        return got
    if raw is not None or os.path.lexists(path):
        aside = path.with_name(f"{path.name}.unparsed-{secrets.token_hex(4)}")
        os.rename(path, aside)
        log.warning("budget: %s is not a budget shard of %s; kept aside as %s, today's counts start again",
                    path, host, aside.name)
    return empty_shard(host, day)


@dataclass(frozen=True)
class Reservation:
    token: str
    day: str
    chars: int
    why: str | None = None  # refused: why (nothing is held then)

    @property
    def ok(self) -> bool:
        return self.why is None


def _locked(rt):
    from ..state.locks import host_lock

    return host_lock(rt.local.locks, f"{rt.host.id}.usage", timeout=30.0)


def usage_of(shards: Mapping[str, dict], legacy: Mapping[str, Usage], day: str, now_ms: int,
             until: tuple | None = None, skip: str | None = None) -> dict[str, Usage]:
    """Per host: what it used today plus its live reservations (all of them but ``skip``'s, or with ``until``
    those ordered before it). Hosts without a shard count by their legacy setting."""
    out = {h: u for h, u in legacy.items() if h not in shards}
    for host, shard in shards.items():
        held = [r for r in _live_reservations(shard, now_ms) if (until is None or r[:3] < until) and r[2] != skip]
        out[host] = Usage(day, shard["chars"] + sum(r[3] for r in held), shard["turns"] + len(held),
                          shard["summarised"])
    return out


RESERVE_TRIES = 4  # two machines reserving at once that see each other both step back: they try again


def reserve(rt, home, caps: Caps, chars: int, *, force: bool = False, legacy: Mapping[str, Usage] | None = None,
            now_s: float | None = None) -> Reservation:
    """Hold ``chars`` characters and one turn of today's budget for a message about to be sent: written to
    this host's shard first, then checked against every reservation of every host's shard that can be seen
    (see the module's text). ``force``: counted, never refused (a budget summary, a start message). Raises
    OSError when the shard cannot be written (the caller sends nothing then).

    Why every visible reservation, whatever its order: each machine writes before it reads, so of two that
    reserve at once at least one sees the other — and that one must step back. (Counting only those ordered
    before it let the seer go on while the other, blind to it, went on too: three hosts sent 2,634 of
    2,500.) Two that see each other may both step back: a refusal caused only by reservations ordered after
    this one is tried again after a short random pause, in which the other's send goes or its reservation
    goes back."""
    import random

    for attempt in range(RESERVE_TRIES):
        got, later_only = _reserve_once(rt, home, caps, chars, force, legacy, now_s)
        if got.ok or not later_only or attempt == RESERVE_TRIES - 1 or now_s is not None:
            return got
        time.sleep(random.uniform(0.05, 0.3) * (attempt + 1))
    return got


def _reserve_once(rt, home, caps: Caps, chars: int, force: bool, legacy, now_s) -> tuple[Reservation, bool]:
    import secrets

    now_s = time.time() if now_s is None else now_s
    now_ms, day, host = int(now_s * 1000), today(now_s), rt.host.id
    token = f"{now_ms:013d}-{secrets.token_hex(4)}"
    with _locked(rt):
        own = _own(home, host, day)
        own["reserved"] = {t: r for t, r in own["reserved"].items() if now_ms - _n(r.get("at")) < RESERVATION_TTL_S * 1000}
        own["reserved"][token] = {"chars": chars, "at": now_ms}
        _write_own(home, host, day, own)
        if force or not caps.any:
            return Reservation(token, day, chars), False
        shards = read_day(home, day)
        shards[host] = own  # as written (a reader may lag its own write on some file systems)
        seen = usage_of(shards, legacy or {}, day, now_ms, skip=token)
        why = over(caps, seen.get(host, Usage(day)), total(seen, day), chars)
        if why is None:
            return Reservation(token, day, chars), False
        del own["reserved"][token]
        _write_own(home, host, day, own)
        before = usage_of(shards, legacy or {}, day, now_ms, until=(now_ms, host, token))
        later_only = over(caps, before.get(host, Usage(day)), total(before, day), chars) is None
        return Reservation(token, day, chars, why), later_only


def settle(rt, home, r: Reservation, *, session_id: str | None = None, summarised: tuple[int, int] | None = None
           ) -> None:
    """The message of reservation ``r`` was delivered: count it as used (``summarised``: lines first, last it
    replaced, listed for ``status``). Never raises: the message is delivered already."""
    try:
        with _locked(rt):
            own = _own(home, rt.host.id, r.day)
            own["reserved"].pop(r.token, None)
            own["chars"] += r.chars
            own["turns"] += 1
            if session_id is not None:
                own["deferred"].pop(session_id, None)
            if summarised is not None:
                own["summarised"] += 1
                got = own["summarised_lines"].get(session_id or "?") or {}
                own["summarised_lines"][session_id or "?"] = {
                    "updates": _n(got.get("updates")) + 1,
                    "lines": _n(got.get("lines")) + max(0, summarised[1] - summarised[0] + 1)}
            _write_own(home, rt.host.id, r.day, own)
    except Exception as exc:  # noqa: BLE001
        log.warning("worker: could not count %d characters against today's budget (%s)", r.chars, exc)


def release(rt, home, r: Reservation) -> None:
    """The send of reservation ``r`` failed: give it back. Never raises (it expires anyway)."""
    try:
        with _locked(rt):
            own = _own(home, rt.host.id, r.day)
            if own["reserved"].pop(r.token, None) is not None:
                _write_own(home, rt.host.id, r.day, own)
    except Exception as exc:  # noqa: BLE001
        log.warning("worker: could not release a budget reservation (%s); it expires", exc)


def note_deferred(rt, home, session_id: str, lines: tuple[int, int], why: str, now_s: float | None = None) -> None:
    """Lines of ``session_id`` wait for tomorrow's budget (shown by ``status`` on every machine)."""
    day = today(now_s)
    try:
        with _locked(rt):
            own = _own(home, rt.host.id, day)
            own["deferred"][session_id] = {"first": lines[0], "last": lines[1], "why": why[:200]}
            _write_own(home, rt.host.id, day, own)
    except Exception as exc:  # noqa: BLE001
        log.warning("worker: could not note deferred lines (%s)", exc)


def next_day_s(now_s: float | None = None) -> float:
    """The next UTC midnight (epoch seconds): when a deferred update is tried again."""
    now_s = time.time() if now_s is None else now_s
    return (int(now_s) // 86_400 + 1) * 86_400 + 1.0


def summarised_for_good(home) -> dict:
    """Every update summarised instead of sent, over every day the home keeps: counts per session."""
    base = day_dir(home, "x").parent
    out = {"updates": 0, "lines": 0, "sessions": 0}
    if os.path.islink(base):
        return out
    try:
        days = sorted(n for n in os.listdir(base) if _DAY.fullmatch(n))
    except OSError:
        return out
    sessions = set()
    for day in days:
        for shard in read_day(home, day).values():
            for sid, got in shard["summarised_lines"].items():
                out["updates"] += _n(got.get("updates"))
                out["lines"] += _n(got.get("lines"))
                sessions.add(sid)
    out["sessions"] = len(sessions)
    return out


# --------------------------------------------------------------------------- the store (thin)


@dataclass(frozen=True)
class Today:
    caps: Caps
    mine: Usage
    everyone: Usage
    by_host: dict[str, Usage]


def legacy_usage(settings: Mapping[str, Any], day: str) -> dict[str, Usage]:
    """Older versions' counters (the store's ``usage.<host>`` settings; ``{key: Setting or value}``)."""
    return usage_by_host({k: getattr(v, "value", v) for k, v in settings.items() if k.startswith(USAGE_PREFIX)}, day)


def read_usage(store, host: str, caps: Caps, now_s: float | None = None) -> Today:
    """Today's use per host: the shards (with every live reservation) and older versions' settings."""
    now_s = time.time() if now_s is None else now_s
    day = today(now_s)
    by_host = usage_of(read_day(store.home, day), legacy_usage(store.read().settings, day), day, int(now_s * 1000))
    return Today(caps, by_host.get(host, Usage(day)), total(by_host, day), by_host)


def record(rt, store, chars: int, summarised: bool = False) -> None:
    """Count one message sent by this host today that held no reservation (a start message, a re-delivery by
    reference) — only while a cap is set: a count is a write of this host's shard, not worth making after
    every delivery for nothing. Never raises: the message is delivered already, and a failure here must
    not make the worker send it again."""
    try:
        if not caps_from_env().any:
            return
    except BudgetError:
        pass  # a cap is meant, if mistyped: count
    try:
        r = reserve(rt, store.home, Caps(), chars, force=True)
    except Exception as exc:  # noqa: BLE001
        log.warning("worker: could not count %d characters against today's budget (%s)", chars, exc)
        return
    settle(rt, store.home, r, summarised=(0, -1) if summarised else None)


def report(settings: Mapping[str, Any], host: str, env: Mapping[str, str] = os.environ,
           now_s: float | None = None, home=None) -> dict:
    """Today's use and the caps, for ``status`` (``settings``: the store's, ``{key: Setting}``; ``home``: the
    shared home, for the shards)."""
    now_s = time.time() if now_s is None else now_s
    day = today(now_s)
    shards = read_day(home, day) if home is not None else {}
    by_host = usage_of(shards, legacy_usage(settings, day), day, int(now_s * 1000))
    mine, everyone = by_host.get(host, Usage(day)), total(by_host, day)
    try:
        caps, error = caps_from_env(env), None
    except BudgetError as exc:
        caps, error = Caps(), str(exc)
    reached = over(caps, mine, everyone, 0) if caps.any else None
    deferred = {f"{h}:{sid}": d for h, sh in shards.items() for sid, d in sh["deferred"].items()}
    return {"day": day, "this_machine": mine.to_json(), "all_machines": everyone.to_json(),
            "hosts": len([u for u in by_host.values() if u.turns]),
            "caps": {"chars": caps.chars, "turns": caps.turns, "total_chars": caps.total_chars,
                     "total_turns": caps.total_turns},
            "overflow": overflow_from_env(env),
            "deferred": [{"host": k.split(":", 1)[0], "session": k.split(":", 1)[1],
                          "first": _n(d.get("first")), "last": _n(d.get("last"))} for k, d in sorted(deferred.items())],
            "summarised_for_good": summarised_for_good(home) if home is not None else {"updates": 0, "lines": 0,
                                                                                        "sessions": 0},
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
        line += f"; {all_['summarised']} updates summarised today"
    if r.get("reached"):
        verb = "deferred to the next UTC day" if r.get("overflow", DEFAULT_OVERFLOW) == "defer" else "summarised"
        line += f"; OVER BUDGET, updates are {verb}: {r['reached']}"
    if r.get("deferred"):
        n = sum(d["last"] - d["first"] + 1 for d in r["deferred"])
        line += f"; deferred: {len(r['deferred'])} session(s), {n} lines wait for the budget"
    good = r.get("summarised_for_good") or {}
    if good.get("updates"):
        line += (f"; summarised for good (never sent in full): {good['updates']} updates, {good['lines']} lines "
                 f"of {good['sessions']} session(s)")
    if r.get("error"):
        line += f"; {r['error']} (ignored)"
    return line
