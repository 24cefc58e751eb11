"""What the private-text index costs (subconscious/privacy/projectindex.py, textindex.py) on a large project.

    python benchmarks/private_index_bench.py [--files 10000] [--kib 4] [--runs 5]

Builds a project of ``--files`` text files of ``--kib`` KiB each (one in fifty holding a ``<private>`` block,
a ``secrets/`` directory under SUBCONSCIOUS_PRIVATE_PATHS) and prints, as median (min-max) over ``--runs``:

- the first build (no cache: every file read), a build from the cache (nothing changed: a walk and a stat per
  file), and a build after one file changed;
- the scrub: MB/s of tool-result text looked at, and the worker's overhead on one update of 40 tool results
  (formatting it with the index against without);
- the hooks: none of them imports the index (its modules are checked against ``sys.modules`` after a
  PreToolUse hook's import path), so their overhead is zero by construction.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from subconscious.delivery.lines import ToolResult, ToolUse  # noqa: E402
from subconscious.delivery.update_xml import format_entries  # noqa: E402
from subconscious.privacy.projectindex import project_index  # noqa: E402
from subconscious.privacy.textindex import PrivateLines  # noqa: E402

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma".split()


def line(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))) + f" {rng.randint(0, 10**6)}"


def make_project(root: Path, files: int, kib: int, rng: random.Random) -> None:
    (root / "secrets").mkdir(parents=True)
    for i in range(files):
        d = root / f"pkg{i // 200}"
        d.mkdir(exist_ok=True)
        lines, size = [], 0
        while size < kib * 1024:
            lines.append(line(rng))
            size += len(lines[-1]) + 1
        if i % 50 == 0:
            at = len(lines) // 2
            lines[at:at] = ["<private>", *(f"secret {i} {line(rng)}" for _ in range(5)), "</private>"]
        (d / f"f{i}.md").write_text("\n".join(lines) + "\n")
    for i in range(20):
        (root / "secrets" / f"s{i}.env").write_text("\n".join(f"KEY_{j}=value-{i}-{j}-{rng.random()}" for j in range(30)))


def timed(fn, runs: int) -> tuple[list[float], object]:
    out, result = [], None
    for _ in range(runs):
        t = time.perf_counter()
        result = fn()
        out.append(time.perf_counter() - t)
    return out, result


def fmt(xs: list[float], unit: float = 1000.0, suffix: str = "ms") -> str:
    return f"{statistics.median(xs) * unit:,.1f} {suffix} ({min(xs) * unit:,.1f}-{max(xs) * unit:,.1f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--kib", type=int, default=4)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        root, cache = Path(tmp) / "project", Path(tmp) / "cache"
        make_project(root, a.files, a.kib, rng)
        size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
        globs = ["secrets/**"]
        print(f"project: {a.files:,} files + 20 private ones, {size / 2**20:,.1f} MiB, "
              f"{a.files // 50:,} private blocks")

        def cold():
            for p in cache.glob("*"):
                p.unlink()
            return project_index(str(root), globs, cache)
        t_cold, idx = timed(cold, max(1, a.runs // 2))
        print(f"first build (no cache):      {fmt(t_cold)}   index: {idx.count:,} entries, partial: {idx.partial}")
        t_warm, _ = timed(lambda: project_index(str(root), globs, cache), a.runs)
        print(f"build from the cache:        {fmt(t_warm)}")
        victim = root / "pkg0" / "f1.md"

        def one_changed():
            victim.write_text(victim.read_text() + line(rng) + "\n")
            return project_index(str(root), globs, cache)
        t_one, _ = timed(one_changed, a.runs)
        print(f"build after one file changed: {fmt(t_one)}")
        print(f"cache: {sum(p.stat().st_size for p in cache.iterdir()) / 2**20:,.1f} MiB")

        # the scrub, on tool results like Bash's and an MCP read's: mostly public lines, a few private ones
        results = ["\n".join(line(rng) for _ in range(25)) for _ in range(40)]
        text = "\n".join(results)
        t_scrub, _ = timed(lambda: idx.scrub(text), a.runs)
        print(f"scrub: {len(text) / statistics.median(t_scrub) / 1e6:,.2f} MB/s of text "
              f"({len(text):,} chars in {fmt(t_scrub)})")
        entries = []
        for i, r in enumerate(results):
            entries += [ToolUse(str(i), "Bash", {"command": f"cat pkg0/f{i}.md"}), ToolResult(str(i), r, False)]
        names = {str(i): "Bash" for i in range(40)}
        inputs = {str(i): {"command": f"cat pkg0/f{i}.md"} for i in range(40)}
        without, _ = timed(lambda: format_entries(entries, names, True, globs, inputs, None, str(root),
                                                   PrivateLines()), a.runs)
        with_, _ = timed(lambda: format_entries(entries, names, True, globs, inputs, None, str(root), idx), a.runs)
        print(f"one update of 40 tool results: {fmt(without)} without the index, {fmt(with_)} with it "
              f"(+{(statistics.median(with_) - statistics.median(without)) * 1000:,.1f} ms)")
    import subprocess

    probe = ("import sys, subconscious.hotpath, subconscious.hooks.run, subconscious.hooks.pipeline;"
             "print(sorted(m for m in sys.modules if 'textindex' in m or 'projectindex' in m))")
    got = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[1]).stdout.strip()
    print(f"hooks: index modules imported by the hook path: {got} (overhead 0)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
