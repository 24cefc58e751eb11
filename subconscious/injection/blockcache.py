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
- Integrity while on (the policy is this machine's, :func:`guard`: the shared setting as the local pin
  allows): a plain string where a sealed value is expected, a value under a key other than the home's
  current one (or, during a rotation, the key it rotates from), and an envelope older than one this
  machine has already read or written for that session and label (``v``, bound in the associated
  data; the versions seen are kept machine-locally) are not shown either: absent, and reported.

Also: :func:`reseal_all` (``key init``, ``key rotate`` and ``key disable``) and
:func:`encryption_findings` (for doctor). No value, key or passphrase is ever logged.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from ..privacy.keys import KeysError, Policy, check_outside, policy_of, read_policy
from ..state.records import SessionState
from ..state.seal import (
    MAX_VERSION,
    Key,
    KeyLookup,
    SealError,
    envelope_key_id,
    envelope_version,
    is_envelope,
    open_envelope,
    seal,
)

log = logging.getLogger("subconscious.injection.blockcache")

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


def open_blocks(stored: Mapping[str, Any] | None, keyring: KeyLookup | None, session_id: str,
                policy: Policy | None = None, *, seen: Mapping[str, int] | None = None,
                refused: list[tuple[str, str]] | None = None) -> dict[str, str]:
    """The values of ``stored`` this host can read: plain strings (unless ``policy`` says encryption
    is on), and envelopes that open under a key ``policy`` reads with and are not older than the
    version ``seen`` holds for their label. What is refused is appended to ``refused`` as
    ``(label, why)``: ``plaintext-while-on``, ``retired-key``, ``older-version``."""
    out: dict[str, str] = {}
    if not stored:
        return out
    ring = keyring if keyring is not None else _EMPTY
    on = policy is not None and policy.enabled
    for label, value in stored.items():
        if isinstance(value, str):
            if on:
                if refused is not None:
                    refused.append((label, "plaintext-while-on"))
                continue
            out[label] = value
        elif is_envelope(value):
            kid = envelope_key_id(value)
            if on and not policy.reads_with(kid):  # type: ignore[union-attr]
                if refused is not None and ring.get(kid or "") is not None:
                    refused.append((label, "retired-key"))
                continue
            try:
                text = open_envelope(ring, value, session_id=session_id, label=label)
            except SealError:
                continue  # not cached here
            if seen is not None and envelope_version(value) < seen.get(label, 0):
                if refused is not None:
                    refused.append((label, "older-format" if value.get("sealed") == 1 else "older-version"))
                continue
            out[label] = text
    return out


def versions(stored: Mapping[str, Any] | None) -> dict[str, int]:
    """The version of each sealed value in ``stored`` (what a reader remembers having seen)."""
    return {label: envelope_version(v) for label, v in (stored or {}).items() if is_envelope(v)}


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
                policy: Policy, session_id: str, seen: Mapping[str, int] | None = None
                ) -> tuple[dict[str, Any], Outcome]:
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
        if _same(key, old, text, session_id, label) and envelope_version(old) >= (seen or {}).get(label, 0):
            out[label] = old
        else:
            # at the top (only a holder of the key can have sealed 2**53) the version stays there: equal
            # to what was seen is still not older, and a write never fails for it
            version = min(max(envelope_version(old), (seen or {}).get(label, 0)) + 1, MAX_VERSION)
            out[label] = seal(key, text, session_id=session_id, label=label, version=version)
            fresh += 1
    return out, Outcome("sealed", kid, sealed=fresh, kept=len(values) - fresh)


def with_blocks(state: SessionState, values: Mapping[str, str], keyring: KeyLookup | None,
                policy: Policy, seen: Mapping[str, int] | None = None) -> tuple[SessionState, Outcome]:
    """``state`` with its block cache set to ``values``: for a hook that saves more in the same write."""
    stored, outcome = seal_blocks(state.last_block_values, values, keyring, policy, state.session_id, seen)
    return state.evolve(last_block_values=stored), outcome


def reseal(stored: Mapping[str, Any] | None, keyring: KeyLookup, key: Key | None,
           session_id: str, drop_plain: bool = False, trusted: Callable[[str | None], bool] | None = None
           ) -> tuple[dict[str, Any] | None, dict[str, int], int]:
    """Every value of ``stored`` under ``key`` (``None``: as plain text). Values that do not open here
    are kept as they are; with ``drop_plain`` (encryption was on already) a plain value is removed, never
    sealed: it could be anyone's. Returns (new map, {key id: values left unopened}, values changed)."""
    if not stored:
        return (dict(stored) if stored is not None else None), {}, 0
    out: dict[str, Any] = {}
    unopened: dict[str, int] = {}
    changed = 0
    for label, value in stored.items():
        if isinstance(value, str):
            if key is not None and drop_plain:
                changed += 1
                continue
            text = value
        elif is_envelope(value):
            if key is not None and _same_key_opens(key, value, session_id, label):
                out[label] = value  # already under the target key: keep byte for byte
                continue
            if key is not None and trusted is not None and not trusted(envelope_key_id(value)):
                changed += 1  # under a retired key: anyone holding it could have sealed it; never re-sealed
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
        version = envelope_version(value) if is_envelope(value) else 1
        new = text if key is None else seal(key, text, session_id=session_id, label=label, version=version)
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


