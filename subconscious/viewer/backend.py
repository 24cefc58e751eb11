"""The data behind the viewer's JSON API, read fresh for every request.

Memory, history, messages and sessions come from :mod:`subconscious.see` (the same facts the
``memory``/``messages``/``sessions`` commands print); the shared home's health is ``doctor --json``'s report
(:func:`subconscious.doctor.checks.diagnose`) plus what the page shows per machine (clocks) and the
encryption state of ``key status``. Nothing here writes to the shared home; the one change, editing a
block, goes to the Letta server.

The pure parts (:func:`history_changes`, :func:`clock_rows`, :func:`encryption_state`) shape that data for
the page and are tested on their own.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from .server import BackendError

MESSAGES_LIMIT = 200


# --------------------------------------------------------------------------- pure

def _source_text(snap: Mapping[str, Any]) -> str:
    source = snap.get("source")
    if source == "session":
        return f"shown to session {snap.get('session')} on {snap.get('host_name') or snap.get('host')}"
    if source == "seen":
        return "read from the server on this machine"
    if source == "server":
        return "on the server now"
    return str(source or "")


def history_changes(timeline: list[Mapping[str, Any]]) -> dict:
    """The page's history: one entry per block change, newest first, as ``-``/``+`` lines.

    ``timeline`` is :func:`subconscious.see.memory.memory_history`'s (oldest first, each snapshot with the
    ``changes`` from the one before; the first has none: it is where the record starts)."""
    out = []
    for snap in reversed(timeline):  # newest snapshot first; its changes in label order
        for c in snap.get("changes") or ():
            status = c.get("status")
            if status == "new":
                diff = [["+", line] for line in str(c.get("value") or "").splitlines()]
            else:
                diff = [["-", line] for line in c.get("removed") or ()] + [["+", line] for line in c.get("added") or ()]
            out.append({"at": snap.get("at"), "label": c.get("label"), "status": status,
                        "source": _source_text(snap), "diff": diff})
    first = timeline[0] if timeline else None
    note = None
    if first is not None:
        note = (f"recorded since {first.get('at')} ({_source_text(first)}); Letta keeps no history of a block, "
                "so this is what sessions were shown and what was read here")
    return {"changes": out, "note": note, "snapshots": len(timeline)}


def clock_rows(shards: Mapping[str, Any], now_ms: int, skew_findings: list[Mapping[str, Any]]) -> list[dict]:
    """One row per machine that writes to the shared home: its last write by its own clock, how far that is
    ahead of this machine's clock (a write cannot come from the future), and how far the newest stamp it had
    read was ahead of its own clock (another machine's clock runs ahead); ``skewed`` when doctor flags it."""
    flagged = {f.get("host") for f in skew_findings if f.get("kind") == "clock-skew"}
    rows = []
    for host, info in sorted(shards.items()):
        written = int(getattr(info, "written_ms", 0) or 0)
        wall = int(getattr(getattr(info, "clock", None), "wall", 0) or 0)
        ahead = (written - now_ms) / 1000 if written else None
        behind = (wall - written) / 1000 if written and wall else None
        rows.append({
            "host": host,
            "host_name": getattr(info, "name", None) or host,
            "last_write": _iso(written) if written else None,
            "ahead_of_this_machine_s": ahead if ahead is not None and ahead > 0 else 0.0 if written else None,
            "behind_stamps_it_read_s": behind if behind is not None and behind > 0 else 0.0 if written else None,
            "skew_s": max(v for v in (ahead, behind, 0.0) if v is not None) if written else None,
            "skewed": host in flagged,
        })
    return rows


def encryption_state(info: Mapping[str, Any]) -> dict:
    """The page's encryption line from ``key status --json``'s facts."""
    values = info.get("values") or {}
    sealed = sum(n for kid, n in values.items() if kid != "plain")
    return {
        "enabled": bool(info.get("enabled")),
        "key_id": info.get("keyId"),
        "passphrase": bool(info.get("passphrase")),
        "this_machine_has_key": bool(info.get("hasCurrentKey")),
        "values": sealed + int(values.get("plain", 0) or 0),
        "sealed": sealed,
        "readable_here": sum((info.get("readableHere") or {}).values()),
    }


def _iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}Z"


