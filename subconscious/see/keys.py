"""The encryption of the home as data (``key status``, the viewer's key panel): nothing is rendered here."""

from __future__ import annotations

__all__ = ["encryption_status"]


def encryption_status(store, ring, policy, refuse) -> dict:
    """``key status --json``: the home's setting as this machine follows it (``policy``), the keys in ``ring``,
    what is sealed under which key in the merged view and in every copy on disk, and the findings."""
    from types import SimpleNamespace

    c = SimpleNamespace(store=store, ring=ring, policy=policy, refuse=refuse)
    from ..injection.blockcache import encryption_findings
    from ..state.seal import SealError, envelope_key_id, is_envelope, open_envelope

    counts: dict[str, int] = {"plain": 0}
    readable: dict[str, int] = {}
    for sid, state, _ in c.store.sessions():
        for label, value in ((state.last_block_values or {}) if state else {}).items():
            if isinstance(value, str):
                counts["plain"] += 1
            elif is_envelope(value):
                kid = envelope_key_id(value) or "?"
                counts[kid] = counts.get(kid, 0) + 1
                try:
                    open_envelope(c.ring, value, session_id=sid, label=label)
                    readable[kid] = readable.get(kid, 0) + 1
                except SealError:
                    pass
    from ..privacy.homeseal import scan_home

    scan = scan_home(c.store.home)  # every copy on disk, not only the merged view
    p = c.policy
    return {
        "home": str(c.store.home),
        "onDisk": {"values": scan.totals(), "keyIds": sorted(scan.kids()),
                   "plainFiles": [str(x) for x in scan.with_plain()],
                   "unreadableFiles": [str(f.path) for f in scan.unreadable()]},
        "pinned": p.pinned,
        "generation": p.generation,
        "enabled": p.enabled,
        "keyId": p.key_id,
        "passphrase": p.kdf is not None,
        "rotation": p.rotation,
        "settingDamaged": p.damaged,
        "keyRing": str(c.ring.directory),
        "keys": [{"id": i.id, "source": i.source, "created": i.created, "current": i.id == p.key_id}
                 for i in c.ring.info.values()],
        "hasCurrentKey": p.key_id in c.ring if p.key_id else None,
        "values": counts,
        "readableHere": readable,
        "findings": encryption_findings(c.store, c.ring, policy=p, synced_dirs=c.refuse),
    }
