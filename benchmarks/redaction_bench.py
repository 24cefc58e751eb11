"""Redaction: recall per secret format and false positives, side by side with detect-secrets (Yelp); throughput;
time on adversarial inputs.

    python benchmarks/redaction_bench.py                     # this checkout's subconscious/privacy/redact.py
    python benchmarks/redaction_bench.py --against REV       # also the redact.py of git revision REV, side by side
    python benchmarks/redaction_bench.py --install-scanner   # first put detect-secrets in its cache venv
    python benchmarks/redaction_bench.py --quick             # 1 MiB for throughput instead of 10 MB

Recall: a sample of ``tests/fixtures/secrets/corpus.jsonl`` (generated fakes: tests/fixtures/secrets/generate.py)
counts as caught when none of its secret fragments survives ``redact``.

False positives: the lines redaction changes in this repository's own ``*.py``, ``*.md`` and ``*.json`` files,
each redacted as a whole (as a Read result would be), except the secret fixtures: ``tests/fixtures/secrets/`` and
the test files that test redaction (they mention it; they hold fake secrets on purpose). The bound of
tests/unit/test_redact_corpus.py applies to that figure; the product code and READMEs alone are shown too.

detect-secrets 1.5.0 (its default plugins and filters, ``detect-secrets scan --all-files``) runs from a venv of
its own in ``$SUBCONSCIOUS_TEST_CACHE`` (default ``~/.cache/subconscious-tests``), made by ``--install-scanner``
(or ``pip install .[bench]`` into the interpreter running this). It is no dependency of subconscious. It flags
lines for a person to review rather than removing values, so it is given the benefit of the doubt: a sample
counts as caught when every line holding a secret fragment is flagged (as if the whole line were hidden); its
false positives are the flagged lines of the same files. Without it the comparison is said to be missing.

Throughput: 10 MB of realistic text (this repository's sources as files and as Claude Code transcript lines of
Read results, the recorded transcripts in tests/fixtures/claude-code, ~1 % corpus samples), redacted line by
line (a transcript), in 8 KiB pieces (tool results) and as one text; CPU time of this process (best of 2), so
other load on the machine counts less. Adversarial inputs: the time for n = 10,000 and 100,000 characters of
inputs made to make a backtracking pattern slow; a ratio near 10 is linear.
"""
from __future__ import annotations

import argparse
import collections
import difflib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "fixtures" / "secrets" / "corpus.jsonl"
SCANNER = "detect-secrets==1.5.0"


def load_corpus() -> list[dict]:
    return [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]


def _repo_files(*exts: str) -> list[str]:
    try:
        out = subprocess.run(["git", "-C", str(REPO), "ls-files", *("*." + e for e in exts)], capture_output=True,
                             text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: every such file under the tree
        out = [str(p.relative_to(REPO)) for e in exts for p in REPO.rglob("*." + e) if ".git" not in p.parts]
    return sorted(set(out))


def _tests_redaction(rel: str, text: str) -> bool:
    return rel.startswith("tests/fixtures/secrets/") or (rel.startswith("tests/") and "redact" in text.lower())


def ham_files(which: str = "repo") -> list[Path]:
    """``repo``: every *.py, *.md, *.json but the secret fixtures (see the module docstring); ``product``: the
    package, the benchmarks, the READMEs and docs/; ``tests``: the test files ``repo`` leaves out."""
    if which == "product":
        files = sorted((REPO / "subconscious").rglob("*.py")) + sorted((REPO / "benchmarks").glob("*.py"))
        files += [REPO / "README.md", REPO / "sync" / "README.md", REPO / "deploy" / "README-letta.md"]
        files += sorted((REPO / "docs").glob("*.md"))
        return [p for p in files if p.is_file()]
    out = []
    for rel in _repo_files("py", "md", "json"):
        p = REPO / rel
        if not p.is_file():
            continue
        left_out = _tests_redaction(rel, p.read_text(encoding="utf-8", errors="replace"))
        if left_out == (which == "tests"):
            out.append(p)
    return out


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


# --- detect-secrets, from a venv of its own ---

def scanner_venv() -> Path:
    root = Path(os.environ.get("SUBCONSCIOUS_TEST_CACHE") or Path.home() / ".cache" / "subconscious-tests")
    return root.expanduser() / ("scanner-" + SCANNER.replace("==", "-"))


def scanner_command() -> list[str] | None:
    venv = scanner_venv()
    if (venv / "installed").is_file():
        return [str(venv / "bin" / "detect-secrets")]
    if importlib.util.find_spec("detect_secrets") is not None:
        return [sys.executable, "-m", "detect_secrets.main"]
    return None


def install_scanner() -> None:
    """The venv, once; a half-made one (no marker) is made again."""
    venv = scanner_venv()
    if (venv / "installed").is_file():
        return
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", SCANNER], check=True)
    (venv / "installed").write_text(SCANNER + "\n")


_SUFFIX = {"json": ".json", "json_escaped": ".json", "yaml": ".yaml", "python": ".py", "env": ".env", "shell": ".sh",
           "export": ".sh", "curl": ".sh", "config": ".cfg"}


def scan_lines(cmd: list[str], files: dict[str, str]) -> dict[str, set[int]]:
    """{relative name: text} -> {relative name: flagged line numbers (1-based)}, one detect-secrets run."""
    with tempfile.TemporaryDirectory() as d:
        for name, text in files.items():
            p = Path(d) / name
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text, encoding="utf-8")
        r = subprocess.run(cmd + ["scan", "--all-files", "."], cwd=d, capture_output=True, text=True, check=True)
    out: dict[str, set[int]] = collections.defaultdict(set)
    for name, hits in json.loads(r.stdout)["results"].items():
        out[name].update(h["line_number"] for h in hits)
    return out