# --------------------------------------------------------------------------- this machine's view


def machine_policy(store, keyring: KeyLookup | None, shared: Policy | None = None) -> Policy:
    """The policy this machine follows for ``store``'s home: the shared setting as this machine's pin
    allows (:func:`keys.effective_policy`). The pin lives beside the key ring (a :class:`keys.KeyRing`
    has a directory); a plain ``{id: Key}`` ring has no pin, and gets the shared setting. Moves the pin
    forward when the setting does (a newer key held here); says so in the log when it is not followed."""
    shared = shared if shared is not None else read_policy(store)
    directory = getattr(keyring, "directory", None)
    if directory is None:
        return shared
    from ..privacy.keys import effective_policy, load_pin, save_pin

    policy, new_pin = effective_policy(shared, load_pin(directory, store.home), keyring)  # type: ignore[arg-type]
    if new_pin is not None:
        try:
            save_pin(directory, store.home, new_pin)
        except OSError as exc:
            log.warning("encryption: cannot record this home's key on this machine: %s", exc.strerror)
    if policy.pinned:
        log.warning("encryption: %s", policy.pinned)
    return policy


def _seen_path(keyring: KeyLookup | None, store, session_id: str) -> Path | None:
    directory = getattr(keyring, "directory", None)
    if directory is None:
        return None
    from ..privacy.keys import seen_dir
    from ..state.ids import check_session_id

    return seen_dir(directory, store.home) / f"{check_session_id(session_id)}.json"


def seen_versions(store, keyring: KeyLookup | None, session_id: str) -> dict[str, int]:
    """The newest version of each label's sealed value this machine has read or written (machine-local)."""
    path = _seen_path(keyring, store, session_id)
    if path is None:
        return {}
    try:
        import json

        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and type(v) is int} if isinstance(data, dict) else {}


def remember_versions(store, keyring: KeyLookup | None, session_id: str, stored: Mapping[str, Any] | None) -> None:
    """Raise the versions seen for ``session_id`` to those of ``stored``'s sealed values."""
    path = _seen_path(keyring, store, session_id)
    if path is None:
        return
    now = versions(stored)
    old = seen_versions(store, keyring, session_id)
    new = {**old, **{k: max(v, old.get(k, 0)) for k, v in now.items()}}
    if new == old:
        return
    import json

    from ..state.files import atomic_write, ensure_dir

    try:
        ensure_dir(path.parent)
        os.chmod(path.parent.parent, 0o700)
        os.chmod(path.parent, 0o700)
        atomic_write(path, json.dumps(new, sort_keys=True) + "\n")
    except OSError as exc:
        log.warning("encryption: cannot record the versions seen for session %s: %s", session_id, exc.strerror)


def open_cached(store, keyring: KeyLookup | None, session_id: str, stored: Mapping[str, Any] | None,
                policy: Policy | None = None) -> dict[str, str]:
    """What a hook may treat as cached (shown to Claude before): :func:`open_blocks` under this
    machine's policy and the versions it has seen; what is refused is logged, never shown."""
    policy = policy if policy is not None else machine_policy(store, keyring)
    refused: list[tuple[str, str]] = []
    seen = seen_versions(store, keyring, session_id) if policy.enabled else None
    out = open_blocks(stored, keyring, session_id, policy, seen=seen, refused=refused)
    for label, why in refused:
        log.warning("session %s: block %r: %s; not used (the full block is shown again)", session_id, label[:64], {
            "plaintext-while-on": "a plain value where a sealed one is expected (written by someone without "
                                  "the key, into the synced folder?)",
            "retired-key": "sealed with a key this home no longer uses",
            "older-format": "sealed in format 1 (no version: by a subconscious older than this one, or put back "
                            "from an old copy) after this machine saw a versioned value; upgrade subconscious on "
                            "every machine of this home",
            "older-version": "an older sealed value than one this machine has already seen (put back from an "
                             "old copy?)"}[why])
    if policy.enabled and stored:
        remember_versions(store, keyring, session_id, {k: v for k, v in stored.items() if k in out})
    return out


# --------------------------------------------------------------------------- the store


def load_blocks(store, keyring: KeyLookup | None, session_id: str) -> dict[str, str]:
    """The cached block values of ``session_id`` that this host can read ({} if none: not cached)."""
    state = store.session(session_id)
    return open_cached(store, keyring, session_id, state.last_block_values if state else None)


