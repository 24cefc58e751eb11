"""``doctor --fix``: repair what is safe, keeping backups of everything it replaces or moves.

- git: the driver config in this clone and our .gitattributes/.gitignore rules (setup-git);
- files with git conflict markers (view, any shard, session files): the sides merged with the
  store's merge (filemerge.repair); the original bytes go to quarantine/ first;
- conflict copies, legacy entries, an unparseable view or own shard, stale temp files: one
  ``Store.fold_all`` (refresh + fold), which keeps copies under backups/ and bad bytes in quarantine/;
- a missing view or session file (rclone bisync renames both versions away): checked again after the
  fold and rebuilt with ``Store.refresh`` / ``Store.fold_session`` (views.rebuild).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from .checks import Report
from .findings import Finding
from .views import rebuild

GIT_KINDS = {"git-driver-missing", "git-driver-broken", "git-attributes-missing"}


def repair_markers(path: Path, home: Path, host: str) -> str | None:
    """Merge the sides of a file with conflict markers in place; returns what was done (or None)."""
    from ..state.conflicts.filemerge import repair
    from ..state.files import atomic_write, set_aside
    from ..state.fs import REAL

    got = REAL.read(path)
    if not got.ok:  # gone, or no longer a regular file: never followed or opened
        return None if got.status == "missing" else f"left {path.name}: {got.detail}"
    raw = got.data
    rel = path.relative_to(home).as_posix() if path.is_relative_to(home) else str(path)
    result = repair(raw, rel)
    if not result.ok:
        return f"could not repair {rel}: {'; '.join(result.notes)}"
    kept = set_aside(path, raw, "git-conflict", home, host)
    if REAL.read(path).data != raw:  # changed meanwhile (a sync engine, another process): leave it
        return f"left {rel}: it changed while being repaired"
    atomic_write(path, result.text)
    return f"merged the conflict sides of {rel} (original kept at {kept.relative_to(home).as_posix()})"


def apply(report: Report, env: Mapping[str, str]) -> list[str]:
    """Fix what ``report`` found that is fixable; returns a line per action."""
    from ..sync.gitsetup import GitSetupError, rel_in, setup_config, setup_files
    from ..local.identity import host_identity, local_dirs
    from ..state.locks import LockTimeout
    from ..state.store.core import Store, StoreError

    actions: list[str] = []
    home = report.home
    if home is None:
        return actions
    kinds = {f.kind for f in report.findings if f.fixable}
    if report.git_top is not None and kinds & GIT_KINDS:
        try:
            if {"git-driver-missing", "git-driver-broken"} & kinds:
                actions += [f"set {c.what} = {c.detail}" for c in setup_config(report.git_top)]
            if "git-attributes-missing" in kinds:
                actions += [f"updated {c.what}: {c.detail} (commit it)" for c in
                            setup_files(report.git_top, rel_in(report.git_top, home))]
        except GitSetupError as exc:
            actions.append(f"could not set up git: {exc}")
    if not home.is_dir():
        return actions
    local = local_dirs(env)
    host = host_identity(local, env)
    store = Store(home, host.id, local.locks, local.clocks, host_name=host.name)
    for f in report.findings:
        if f.kind == "git-conflict-markers" and _is_original(f, home):
            done = repair_markers(home / f.path, home, host.id)
            if done:
                actions.append(done)
    for f in report.findings:
        if f.kind == "stale-shard" and f.host:
            try:
                moved = store.retire_host(f.host)
            except (LockTimeout, StoreError, OSError) as exc:
                actions.append(f"could not retire host {f.host}: {exc}")
            else:
                actions.append(f"retired host {f.host}: its entries live in this host's shard now, "
                               f"{len(moved)} file{'s' * (len(moved) != 1)} kept under backups/")
    if kinds - GIT_KINDS - {"git-conflict-markers"} or any(f.kind == "git-conflict-markers" for f in report.findings):
        try:
            folded = store.fold_all()
        except (LockTimeout, StoreError, OSError) as exc:
            actions.append(f"could not fold: {exc}")
        else:
            n = folded.get("conversations", 0) + folded.get("sessions", 0)
            if n:
                actions.append(f"folded {n} conflict cop{'y' if n == 1 else 'ies'} into the originals "
                               "(kept under backups/)")
            actions.append("rewrote this host's shard and the view from every readable source")
            try:
                actions += rebuild(store, report.findings)
            except (LockTimeout, StoreError, OSError) as exc:
                actions.append(f"could not rebuild a missing file: {exc}")
            gone = [f for f in report.findings if f.kind == "temp-file" and not (home / f.path).exists()]
            if gone:
                actions.append(f"removed {len(gone)} stale temp file{'s' * (len(gone) != 1)}")
    return actions


def _is_original(f: Finding, home: Path) -> bool:
    from ..state.copynames import is_original

    path = home / f.path
    where = "hosts" if path.parent.name == "hosts" else "root"
    return path.is_relative_to(home) and is_original(path.name, where=where)
