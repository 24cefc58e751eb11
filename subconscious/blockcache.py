"""The cache of memory-block values last shown to a session (``lastBlockValues``), sealed when the home
says so. What the hooks call:

    cached = load_blocks(store, keyring, session_id)          # {label: value} this host can read
    store_blocks(store, keyring, session_id, {label: value})  # after showing the blocks

Rules (pure, in :func:`seal_blocks` and :func:`open_blocks`):

- Encryption off (and no sealed value in the session): values are stored as plain strings.
- Encryption on and this host holds the home's key: every value is sealed under it. A value whose
  plaintext did not change keeps its envelope byte for byte (a fresh nonce on every write would churn
  every sync and every commit).
- This host lacks the key it should seal with: nothing is written in plain text. The envelopes already
  there are kept as they are; the new values are not cached on this host (``withheld``).
- A session that already holds sealed values stays sealed even if this host believes encryption is off
  (the setting may not have synced yet): plain text never silently replaces ciphertext. Only
  ``subconscious key disable`` turns sealed values back into plain text, explicitly.
- Reading: a label whose envelope does not open here (unknown key, damaged, moved) is simply absent:
  "not cached", so the hook shows the full block again.

Also: :func:`reseal_all` (``key init``, ``key rotate`` and ``key disable``) and
:func:`encryption_findings` (for doctor). No value, key or passphrase is ever logged.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from .keys import KeysError, Policy, check_outside, policy_of, read_policy
from .state.records import SessionState
from .state.seal import (
    Key,
    KeyLookup,
    SealError,
    envelope_key_id,
    is_envelope,
    open_envelope,
    seal,
)

log = logging.getLogger("subconscious.blockcache")

_EMPTY: dict[str, Key] = {}


@dataclass(frozen=True)
class Outcome:
    """What a write did, as counts (safe to log)."""

    mode: str  # plain | sealed | withheld
    key_id: str | None = None  # the key sealed with, or the one missing (withheld)
    sealed: int = 0  # values (re)sealed
    kept: int = 0  # envelopes kept byte for byte
    plain: int = 0  # values stored as plain text
    withheld: int = 0  # values not cached (no key to seal them with)


# --------------------------------------------------------------------------- pure core


def open_blocks(stored: Mapping[str, Any] | None, keyring: KeyLookup | None, session_id: str) -> dict[str, str]:
    """The values of ``stored`` this host can read: plain strings, and envelopes that open."""
    out: dict[str, str] = {}
    if not stored:
        return out
    ring = keyring if keyring is not None else _EMPTY
    for label, value in stored.items():
        if isinstance(value, str):
            out[label] = value
        elif is_envelope(value):
            try:
                out[label] = open_envelope(ring, value, session_id=session_id, label=label)
            except SealError:
                pass  # not cached here
    return out


def target_key(stored: Mapping[str, Any] | None, policy: Policy, keyring: KeyLookup | None) -> tuple[bool, str | None]:
    """``(seal?, key id)`` for a write: the home's key when on; when off, the key of a sealed value
    already there (one this host holds if any), so ciphertext is never replaced by plain text."""
    if policy.enabled:
        return True, policy.key_id
    kids = sorted({envelope_key_id(v) or "" for v in (stored or {}).values() if is_envelope(v)})
    if not kids:
        return False, None
    held = [k for k in kids if k and keyring is not None and keyring.get(k) is not None]
    return True, (held or kids)[0] or None


def _same(key: Key, envelope: Any, text: str, session_id: str, label: str) -> bool:
    if envelope_key_id(envelope) != key.id:
        return False
    try:
        return open_envelope({key.id: key}, envelope, session_id=session_id, label=label) == text
    except SealError:
        return False


def seal_blocks(stored: Mapping[str, Any] | None, values: Mapping[str, str], keyring: KeyLookup | None,
                policy: Policy, session_id: str) -> tuple[dict[str, Any], Outcome]:
    """The new ``lastBlockValues`` for ``values``, given what is ``stored`` now (see the module rules)."""
    for label, text in values.items():
        if not isinstance(label, str) or not isinstance(text, str):
            raise TypeError("block values are {str label: str value}")
    sealing, kid = target_key(stored, policy, keyring)
    if not sealing:
        return dict(values), Outcome("plain", plain=len(values))
    key = keyring.get(kid) if (kid and keyring is not None) else None
    if key is None:
        kept = {label: v for label, v in (stored or {}).items() if is_envelope(v)}
        return kept, Outcome("withheld", kid, kept=len(kept), withheld=len(values))
    out: dict[str, Any] = {}
    fresh = 0
    for label, text in values.items():
        old = (stored or {}).get(label)
        if _same(key, old, text, session_id, label):
            out[label] = old
        else:
            out[label] = seal(key, text, session_id=session_id, label=label)
            fresh += 1
    return out, Outcome("sealed", kid, sealed=fresh, kept=len(values) - fresh)


def with_blocks(state: SessionState, values: Mapping[str, str], keyring: KeyLookup | None,
                policy: Policy) -> tuple[SessionState, Outcome]:
    """``state`` with its block cache set to ``values``: for a hook that saves more in the same write."""
    stored, outcome = seal_blocks(state.last_block_values, values, keyring, policy, state.session_id)
    return state.evolve(last_block_values=stored), outcome


def reseal(stored: Mapping[str, Any] | None, keyring: KeyLookup, key: Key | None,
           session_id: str) -> tuple[dict[str, Any] | None, dict[str, int], int]:
    """Every value of ``stored`` under ``key`` (``None``: as plain text). Values that do not open here
    are kept as they are. Returns (new map, {key id: values left unopened}, values changed)."""
    if not stored:
        return (dict(stored) if stored is not None else None), {}, 0
    out: dict[str, Any] = {}
    unopened: dict[str, int] = {}
    changed = 0
    for label, value in stored.items():
        if isinstance(value, str):
            text = value
        elif is_envelope(value):
            if key is not None and _same_key_opens(key, value, session_id, label):
                out[label] = value  # already under the target key: keep byte for byte
                continue
            try:
                text = open_envelope(keyring, value, session_id=session_id, label=label)
            except SealError as exc:
                out[label] = value
                unopened[exc.key_id or "?"] = unopened.get(exc.key_id or "?", 0) + 1
                continue
        else:
            out[label] = value  # not ours to judge
            continue
        new = text if key is None else seal(key, text, session_id=session_id, label=label)
        changed += new != value
        out[label] = new
    return out, unopened, changed


def _same_key_opens(key: Key, envelope: Any, session_id: str, label: str) -> bool:
    if envelope_key_id(envelope) != key.id:
        return False
    try:
        open_envelope({key.id: key}, envelope, session_id=session_id, label=label)
        return True
    except SealError:
        return False


# --------------------------------------------------------------------------- the store


def load_blocks(store, keyring: KeyLookup | None, session_id: str) -> dict[str, str]:
    """The cached block values of ``session_id`` that this host can read ({} if none: not cached)."""
    state = store.session(session_id)
    return open_blocks(state.last_block_values if state else None, keyring, session_id)


def store_blocks(store, keyring: KeyLookup | None, session_id: str, values: Mapping[str, str], *,
                 policy: Policy | None = None) -> Outcome:
    """Save ``values`` as the session's block cache (sealed or not, per the rules above). ``policy``:
    pass it if the caller already read the store's settings (``keys.policy_of(snapshot.settings)``)."""
    policy = policy if policy is not None else read_policy(store)
    result: list[Outcome] = []

    def change(current: SessionState | None) -> SessionState:
        state, outcome = with_blocks(current or SessionState(session_id), values, keyring, policy)
        result.append(outcome)
        return state

    store.update_session(session_id, change)
    outcome = result[-1]
    if outcome.withheld:
        log.info("session %s: key %s is not on this machine; %d block values not cached here "
                    "(import the key: subconscious key import)", session_id, outcome.key_id, outcome.withheld)
    return outcome


