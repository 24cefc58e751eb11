"""Redaction: recall per secret format, false positives on ordinary code and prose, throughput.

    python benchmarks/redaction_bench.py                 # this checkout's subconscious/redact.py
    python benchmarks/redaction_bench.py --against REV   # also the redact.py of git revision REV, side by side

Recall: a sample of ``tests/fixtures/secrets/corpus.jsonl`` (generated fakes: tests/fixtures/secrets/generate.py)
counts as caught when none of its secret fragments survives ``redact``. False positives: this repository's
own product code (``subconscious/``, ``benchmarks/``) and prose (the READMEs), each file redacted as a whole
(as a Read result would be); a line counts when redaction changed it. ``tests/`` is shown apart: it holds fake
secrets on purpose. Throughput: 1 MiB of that code and prose with corpus samples mixed in (~5 %), redacted
line by line (a transcript) and in 8 KiB pieces (tool results); CPU time of this process, so other load on
the machine does not count.
"""
from __future__ import annotations

import argparse
import collections
import difflib
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "fixtures" / "secrets" / "corpus.jsonl"


def load_corpus() -> list[dict]:
    return [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]


def ham_files(which: str = "product") -> list[Path]:
    if which == "product":
        files = sorted((REPO / "subconscious").rglob("*.py")) + sorted((REPO / "benchmarks").glob("*.py"))
        files += [REPO / "README.md", REPO / "sync" / "README.md", REPO / "deploy" / "README-letta.md"]
    else:
        files = sorted(p for p in (REPO / "tests").rglob("*.py") if "fixtures" not in p.parts)
    return [p for p in files if p.is_file()]


def recall(redact) -> dict[str, tuple[int, int]]:
    got: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for s in load_corpus():
        out = redact(s["text"])
        got[s["format"]][1] += 1
        if all(x not in out for x in s["secrets"]):
            got[s["format"]][0] += 1
    return {k: (v[0], v[1]) for k, v in got.items()}


def changed_lines(redact, text: str) -> list[str]:
    """The lines of ``text`` that redaction changed or removed."""
    before, after = text.split("\n"), redact(text).split("\n")
    out = []
    for op, a0, a1, _b0, _b1 in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes():
        if op in ("replace", "delete"):
            out.extend(before[a0:a1])
    return out


def false_positives(redact, files: list[Path]) -> tuple[int, int, list[tuple[str, str]]]:
    lines = bad = 0
    examples = []
    for p in files:
        text = p.read_text(encoding="utf-8", errors="replace")
        lines += text.count("\n") + 1
        hit = changed_lines(redact, text)
        bad += len(hit)
        examples += [(str(p.relative_to(REPO)), h.strip()[:110]) for h in hit]
    return bad, lines, examples


def mixed_text(size: int = 1 << 20) -> str:
    ham = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in ham_files()).split("\n")
    secrets = [s["text"] for s in load_corpus()]
    out, n, i, j = [], 0, 0, 0
    while n < size:
        piece = secrets[j % len(secrets)] if i % 20 == 19 else ham[i % len(ham)]
        j += i % 20 == 19
        i += 1
        out.append(piece)
        n += len(piece) + 1
    return "\n".join(out)[:size]


def throughput(redact, text: str, repeat: int = 3) -> tuple[float, float]:
    lines = text.split("\n")
    chunks = [text[i:i + 8192] for i in range(0, len(text), 8192)]
    best_l = best_c = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        for line in lines:
            redact(line)
        best_l = min(best_l, time.process_time() - t)
        t = time.process_time()
        for c in chunks:
            redact(c)
        best_c = min(best_c, time.process_time() - t)
    mb = len(text.encode()) / 1e6
    return mb / best_l, mb / best_c


def module_at(rev: str):
    src = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:subconscious/redact.py"], check=True,
                         capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "redact_at_rev.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("redact_at_rev", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--against", metavar="REV", help="compare with subconscious/redact.py at this git revision")
    ap.add_argument("--examples", type=int, default=15, help="false positives to list")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(REPO))
    from subconscious import redact as current

    mods = [("this checkout", current)] + ([(args.against, module_at(args.against))] if args.against else [])
    results = {name: recall(m.redact) for name, m in mods}
    formats = sorted(results[mods[0][0]])
    print("recall per format" + "".join(f" | {name:>14}" for name, _ in mods))
    for f in formats:
        print(f"  {f:<26}" + "".join(f" | {results[n][f][0]:>4}/{results[n][f][1]:<3} {100 * results[n][f][0] / results[n][f][1]:5.1f}%"
                                     for n, _ in mods))
    for n, _ in mods:
        c = sum(v[0] for v in results[n].values())
        t = sum(v[1] for v in results[n].values())
        print(f"  all formats ({n}): {c}/{t} = {100 * c / t:.1f}%")
    text = mixed_text()
    for name, m in mods:
        bad, lines, ex = false_positives(m.redact, ham_files())
        tbad, tlines, _ = false_positives(m.redact, ham_files("tests"))
        per_line, chunked = throughput(m.redact, text)
        print(f"\n[{name}]")
        print(f"  false positives, product code + READMEs: {bad}/{lines} lines = {100 * bad / lines:.3f}%")
        print(f"  lines changed in tests/ (fake secrets on purpose, for information): {tbad}/{tlines}")
        print(f"  throughput on 1 MiB mixed text: {per_line:.1f} MB/s line by line, {chunked:.1f} MB/s in 8 KiB pieces")
        for path, line in ex[:args.examples]:
            print(f"    FP {path}: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