def store_blocks(store, keyring: KeyLookup | None, session_id: str, values: Mapping[str, str], *,
                 policy: Policy | None = None) -> Outcome:
    """Save ``values`` as the session's block cache (sealed or not, per the rules above). ``policy``:
    pass it if the caller already read the store's settings (``keys.policy_of(snapshot.settings)``);
    it goes through this machine's pin either way."""
    policy = machine_policy(store, keyring, policy)
    seen = seen_versions(store, keyring, session_id) if policy.enabled else None
    result: list[Outcome] = []
    written: list[SessionState] = []

    def change(current: SessionState | None) -> SessionState:
        state, outcome = with_blocks(current or SessionState(session_id), values, keyring, policy, seen)
        result.append(outcome)
        written.append(state)
        return state

    store.update_session(session_id, change)
    outcome = result[-1]
    if policy.enabled and outcome.mode == "sealed":
        remember_versions(store, keyring, session_id, written[-1].last_block_values)
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
               after_each: Callable[[str], None] | None = None, drop_plain: bool = False,
               trusted: Callable[[str | None], bool] | None = None) -> ResealReport:
    """Put every session's cached values under ``key`` (None: plain text), one session file at a time
    (each an atomic write, so an interrupted run leaves every file whole; run again to finish).
    Values already under ``key`` are left as they are, so a second run writes nothing."""
    report = ResealReport()
    for sid in store.session_ids():
        found: list[tuple[dict[str, int], int]] = []

        def change(current: SessionState | None, sid: str = sid, found: list = found) -> SessionState | None:
            if current is None or not current.last_block_values:
                return None
            stored, unopened, changed = reseal(current.last_block_values, keyring, key, sid, drop_plain,
                                                     trusted)
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
    shared = policy if policy is not None else policy_of(store.read().settings)
    policy = shared
    directory = getattr(keyring, "directory", None)
    if directory is not None and shared.pinned is None:
        from ..privacy.keys import effective_policy, load_pin

        policy = effective_policy(shared, load_pin(directory, store.home), keyring)[0]
    out: list[dict[str, Any]] = list(getattr(keyring, "problems", []))
    if directory is not None:
        try:
            check_outside(directory, *synced_dirs)
        except KeysError as exc:
            out.append(_finding("keys-in-synced-dir", "error", str(directory), str(exc)))
    keyring = keyring if keyring is not None else _EMPTY
    home = str(store.home)
    if policy.pinned:
        out.append(_finding("encryption-setting-not-followed", "warning", home, policy.pinned
                            + "; or run `subconscious key init` here to put the home's setting back"))
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

    def note(kind: tuple[str, str], path: str, n: int = 1) -> None:
        files = by_kind.setdefault(kind, [])
        if path not in files:
            files.append(path)
        counts[kind] = counts.get(kind, 0) + n

    from ..privacy.homeseal import SCAN_CAP, _block_maps, _parse, _session_id, scan_home

    def read(path: Path) -> bytes | None:  # through the store's file system: a file doctor read already is not read again
        got = store.fs.read(path, SCAN_CAP)
        return got.data if got.ok else None

    quiet = None
    if store.read_only and store.keep_caches and getattr(store.fs, "FILE_TOKENS", False):
        from ..privacy import homeseal
        from ..state.sessions.cache import QuietFiles

        # the files an earlier scan found nothing of the block cache in, while unchanged (doctor, read-only)
        quiet = QuietFiles(store.fs, store.home, store.clocks_dir.parent / "cache", "scan", (homeseal.__file__,))
    scan = scan_home(store.home, read, quiet)  # every copy in the home, byte for byte: not only the merged view
    for found in scan.files:
        path = str(found.path)
        if found.unreadable:
            if policy.enabled and b"lastBlockValues" in found.raw:  # off: plain text is expected anyway
                note(("unreadable-cache", ""), path)
            for kid in sorted(found.kids):
                if not (policy.enabled and kid == policy.key_id):
                    note(("old-key", kid), path)
            continue
        for holder in _block_maps(_parse(found.raw)):
            sid = _session_id(holder, found.path) or ""
            for label, value in holder["lastBlockValues"].items():
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
                    note(kind, path)
    for (kind, kid), paths in sorted(by_kind.items()):
        n, f = counts[(kind, kid)], len(paths)
        where = f"{n} cached block values in {f} files of the home"
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
            if policy.enabled and not policy.reads_with(kid):
                text = (f"{where} are sealed with key {kid}, which this home no longer uses (retired by a "
                        "rotation, or never its key): they are not shown to Claude, and whoever holds that key "
                        "may have written them; run `subconscious key init` to drop them")
            elif policy.enabled:
                text = (f"{where} are still sealed with key {kid}, not the home's current key "
                        f"{policy.key_id}; run `subconscious key "
                        + ("rotate` to finish the rotation" if policy.rotation else "init` to re-seal them")
                        + ("" if keyring.get(kid) is not None else f" (on a machine that holds key {kid})")
                        + "; until then that key still opens them")
            else:
                text = (f"{where} are sealed with key {kid} although encryption is off; run "
                        "`subconscious key disable` again to turn them into plain text")
            out.append(_finding(kind, "info" if policy.rotation else "warning", paths[0], text,
                                paths=paths, key_id=kid))
        elif kind == "unreadable-cache":
            out.append(_finding(kind, "warning", paths[0], f"{f} files of the home that mention cached block values "
                                "are not JSON, so they cannot be re-sealed and may hold plain text; check them and "
                                "delete them if they hold nothing you need", paths=paths))
        else:
            out.append(_finding(kind, "warning", paths[0], f"{where} are in plain text although encryption is on; "
                                "run `subconscious key init` to seal them", paths=paths))
    return out