@dataclass
class ResealReport:
    sessions: int = 0  # session files visited
    changed: int = 0  # values re-sealed (or opened, for plain text)
    unopened: dict[str, int] = field(default_factory=dict)  # key id → values that did not open here
    done: bool = False


def reseal_all(store, keyring: KeyLookup, key: Key | None, *,
               after_each: Callable[[str], None] | None = None) -> ResealReport:
    """Put every session's cached values under ``key`` (None: plain text), one session file at a time
    (each an atomic write, so an interrupted run leaves every file whole; run again to finish).
    Values already under ``key`` are left as they are, so a second run writes nothing."""
    report = ResealReport()
    for sid in store.session_ids():
        found: list[tuple[dict[str, int], int]] = []

        def change(current: SessionState | None, sid: str = sid, found: list = found) -> SessionState | None:
            if current is None or not current.last_block_values:
                return None
            stored, unopened, changed = reseal(current.last_block_values, keyring, key, sid)
            found.append((unopened, changed))
            return current.evolve(last_block_values=stored) if changed else None

        store.update_session(sid, change)
        report.sessions += 1
        for unopened, changed in found[-1:]:
            report.changed += changed
            for kid, n in unopened.items():
                report.unopened[kid] = report.unopened.get(kid, 0) + n
        if after_each is not None:
            after_each(sid)
    report.done = True
    return report


# --------------------------------------------------------------------------- doctor


def _finding(kind: str, severity: str, path: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"kind": kind, "severity": severity, "path": path, "message": message, **extra}


