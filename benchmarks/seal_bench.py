"""Figures for sealed block caches: import cost, seal/open time, and the hooks' load/store round trip.

    python benchmarks/seal_bench.py

Prints numbers; asserts nothing (speed goals are shown, not tested).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


PYCACHE = Path(tempfile.mkdtemp(prefix="seal-bench-pyc-"))
# as installed: with bytecode (kept out of the tree), which PYTHONDONTWRITEBYTECODE would prevent
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | {"PYTHONPYCACHEPREFIX": str(PYCACHE)}


def fresh_import_ms(stmt: str, before: str = "pass", runs: int = 21) -> float:
    """Median wall time of ``stmt`` in a fresh interpreter that has already run ``before``."""
    code = f"{before}; import time; t=time.perf_counter(); {stmt}; print((time.perf_counter()-t)*1000)"
    out = []
    for i in range(runs + 1):
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True, env=ENV)
        if i:  # the first run writes the bytecode
            out.append(float(r.stdout))
    return statistics.median(out)


def per_call_us(fn, n: int) -> float:
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n * 1e6


def main() -> None:
    hook = "import logging, subconscious.state.store.core"  # what a hook has imported anyway
    print(f"import cost in a fresh interpreter after `{hook}` (median of 21, with bytecode):")
    for stmt in (
        "import subconscious.injection.blockcache",
        "import subconscious.injection.blockcache; from subconscious.state.seal import Key; Key(bytes(32)).cipher()",
        "from cryptography.hazmat.primitives.ciphers.aead import AESGCM",
    ):
        print(f"  {fresh_import_ms(stmt, hook):7.1f} ms  {stmt}")

    from subconscious.injection.blockcache import load_blocks, store_blocks
    from subconscious.privacy.keys import KeyRing, Policy, ScryptParams, derive_key
    from subconscious.state.seal import Key, open_envelope, seal
    from subconscious.state.store.core import Store

    key = Key.generate()
    ring = {key.id: key}
    for size in (100, 2_000, 20_000):
        text = "x" * size
        env = seal(key, text, session_id="s", label="guidance")
        s = per_call_us(lambda: seal(key, text, session_id="s", label="guidance"), 5000)
        o = per_call_us(lambda: open_envelope(ring, env, session_id="s", label="guidance"), 5000)
        print(f"seal {s:6.1f} us, open {o:6.1f} us  ({size} chars)")

    for n in (2**14, 2**17):
        params = ScryptParams.new(n=n)
        t = time.perf_counter()
        derive_key("correct horse battery staple", params)
        print(f"scrypt n={n}: {(time.perf_counter() - t) * 1000:.0f} ms")

    blocks = {f"block{i}": "memory line\n" * 150 for i in range(8)}  # 8 blocks of ~1.8 KB, like the bundled agent
    with tempfile.TemporaryDirectory() as tmp:
        tmpdir = Path(tmp)
        for label, enabled in (("plain", False), ("sealed", True)):
            store = Store(tmpdir / label / "home", "bench", tmpdir / label / "locks", tmpdir / label / "clocks")
            policy = Policy(enabled, key.id if enabled else None)
            store_blocks(store, ring, "s1", blocks, policy=policy)
            loads = per_call_us(lambda: load_blocks(store, ring, "s1"), 300) / 1000
            same = per_call_us(lambda: store_blocks(store, ring, "s1", blocks, policy=policy), 100) / 1000
            flip = [dict(blocks, block0=f"changed {i}") for i in range(100)]
            it = iter(flip)
            changed = per_call_us(lambda: store_blocks(store, ring, "s1", next(it), policy=policy), 100) / 1000
            print(f"{label:6}: load_blocks {loads:.2f} ms, store_blocks unchanged {same:.2f} ms, "
                  f"one block changed {changed:.2f} ms (8 blocks, fsynced writes)")
    _ = KeyRing


if __name__ == "__main__":
    main()