# --------------------------------------------------------------------------- shell

@dataclass
class SeeBackend:
    """Reads through a new :class:`subconscious.see.home.SeeHome` per request (the page shows what is there
    now, not what was there when the server started)."""

    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    cwd: str | None = None
    home_factory: Callable[..., Any] | None = None

    def _home(self):
        if self.home_factory is not None:
            return self.home_factory()
        from ..see import SeeHome

        return SeeHome(env=self.env, cwd=self.cwd)

    def section(self, name: str) -> Any:
        home = self._home()
        try:
            return getattr(self, f"_{name}")(home)
        except BackendError:
            raise
        except LookupError as exc:
            raise BackendError(str(exc).strip("'\""), 404) from None
        except Exception as exc:  # noqa: BLE001 - shown on the page, the other sections stay readable
            raise BackendError(_reason(exc)) from None
        finally:
            home.close()

    def _memory(self, home) -> dict:
        from ..see import memory

        return memory(home)

    def _history(self, home) -> dict:
        from ..see import memory_history

        return history_changes(memory_history(home)["timeline"])

    def _messages(self, home) -> dict:
        from ..see import messages

        return messages(home, limit=MESSAGES_LIMIT)

    def _sessions(self, home) -> dict:
        from ..see import sessions

        return sessions(home)

    def _health(self, home) -> dict:
        from ..see import health

        report = health(home)
        findings = report["findings"]
        report["clocks"] = clock_rows(home.snapshot.shards, int(time.time() * 1000), findings)
        report["quarantine"] = [
            {"path": item.get("file"), "original": item.get("original"), "kind": item.get("kind"), "at": item.get("at")}
            for f in findings if f.get("kind") == "quarantined" for item in (f.get("details") or {}).get("items", [])]
        try:
            report["encryption"] = encryption_state(_key_status(home))
        except Exception as exc:  # noqa: BLE001 - a damaged key ring must not hide the rest of the home's health
            report["encryption"] = {"enabled": None, "error": _reason(exc)}
        return report

    def edit_block(self, label: str, value: str, expected: str | None) -> dict:
        """Write ``value`` into block ``label`` on the Letta server, unless it no longer holds ``expected``
        (someone, the agent most likely, changed it since the page read it: 409)."""
        home = self._home()
        try:
            agent_id = home.agent_id()
            if not agent_id:
                raise BackendError("no agent yet: nothing to edit", 404)
            client = home.letta()
            blocks = {b.get("label"): b for b in client.get_agent(agent_id, include_blocks=True).get("blocks") or []}
            if label not in blocks:
                raise BackendError(f"the agent has no block labelled {label!r}", 404)
            now = str(blocks[label].get("value") or "")
            if expected is not None and now != expected:
                raise BackendError(f"block {label!r} changed on the server since this page read it; reload and "
                                   "edit again", 409)
            limit = blocks[label].get("limit")
            if isinstance(limit, int) and len(value) > limit:
                raise BackendError(f"block {label!r} holds at most {limit} characters; this is {len(value)}", 400)
            from ..see import set_block

            return set_block(home, label, value, agent_id=agent_id)
        except BackendError:
            raise
        except Exception as exc:  # noqa: BLE001 - the page says why the edit did not happen
            raise BackendError(_reason(exc)) from None
        finally:
            home.close()


def _key_status(home) -> dict:
    from ..privacy.keys import KeyRing, read_policy
    from ..see.keys import encryption_status

    store = home.store
    return encryption_status(store, home.keyring or KeyRing.load(home.rt.local.keys), read_policy(store),
                             (home.rt.settings.letta_home, home.rt.settings.state_home))


def _reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    hint = getattr(exc, "hint", None)
    return f"{text} ({hint})" if hint and hint not in text else text