def encryption_findings(store, keyring, *, policy: Policy | None = None,
                        synced_dirs: tuple[Path, ...] = ()) -> list[dict[str, Any]]:
    """What doctor should report about encryption, as plain dicts ``{kind, severity, path, message}``
    (plus ``paths`` and ``key_id`` where they apply). ``keyring``: a :class:`keys.KeyRing` (its file
    problems are included) or any ``{key id: Key}``; ``synced_dirs``: LETTA_HOME and the state home, to
    check that the key ring is not inside them. Reads only; never writes."""
    policy = policy if policy is not None else policy_of(store.read().settings)
    out: list[dict[str, Any]] = list(getattr(keyring, "problems", []))
    ring_dir = getattr(keyring, "directory", None)
    if ring_dir is not None:
        try:
            check_outside(ring_dir, *synced_dirs)
        except KeysError as exc:
            out.append(_finding("keys-in-synced-dir", "error", str(ring_dir), str(exc)))
    keyring = keyring if keyring is not None else _EMPTY
    home = str(store.home)
    if policy.damaged:
        out.append(_finding("encryption-setting-damaged", "error", home,
                            "the home's 'encryption' setting cannot be read; values are not written in plain "
                            "text until it is fixed (run `subconscious key init` on a machine with the key)"))
    elif policy.enabled and keyring.get(policy.key_id) is None:
        out.append(_finding("missing-active-key", "warning", home,
                            f"encryption is on in this home with key {policy.key_id}, which is not on this "
                            "machine: cached blocks are neither read nor written here (full blocks are shown "
                            "again); get the key with `subconscious key export` / `key import`"
                            + (" or `subconscious key init --passphrase`" if policy.kdf else "")))
    if policy.rotation:
        out.append(_finding("rotation-unfinished", "warning", home,
                            f"a key rotation to {policy.key_id} started on host "
                            f"{policy.rotation.get('host', '?')} has not finished; run `subconscious key rotate`"))
    by_kind: dict[tuple[str, str], list[str]] = {}
    counts: dict[tuple[str, str], int] = {}
    for sid, state, _ in store.sessions():
        if state is None or not state.last_block_values:
            continue
        path = str(store.session_path(sid))
        for label, value in state.last_block_values.items():
            if isinstance(value, str):
                kind = ("plaintext-while-on", "") if policy.enabled else None
            elif is_envelope(value):
                kid = envelope_key_id(value) or "?"
                try:
                    open_envelope(keyring, value, session_id=sid, label=label)
                    kind = None if (policy.enabled and kid == policy.key_id) else ("old-key", kid)
                except SealError as exc:
                    kind = ({"unknown-key": "unknown-key", "unsupported": "unsupported-envelope"}
                            .get(exc.reason, "damaged-envelope"), kid)
            else:
                kind = None
            if kind is not None:
                files = by_kind.setdefault(kind, [])
                if not files or files[-1] != path:
                    files.append(path)
                counts[kind] = counts.get(kind, 0) + 1
    for (kind, kid), paths in sorted(by_kind.items()):
        n, f = counts[(kind, kid)], len(paths)
        where = f"{n} cached block values in {f} session files"
        if kind == "unknown-key":
            out.append(_finding(kind, "warning", paths[0], f"{where} are sealed with key {kid}, which is not on "
                                "this machine; they count as not cached here (import the key with "
                                "`subconscious key import`)", paths=paths, key_id=kid))
        elif kind == "damaged-envelope":
            out.append(_finding(kind, "error", paths[0], f"{where} are sealed with key {kid} but do not open "
                                "(damaged, tampered with, or moved to another session or label); they count "
                                "as not cached and are replaced on the next write", paths=paths, key_id=kid))
        elif kind == "unsupported-envelope":
            out.append(_finding(kind, "warning", paths[0], f"{where} are sealed in a format this version does not "
                                "read (written by a newer subconscious?); they count as not cached here; upgrade "
                                "subconscious on this machine", paths=paths, key_id=kid))
        elif kind == "old-key":
            if policy.enabled:
                text = (f"{where} are still sealed with key {kid}, not the home's current key "
                        f"{policy.key_id}; run `subconscious key "
                        + ("rotate` to finish the rotation" if policy.rotation else "init` to re-seal them"))
            else:
                text = (f"{where} are sealed with key {kid} although encryption is off; run "
                        "`subconscious key disable` again to turn them into plain text")
            out.append(_finding(kind, "info" if policy.enabled else "warning", paths[0], text,
                                paths=paths, key_id=kid))
        else:
            out.append(_finding(kind, "warning", paths[0], f"{where} are in plain text although encryption is on; "
                                "run `subconscious key init` to seal them", paths=paths))
    return out