def scanner_recall(cmd: list[str]) -> dict[str, tuple[int, int]]:
    corpus = load_corpus()
    names = {f"s{i:05d}{_SUFFIX.get(s['context'], '.txt')}": s for i, s in enumerate(corpus)}
    flagged = scan_lines(cmd, {n: s["text"] for n, s in names.items()})
    got: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for n, s in names.items():
        lines = s["text"].split("\n")
        need = {i + 1 for i, line in enumerate(lines) if any(x in line for x in s["secrets"])}
        need |= {0} if any("\n" in x for x in s["secrets"]) else set()  # a fragment spanning lines: never whole
        got[s["format"]][1] += 1
        got[s["format"]][0] += bool(need) and need <= flagged.get(n, set())
    return {k: (v[0], v[1]) for k, v in got.items()}


def scanner_false_positives(cmd: list[str], files: list[Path]) -> tuple[int, int]:
    texts = {str(p.relative_to(REPO)): p.read_text(encoding="utf-8", errors="replace") for p in files}
    flagged = scan_lines(cmd, texts)
    return sum(len(v) for v in flagged.values()), sum(t.count("\n") + 1 for t in texts.values())


# --- throughput ---

def realistic_text(size: int) -> str:
    """This repository's sources as files and as Claude Code transcript lines (Read results), its recorded
    transcripts, and ~1 % corpus samples, to ``size`` characters."""
    sources = [REPO / rel for rel in _repo_files("py", "md", "json", "jsonl", "sh", "toml")
               if not rel.startswith("tests/fixtures/secrets/")]
    pieces = []
    for i, p in enumerate(p for p in sources if p.is_file()):
        text = p.read_text(encoding="utf-8", errors="replace")
        if p.suffix == ".jsonl":
            pieces.append(text)  # a recorded transcript as it is
            continue
        pieces.append(text)
        numbered = "\n".join("%6d\t%s" % (n + 1, line) for n, line in enumerate(text.split("\n")[:2000]))
        pieces.append(json.dumps({"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{i:06d}", "content": numbered}]},
            "uuid": f"00000000-0000-0000-0000-{i:012d}"}) + "\n")
    secrets = [s["text"] for s in load_corpus()]
    out, n, j = [], 0, 0
    while n < size:
        for k, piece in enumerate(pieces):
            out.append(piece)
            n += len(piece) + 1
            if k % 3 == 0:  # about 1 % of the text
                out.append(secrets[j % len(secrets)])
                j += 1
                n += len(out[-1]) + 1
            if n >= size:
                break
    return "\n".join(out)[:size]


def throughput(redact, text: str, repeat: int = 2) -> tuple[float, float, float]:
    lines = text.split("\n")
    chunks = [text[i:i + 8192] for i in range(0, len(text), 8192)]
    best = [float("inf")] * 3
    for _ in range(repeat):
        for k, items in enumerate((lines, chunks, [text])):
            t = time.process_time()
            for x in items:
                redact(x)
            best[k] = min(best[k], time.process_time() - t)
    mb = len(text.encode()) / 1e6
    return tuple(mb / b for b in best)


_BEGIN = "-----BEGIN %s-----" % "PRIVATE KEY"
ADVERSARIAL = {  # name -> (repeated unit, prefix): each feeds one rule what makes a backtracking pattern try hard
    "token run": ("aB3", ""),
    "://, colons, no @": (":x/", "https://u"),
    "BEGIN, then blank lines": ("\n", _BEGIN),
    "BEGIN, then '\\n' escapes": ("\\n", _BEGIN),
    "name= repeated": ("pass" + "word=", ""),
    "string literals": ('"ab" ', ""),
    "mysql, spaces": (" ", "mysql"),
    "machine tokens": ("machine x login ", ""),
    "cookie pairs": ("a=bbbbbbb;", "Cookie: "),
    "hex run": ("0f", "0x"),
    "Grep prefixes": ("p:1:", ""),
    "kind: Secret data": ("\n  k: dmFsdWU=", "kind: Secret\ndata:"),
}


