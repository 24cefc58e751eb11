"""Collect doctor's findings. Read-only: nothing here writes to the state dir (files are read with
``keep=False`` and the store is opened read-only); git is only asked questions."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from ..state.conflicts import copies
from ..state.bounds import future_message
from ..state.clock import ZERO, Stamp, bound
from ..state.copynames import CONVERSATIONS, ConflictCopy, Engine, classify, is_original
from ..state.files import QUARANTINE, UNSAFE, read_json
from ..state.fs import REAL
from ..state.jsontext import Unparseable, loads_state
from ..state.ids import is_host_id, is_session_id
from ..state.merge import merge_raw
from ..state.records import RecordError, normalize_record, parse_session, parse_setting
from ..state.textforms import TEMP_PREFIX
from .analysis import DEFAULT_SKEW_S, ShardData, clock_skew, legacy_unadopted, quarantine_note, session_splits, split_brain
from .findings import ERROR, INFO, WARNING, Finding
from .home import letta_home_findings
from .views import missing_views

HOSTS = "hosts"
SHARD_FORMAT = 1
TEMP_AGE_S = 600.0
ENGINE_NAMES = {
    Engine.SYNCTHING: "Syncthing", Engine.DROPBOX: "Dropbox", Engine.ICLOUD: "iCloud Drive",
    Engine.ONEDRIVE: "OneDrive", Engine.ONEDRIVE_LINUX: "OneDrive (Linux client)", Engine.NEXTCLOUD: "Nextcloud",
    Engine.UNISON: "Unison", Engine.GOOGLE_DRIVE: "Google Drive", Engine.RCLONE: "rclone bisync",
}


@dataclass
class Report:
    home: Path | None
    host: str | None
    findings: list[Finding] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    git_top: Path | None = None
    elapsed_s: float = 0.0
    by_engine: dict[str, int] = field(default_factory=dict)  # conflict copies per sync engine

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.problem]


def _rel(path: Path | str, home: Path) -> str:
    p = Path(path)
    try:
        return p.relative_to(home).as_posix()
    except ValueError:
        return str(p)


def _copy_finding(home: Path, path: Path, copy: ConflictCopy) -> Finding:
    bits = []
    if copy.device:
        bits.append(f"device {copy.device}")
    if copy.host:
        bits.append(f"computer {copy.host}")
    if copy.user:
        bits.append(f"by {copy.user}")
    if copy.date:
        bits.append(copy.date.isoformat() + (f" {copy.time.isoformat()}" if copy.time else ""))
    where = f" ({', '.join(bits)})" if bits else ""
    original = copy.original if path.parent == home else f"{HOSTS}/{copy.original}"
    return Finding(
        "conflict-copy", WARNING, _rel(path, home),
        f"{ENGINE_NAMES.get(copy.engine, copy.engine.value)} conflict copy of {original}{where}; "
        "--fix merges it in and moves it to backups/",
        fixable=True, engine=copy.engine.value, details={"original": original})


def _problem_finding(problem, home: Path, own_shard: Path, copy_paths: set[str]) -> Finding:
    path = Path(problem.path)
    rel = _rel(path, home)
    regenerated = path in (home / CONVERSATIONS, own_shard) or problem.path in copy_paths
    keep = " (its bytes are kept in quarantine/)"
    if problem.kind == "git-conflict":
        return Finding("git-conflict-markers", ERROR, rel,
                       f"{problem.message}; --fix merges the sides (original kept in quarantine/)", fixable=True)
    if problem.kind == "unreadable":
        return Finding("unreadable", ERROR, rel, problem.message)
    if problem.kind == UNSAFE:
        return Finding(UNSAFE, ERROR, rel, problem.message + "; subconscious never follows, opens or copies "
                       "it: remove it (or put a regular file there)")
    if problem.kind == "adopted-hidden":
        return Finding("adopted-hidden", WARNING, rel, problem.message + " (see docs/upstream-compat.md)")
    if problem.kind == "future-stamp":
        return Finding("future-stamp", WARNING, rel, problem.message + " (see docs/scale-and-bounds.md)")
    kind = {"unparseable": "unparseable", "invalid-entry": "invalid-entry"}.get(problem.kind, "wrong-type")
    if regenerated:
        how = " --fix folds it" if problem.path in copy_paths else " --fix rewrites it from the other sources"
        return Finding(kind, ERROR if kind != "invalid-entry" else WARNING, rel, problem.message + ";" + how + keep,
                       fixable=True)
    owner = path.stem if path.parent.name == HOSTS else None
    advice = (f"; only host {owner} rewrites its shard (its other entries are read from the view and copies)"
              if owner else "; the session's next hook writes a fresh file")
    return Finding(kind, ERROR if kind != "invalid-entry" else WARNING, rel, problem.message + advice + keep,
                   host=owner)


def _read_shards(home: Path, host: str, fs=None) -> tuple[list[ShardData], list[Finding]]:
    out, rows = [], []
    for name in sorted(copies.listdir(home / HOSTS)):
        stem = name[:-5] if name.endswith(".json") else ""
        if not stem or not is_host_id(stem) or not is_original(name, where="hosts"):
            continue
        path = home / HOSTS / name
        result = read_json(path, root=home, host=host, keep=False, fs=fs)
        convs: list[dict] = []
        settings: dict = {}
        clock, written, fmt = ZERO, 0, 0
        for value in result.values:
            if not isinstance(value, dict):
                continue
            try:
                clock = max(clock, Stamp.decode(value.get("clock", "0:0")))
            except ValueError:
                pass
            if isinstance(value.get("written"), int) and not isinstance(value.get("written"), bool):
                written = max(written, value["written"])
            if isinstance(value.get("format"), int) and not isinstance(value.get("format"), bool):
                fmt = max(fmt, value["format"])
            good = {}
            for k, v in (value.get("conversations") or {}).items() if isinstance(value.get("conversations"), dict) else ():
                try:
                    good[k] = normalize_record(v)
                except (RecordError, ValueError, TypeError):
                    continue
            convs.append(good)
            for k, v in (value.get("settings") or {}).items() if isinstance(value.get("settings"), dict) else ():
                try:
                    s = parse_setting(v)
                except RecordError:
                    continue
                if k not in settings or s.stamp > settings[k].stamp:
                    settings[k] = s
        if fmt > SHARD_FORMAT:
            rows.append(Finding("shard-format", ERROR, f"{HOSTS}/{name}",
                                f"written by a newer subconscious (format {fmt}); upgrade subconscious on this machine",
                                host=stem))
        out.append(ShardData(stem, merge_raw(convs), settings, clock, written, f"{HOSTS}/{name}"))
    return out, rows


def _sessions(store, home: Path) -> tuple[int, list[Finding], list[tuple[Path, ConflictCopy]]]:
    names = copies.listdir(home)
    listing = frozenset(names)
    ambiguous = copies.ambiguous_copies(names)
    originals = {c.original for c in copies.find(names, "root") if c.original != CONVERSATIONS}
    for name in ambiguous:
        c = classify(name, listing, where="root", include_ambiguous=True)
        if isinstance(c, ConflictCopy):
            originals.add(c.original)
    rows: list[Finding] = []
    count = 0
    limit = bound(store.now())
    quiet = _quiet(store, "views", (__file__,))  # views found without a problem, not read again while unchanged
    home_text, sep = os.fspath(home), os.sep
    for name in names:
        if name in ambiguous or not name.startswith("session-") or not name.endswith(".json"):
            continue
        sid = name[len("session-"):-len(".json")]
        if not is_session_id(sid) or not (copies.plain(name) or is_original(name)):  # (plain: never a copy)
            continue
        count += 1
        if quiet is not None:
            taken, token = quiet.token(home_text + sep + name)
            if quiet.quiet(name, token, limit):
                continue
        path = home / name
        result = read_json(path, root=home, host=store.host, keep=False, fs=store.fs)
        before = len(rows)
        newest = ZERO
        for p in result.problems:
            rows.append(_problem_finding(p, home, store.shard_path(), set()))
        for value in result.values:
            try:
                state = parse_session(value, sid)
                newest = max(newest, state.stamp)
                if state.stamp > limit:
                    rows.append(Finding("future-stamp", WARNING, name, future_message({sid: state.stamp}, "versions")
                                        + " (see docs/scale-and-bounds.md)"))
            except RecordError as exc:
                rows.append(Finding("wrong-type", ERROR, name, f"not a session state: {exc}; "
                                    "the session's next hook writes a fresh file (its bytes are kept in quarantine/)"))
        if quiet is not None and len(rows) == before:
            quiet.mark(name, taken, token, newest)
    if quiet is not None:
        quiet.save()
    found: list[tuple[Path, ConflictCopy]] = []
    for original in sorted(originals):
        sid = original[len("session-"):-len(".json")]
        if not is_session_id(sid):
            continue
        _, problems, folded = store._read_session(sid)  # the store's own reading: copies whose content is ours
        copy_paths = {str(f.path) for f in folded}
        for p in problems:
            if p.path in copy_paths or (p.kind == "future-stamp" and Path(p.path).parent != home):
                rows.append(_problem_finding(p, home, store.shard_path(), copy_paths))
        found += [(f.path, f.copy) for f in folded]
    return count, rows, found


def _quiet(store, kind: str, code: tuple[str, ...] = ()):
    """The machine-local record of the files a read-only check found nothing in (see
    :class:`..state.sessioncache.QuietFiles`), or None where there is none (a store that writes, a
    preview, a file system that cannot tell a file's identity)."""
    if not (store.read_only and store.keep_caches and getattr(store.fs, "FILE_TOKENS", False)):
        return None
    from ..state.sessions.cache import QuietFiles

    return QuietFiles(store.fs, store.home, store.clocks_dir.parent / "cache", kind, code)


def _quarantine(home: Path) -> list[dict]:
    items = []
    for name in sorted(copies.listdir(home / QUARANTINE)):
        if not name.endswith(".about.json"):
            continue
        got = REAL.read(home / QUARANTINE / name, 1 << 20)
        try:
            note = loads_state(got.data) if got.ok else {}
        except Unparseable:
            note = {}
        if isinstance(note, dict):
            note["file"] = f"{QUARANTINE}/{name[: -len('.about.json')]}"
            items.append(note)
    return items


def _temp_files(home: Path, now: float) -> list[Finding]:
    rows = []
    for directory in (home, home / HOSTS):
        for name in copies.listdir(directory):
            if not name.startswith(TEMP_PREFIX):
                continue
            path = directory / name
            try:
                age = now - path.lstat().st_mtime
            except OSError:
                continue
            if age > TEMP_AGE_S:
                rows.append(Finding("temp-file", WARNING, _rel(path, home),
                                    f"temp file of a write interrupted {age / 3600:.1f} h ago; --fix removes it",
                                    fixable=True))
    return rows


def _locks(locks_dir: Path, timeout: float, now: float) -> list[Finding]:
    from ..state.locks import probe

    rows = []
    for name in sorted(copies.listdir(locks_dir)):
        if not name.endswith(".lock"):
            continue
        path = locks_dir / name
        try:
            holder = probe(path)
        except OSError:
            continue
        if not holder:
            continue
        since = holder.get("since_epoch")
        age = now - since if isinstance(since, (int, float)) else None
        if age is not None and age <= timeout:
            continue
        held = f"{age:.0f} s" if age is not None else "for an unknown time"
        rows.append(Finding(
            "stale-lock", WARNING, str(path),
            f"host lock {name} held {held} (timeout {timeout:.0f} s) by pid {holder.get('pid')} "
            f"since {holder.get('since', '?')}: writes on this machine wait for it; if that process hangs, stop it "
            "(a lock is never broken behind its holder's back)",
            host=holder.get("host")))
    return rows


def _git(home: Path) -> tuple[Path | None, list[Finding]]:
    from ..sync.gitsetup import configured_driver, driver_works, existing_ancestor, merge_attr, rel_in, sample_paths, worktree_of, git

    top = worktree_of(existing_ancestor(home))
    if top is None:
        return None, []
    rel = rel_in(top, home)
    rows = []
    driver = configured_driver(top)
    if driver is None:
        named = git(["config", "--get", "merge.subconscious.name"], top, check=False).stdout.strip()
        effect = ("merge.subconscious.name is set without a driver, so git stops every merge of our files "
                  "('custom merge driver subconscious lacks command line')" if named else
                  "git merges would leave conflict markers in our JSON")
        rows.append(Finding(
            "git-driver-missing", ERROR, str(top),
            f"no merge.subconscious.driver in this clone: {effect}; --fix sets it (`subconscious sync setup-git` "
            "does too; run it in every clone)", fixable=True))
    elif not driver_works(driver):
        rows.append(Finding("git-driver-broken", ERROR, str(top),
                            f"merge.subconscious.driver is {driver!r}, which cannot run here; --fix points it at "
                            "this installation", fixable=True))
    if rel is not None:
        missing = [p for p in sample_paths(rel) if merge_attr(top, p) != "subconscious"]
        if missing:
            rows.append(Finding(
                "git-attributes-missing", WARNING, str(top / ".gitattributes"),
                f"git would merge {', '.join(missing)} line by line: .gitattributes does not send them to the "
                "subconscious driver; --fix adds the rules (commit them)", fixable=True))
        r = git(["ls-files", "-u", "--", rel or "."], top, check=False)
        unmerged = sorted({ln.split("\t", 1)[1] for ln in r.stdout.splitlines() if "\t" in ln})
        if unmerged:
            rows.append(Finding(
                "git-unmerged", ERROR, str(top),
                f"git lists {', '.join(unmerged[:3])}{' …' if len(unmerged) > 3 else ''} as unmerged: once free "
                "of conflict markers, `git add` and continue the merge or rebase", details={"paths": unmerged}))
    return top, rows


def _encryption(local, store, synced: tuple[Path, ...], snap=None) -> list[Finding]:
    """Issue 5's findings: sealed values whose key id this machine does not hold, damaged key files,
    keys inside the synced dir... from ``subconscious.injection.blockcache.encryption_findings`` (read-only)."""
    try:
        from ..injection.blockcache import encryption_findings
        from ..privacy.keys import KeyRing
    except ImportError:  # encryption not part of this installation
        return []
    from ..privacy.keys import policy_of

    rows = []
    policy = policy_of(snap.settings) if snap is not None else None  # the snapshot read already: not again
    for item in encryption_findings(store, KeyRing.load(local.keys), synced_dirs=synced, policy=policy):
        get = item.get if isinstance(item, Mapping) else (lambda k, d=None, i=item: getattr(i, k, d))
        severity = get("severity", WARNING)
        path = str(get("path", "") or "")
        rows.append(Finding(
            str(get("kind") or "encryption"), severity if severity in (ERROR, WARNING, INFO) else WARNING,
            _rel(path, store.home) if path else "", str(get("message", "") or ""), fixable=False,
            details={k: get(k) for k in ("key_id", "paths") if get(k) is not None}))
    return rows


def diagnose(env: Mapping[str, str], cwd: str, *, skew_threshold_s: float = DEFAULT_SKEW_S,
             now_ms: int | None = None) -> Report:
    from ..local.identity import host_identity, local_dirs
    from ..state.ids import InvalidIdentifier
    from ..state.locks import DEFAULT_TIMEOUT
    from ..state.store.core import Store

    t0 = time.monotonic()
    findings, home = letta_home_findings(env, cwd)
    from .plugin import findings as plugin_install

    findings += plugin_install(env)
    report = Report(home, None, findings)
    if home is None:
        report.elapsed_s = time.monotonic() - t0
        return report
    local = local_dirs(env)
    try:
        host = host_identity(local, env)
    except (InvalidIdentifier, RuntimeError) as exc:
        report.findings.append(Finding("letta-home", ERROR, "SUBCONSCIOUS_HOST", str(exc)))
        report.elapsed_s = time.monotonic() - t0
        return report
    report.host = host.id
    now = time.time()
    now_ms = int(now * 1000) if now_ms is None else now_ms
    store = Store(home, host.id, local.locks, local.clocks, host_name=host.name, read_only=True)
    # one snapshot: each file of the home read once (sessions are read by three checks: their views,
    # gc's facts, the encryption scan), each directory opened once (state/fs.py's holding)
    held = store.fs.holding(remember=True)
    try:
        with held:
            _home_findings(report, store, home, host, local, now, now_ms, skew_threshold_s)
    finally:
        held.close()
    report.findings += _locks(local.locks, DEFAULT_TIMEOUT, now)
    report.git_top, git_rows = _git(home)
    report.findings += git_rows
    report.elapsed_s = time.monotonic() - t0
    return report


def _home_findings(report: Report, store, home: Path, host, local, now: float, now_ms: int,
                   skew_threshold_s: float) -> None:
    if home.is_dir():
        snap = store.read()
        copy_paths = {str(c.path) for c in snap.copies}
        for problem in snap.problems:
            report.findings.append(_problem_finding(problem, home, store.shard_path(), copy_paths))
        n_sessions, session_rows, session_copies = _sessions(store, home)
        report.findings += session_rows
        for problem in store.session_files.floor_problems():
            report.findings.append(_problem_finding(problem, home, store.shard_path(), copy_paths))
        for found in snap.copies:
            report.findings.append(_copy_finding(home, found.path, found.copy))
        for path, copy in session_copies:
            report.findings.append(_copy_finding(home, path, copy))
        report.findings += missing_views(home, snap)
        from .retire import stale_shards
        from ..state.store.core import TOMBSTONE_RETENTION_MS

        report.findings += stale_shards(snap.shards, host.id, host.name, now_ms, TOMBSTONE_RETENTION_MS)
        from .retire import gc_due

        read_problems: list = []
        report.findings += gc_due(store, local.root, now_ms, snap, read_problems)
        # stamps beyond the bound in any version of any session (a host's version too: _sessions reads
        # host versions only of sessions with conflict copies), each file once
        reported = {(f.kind, f.path) for f in report.findings}
        for problem in read_problems:
            if problem.kind == "future-stamp":
                finding = _problem_finding(problem, home, store.shard_path(), copy_paths)
                if (finding.kind, finding.path) not in reported:
                    reported.add((finding.kind, finding.path))
                    report.findings.append(finding)
        shards, shard_rows = _read_shards(home, host.id, store.fs)
        report.findings += shard_rows
        report.findings += session_splits(shards, snap.raw)
        report.findings += split_brain(shards, snap.settings.get("agentId"))
        report.findings += clock_skew(shards, now_ms, skew_threshold_s)
        report.findings += legacy_unadopted(snap.raw, merge_raw([s.conversations for s in shards]))
        report.findings += quarantine_note(_quarantine(home))
        report.findings += _temp_files(home, now)
        report.findings += _encryption(local, store, (home.parent.parent, home), snap)
        live = snap.live
        report.counts = {
            "sessions": n_sessions, "conversations": len(live), "tombstones": len(snap.raw) - len(live),
            "hosts": len(snap.shards), "conflict_copies": len(snap.copies) + len(session_copies),
        }
        by_engine: dict[str, int] = {}
        for copy in [f.copy for f in snap.copies] + [c for _, c in session_copies]:
            by_engine[copy.engine.value] = by_engine.get(copy.engine.value, 0) + 1
        report.by_engine = dict(sorted(by_engine.items()))
    else:
        report.findings.append(Finding("letta-home", INFO, str(home), "no state here yet (nothing written)"))
        report.counts = {"sessions": 0, "conversations": 0, "tombstones": 0, "hosts": 0, "conflict_copies": 0}
