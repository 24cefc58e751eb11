"""doctor's ``missing-view`` check: a file of ours that should be there and is not.

rclone bisync (1.60-1.65) renames BOTH versions of a file changed on two machines to
``<name>..path1`` / ``<name>..path2`` and leaves no ``<name>`` at all. Our own reads survive (the
shards hold every entry and the copies are read as sources), but the upstream-readable
``conversations.json`` -- and a session file that exists only as copies -- would stay absent without
a word. This check names them; ``--fix`` rebuilds them through the store's public API
(``Store.refresh`` writes the view, ``Store.fold_session`` writes a session merged from its copies).
"""

from __future__ import annotations

from pathlib import Path

from ..state.conflicts import copies
from ..state.copynames import CONVERSATIONS, ConflictCopy
from ..state.ids import is_session_id
from .findings import ERROR, WARNING, Finding

KIND = "missing-view"


def _names(found: list[ConflictCopy]) -> str:
    shown = ", ".join(c.name for c in found[:3])
    return shown + (f" (+{len(found) - 3} more)" if len(found) > 3 else "")


def _engines(found: list[ConflictCopy]) -> str:
    return "/".join(sorted({c.engine.value for c in found}))


def missing_views(home: Path, snap) -> list[Finding]:
    """``conversations.json`` missing while the shards (or copies) hold entries, and session files
    missing while their conflict copies exist. ``snap`` is the read-only store's snapshot."""
    names = copies.listdir(home)
    present = set(names)
    by_original: dict[str, list[ConflictCopy]] = {}
    for c in copies.find(names, "root"):
        if c.original not in present and not c.weak:  # weak patterns need the original beside them
            by_original.setdefault(c.original, []).append(c)
    rows = []
    view_copies = by_original.pop(CONVERSATIONS, [])
    if CONVERSATIONS not in present and (snap.shards or snap.raw or view_copies):
        live = len(snap.live)
        source = f"{len(snap.shards)} host shard{'s' * (len(snap.shards) != 1)}"
        if view_copies:
            source += f" and by {_engines(view_copies)} conflict copies {_names(view_copies)}"
        rows.append(Finding(
            KIND, ERROR, CONVERSATIONS,
            f"missing, so the upstream plugin sees none of the {live} live session{'s' * (live != 1)} "
            f"(held by {source}); --fix (or the next write) rebuilds it from them",
            fixable=True, details={"copies": [c.name for c in view_copies]}))
    for original in sorted(by_original):
        found = by_original[original]
        sid = original[len("session-"):-len(".json")] if original.startswith("session-") else ""
        if not sid or not is_session_id(sid):
            continue
        rows.append(Finding(
            KIND, WARNING, original,
            f"missing: only {_engines(found)} conflict copies of it exist ({_names(found)}); hooks read them, "
            "the upstream plugin does not; --fix writes it merged from them (copies kept under backups/)",
            fixable=True, details={"copies": [c.name for c in found], "session": sid}))
    return rows


def rebuild(store, findings: list[Finding]) -> list[str]:
    """``--fix`` for what :func:`missing_views` found and is still missing (after the fold)."""
    actions = []
    home = Path(store.home)
    for f in findings:
        if f.kind != KIND:
            continue
        path = home / f.path
        if not path.exists():
            if f.path == CONVERSATIONS:
                store.refresh()
            elif f.details.get("session"):
                store.fold_session(f.details["session"])
        if path.exists():
            actions.append(f"rebuilt the missing {f.path}")
        else:
            actions.append(f"could not rebuild {f.path} (its sources do not hold a readable version)")
    return actions