def adversarial(redact) -> list[tuple[str, float, float]]:
    out = []
    for name, (unit, prefix) in ADVERSARIAL.items():
        times = []
        for n in (10_000, 100_000):
            s = prefix + unit * (n // len(unit))
            t = time.process_time()
            redact(s)
            times.append(time.process_time() - t)
        out.append((name, times[0], times[1]))
    return out


def module_at(rev: str):
    src = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:subconscious/privacy/redact.py"], check=True,
                         capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "redact_at_rev.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("redact_at_rev", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _pct(c: int, t: int) -> str:
    return f"{c:>4}/{t:<4} {100 * c / t:5.1f}%" if t else " " * 16


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--against", metavar="REV", help="compare with subconscious/privacy/redact.py at this git revision")
    ap.add_argument("--install-scanner", action="store_true", help=f"install {SCANNER} in its cache venv first")
    ap.add_argument("--no-scanner", action="store_true", help="leave detect-secrets out")
    ap.add_argument("--quick", action="store_true", help="1 MiB for throughput, not 10 MB")
    ap.add_argument("--examples", type=int, default=15, help="false positives to list")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(REPO))
    from subconscious.privacy import redact as current

    if args.install_scanner:
        install_scanner()
    mods = [("this checkout", current)] + ([(args.against, module_at(args.against))] if args.against else [])
    results = {name: recall(m.redact) for name, m in mods}
    cmd = None if args.no_scanner else scanner_command()
    cols = [name for name, _ in mods]
    if cmd:
        results["detect-secrets"] = scanner_recall(cmd)
        cols.append("detect-secrets")
    formats = sorted(results[cols[0]])
    print(f"{len(formats)} formats, {sum(v[1] for v in results[cols[0]].values())} samples")
    print(f"recall per format           " + "".join(f" | {c:>16}" for c in cols))
    for f in formats:
        print(f"  {f:<26}" + "".join(f" | {_pct(*results[c].get(f, (0, 0)))}" for c in cols))
    print("  " + "all formats".ljust(26) + "".join(
        f" | {_pct(sum(v[0] for v in results[c].values()), sum(v[1] for v in results[c].values()))}" for c in cols))
    print("  " + "formats fully caught".ljust(26) + "".join(
        f" | {sum(v[0] == v[1] for v in results[c].values()):>4}/{len(formats):<11}" for c in cols))
    if not cmd:
        print(f"\n(no comparison with {SCANNER}: " + ("left out by --no-scanner)" if args.no_scanner else
              "not installed; run with --install-scanner to add it)"))

    repo, product = ham_files("repo"), ham_files("product")
    print("\nfalse positives (lines changed or flagged)")
    for name, m in mods:
        bad, lines, ex = false_positives(m.redact, repo)
        pbad, plines, _ = false_positives(m.redact, product)
        print(f"  [{name}] repository *.py *.md *.json but the secret fixtures: {bad}/{lines} = {100 * bad / lines:.3f}%;"
              f" product code + READMEs: {pbad}/{plines} = {100 * pbad / plines:.3f}%")
        for path, line in ex[:args.examples]:
            print(f"      {path}: {line}")
    if cmd:
        bad, lines = scanner_false_positives(cmd, repo)
        pbad, plines = scanner_false_positives(cmd, product)
        print(f"  [detect-secrets] repository: {bad}/{lines} = {100 * bad / lines:.3f}%;"
              f" product code + READMEs: {pbad}/{plines} = {100 * pbad / plines:.3f}%")

    size = (1 << 20) if args.quick else 10_000_000
    text = realistic_text(size)
    print(f"\nthroughput on {len(text.encode()) / 1e6:.1f} MB of realistic text (MB/s of CPU: line by line | "
          "8 KiB pieces | one text)")
    for name, m in mods:
        per_line, chunked, whole = throughput(m.redact, text)
        print(f"  [{name}] {per_line:6.2f} | {chunked:6.2f} | {whole:6.2f}")
    print("\nadversarial inputs (seconds of CPU for 10,000 | 100,000 characters, ratio; ~10 is linear)")
    adv = {name: adversarial(m.redact) for name, m in mods}
    for i, case in enumerate(ADVERSARIAL):
        print(f"  {case:<28}" + "".join(
            f" | [{name}] {adv[name][i][1]:.4f} {adv[name][i][2]:.4f} x{adv[name][i][2] / max(adv[name][i][1], 1e-6):.0f}"
            for name, _ in mods))
    return 0


if __name__ == "__main__":
    sys.exit(main())
