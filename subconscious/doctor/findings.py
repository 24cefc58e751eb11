"""What ``subconscious doctor`` reports: findings, and their table and JSON forms (pure)."""

from __future__ import annotations

import shutil
import textwrap
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

ERROR, WARNING, INFO = "error", "warning", "info"
SEVERITIES = (ERROR, WARNING, INFO)
_RANK = {ERROR: 0, WARNING: 1, INFO: 2}

# Every kind doctor knows, with what it means (shown by --json consumers; listed in docs/several-machines.md, "subconscious doctor").
KINDS: dict[str, str] = {
    "conflict-copy": "a sync engine's conflict copy of one of our files (folded by --fix, kept under backups/)",
    "missing-view": "conversations.json, or a session file whose conflict copies exist, is missing (rclone bisync "
                    "renames both versions away); rebuilt by --fix and by the next write",
    "git-conflict-markers": "a state file with git conflict markers (merged by --fix, original kept in quarantine/)",
    "unparseable": "a state file that is not valid JSON (bytes kept in quarantine/)",
    "future-stamp": "a stamp or floor beyond this machine's clock + 24 h (a wrong clock or a crafted file): "
                    "never followed, never adopted; such versions count as the oldest of their key",
    "adopted-hidden": "upstream's entries not shown because an adoption record says they were adopted already, "
                      "while no shard holds their key (a stale rewrite of long-deleted entries, or a forged record)",
    "invalid-entry": "entries of a state file that are not of our format (skipped, bytes kept)",
    "wrong-type": "a state file whose JSON is not what it should be (bytes kept)",
    "unreadable": "a state file that cannot be read (permissions?)",
    "unsafe-file": "a symbolic link, FIFO, socket, device or over-large file named like a state file (never "
                   "followed, opened or copied)",
    "quarantined": "files set aside in quarantine/ (kept bytes of files that did not parse)",
    "session-split": "the same session mapped to different conversations by different hosts",
    "split-brain": "hosts using different Letta agents for the same home",
    "legacy-entry": "entries written by the upstream plugin that no host shard holds yet",
    "stale-lock": "a host lock held longer than its timeout",
    "git-driver-missing": "a git clone without the merge.subconscious.driver config",
    "git-driver-broken": "a merge.subconscious.driver whose command cannot run",
    "git-attributes-missing": "a git repo whose .gitattributes does not send our files to the driver",
    "git-unmerged": "git still lists our files as unmerged (finish the merge or rebase)",
    "clock-skew": "a host whose clock differs from the others' beyond the threshold",
    "letta-home": "LETTA_HOME unexpanded, or pointing somewhere odd",
    "temp-file": "a leftover temp file of an interrupted write",
    "shard-format": "a shard written by a newer subconscious",
    "stale-shard": "a host that has not written for the retention window, or whose id was replaced on the same "
                   "machine; its shard keeps old deletes from being pruned (--fix retires it: adopted, then kept "
                   "under backups/)",
    "gc-due": "sessions with no activity for longer than 30 days on every machine, or backups/ and quarantine/ "
              "files that old: `subconscious gc` retires them (--dry-run shows which)",
    "plugin-install": "the plugin's own install (hooks/setup): its Python, version, whether it starts, the last "
                      "set-up's result",
    "encryption": "encryption findings (from subconscious.injection.blockcache.encryption_findings, which names its own "
                  "kinds: unknown key ids, damaged key files, keys inside the synced dir, ...)",
}


@dataclass(frozen=True)
class Finding:
    kind: str
    severity: str  # error | warning | info
    path: str  # relative to the state dir when inside it
    message: str
    fixable: bool = False
    engine: str | None = None  # conflict copies: which sync engine made it
    host: str | None = None
    details: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def problem(self) -> bool:
        """Counts against a clean bill of health (info does not)."""
        return self.severity in (ERROR, WARNING)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        return {k: v for k, v in out.items() if v not in (None, {}) or k in ("path",)}


def ordered(findings: Iterable[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (_RANK.get(f.severity, 9), f.kind, f.path, f.message))


def exit_code(findings: Iterable[Finding]) -> int:
    return 1 if any(f.problem for f in findings) else 0


def summary(findings: list[Finding]) -> str:
    problems = [f for f in findings if f.problem]
    notes = len(findings) - len(problems)
    if not problems:
        head = "no problems found"
    else:
        fixable = sum(1 for f in problems if f.fixable)
        head = f"{len(problems)} problem{'s' * (len(problems) != 1)}"
        head += f" ({fixable} fixable with --fix)" if fixable else " (none fixable with --fix)"
    if notes:
        head += f", {notes} note{'s' * (notes != 1)}"
    return head


def table(findings: list[Finding], width: int | None = None) -> str:
    """A fixed-column table, messages wrapped to the terminal width."""
    if not findings:
        return ""
    width = width or shutil.get_terminal_size((120, 20)).columns
    rows = [(f.severity, f.kind, f.path or "-", "yes" if f.fixable else "no", f.message) for f in ordered(findings)]
    heads = ("SEVERITY", "KIND", "PATH", "FIX", "MESSAGE")
    w = [max(len(heads[i]), *(len(r[i]) for r in rows)) for i in range(4)]
    w[2] = min(w[2], 56)
    lead = sum(w) + 2 * 4
    msg_width = max(30, width - lead)
    lines = ["  ".join(h.ljust(w[i]) if i < 4 else h for i, h in enumerate(heads))]
    for r in rows:
        path = r[2] if len(r[2]) <= w[2] else r[2][: w[2] // 2 - 1] + "…" + r[2][-(w[2] - w[2] // 2):]
        wrapped = textwrap.wrap(r[4], msg_width) or [""]
        cells = [r[0].ljust(w[0]), r[1].ljust(w[1]), path.ljust(w[2]), r[3].ljust(w[3])]
        lines.append("  ".join(cells) + "  " + wrapped[0])
        lines += [" " * lead + cont for cont in wrapped[1:]]
    return "\n".join(lines)


def report_json(before, after=None, actions=None) -> dict:
    """A report (and, after --fix, the one before and what was done) as ``doctor --json`` prints it."""
    final = after or before
    out = {
        "home": str(final.home) if final.home else None,
        "host": final.host,
        "ok": not final.problems,
        "counts": final.counts,
        "conflict_copies_by_engine": final.by_engine,
        "findings": [f.to_json() for f in final.findings],
        "elapsed_s": round(final.elapsed_s, 3),
    }
    if after is not None:
        out["before"] = [f.to_json() for f in before.findings]
        out["fixed"] = actions or []
    return out
