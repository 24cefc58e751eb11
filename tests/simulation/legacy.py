"""Run a store that has no ``fs=`` seam (today's main before the seam, or an old commit) on the
simulated file system, by patching the module globals it does its I/O through — only inside the
simulation, only while a world is running. This is how the simulator shows the bugs of the store as
it was (the "fails on today's main" evidence); the seam-aware store is driven through ``fs=``.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import types
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from subconscious.state.conflicts import copies as copies_mod
from subconscious.state import files as files_mod
from subconscious.state.sessions import core as sessions_mod
from subconscious.state.clock import ZERO, Stamp, tick
from subconscious.state.files import Problem, ReadResult

from .simfs import SimFS

_real_read_json = files_mod.read_json
_CURRENT: list[SimFS] = []


def _fs() -> SimFS:
    return _CURRENT[-1]


class _BytesPath:
    """A path whose ``read_bytes`` returns what the simulated file system gave (for the real parser)."""

    def __init__(self, path: Path, data: bytes):
        self._path, self._data = Path(path), data

    def read_bytes(self) -> bytes:
        return self._data

    def __getattr__(self, name):
        return getattr(self._path, name)

    def __str__(self) -> str:
        return str(self._path)

    def __fspath__(self) -> str:
        return str(self._path)


def sim_read_json(path, *, root, host, keep=True) -> ReadResult:
    got = _fs().read(Path(path))
    if got.status == "missing":
        return ReadResult()
    if not got.ok:
        return ReadResult(problems=[Problem("unreadable", str(path), f"cannot read: {got.detail}")])
    return _real_read_json(_BytesPath(path, got.data), root=root, host=host, keep=keep)


def sim_set_aside(path, raw: bytes, kind: str, root: Path, host: str) -> Path:
    import hashlib

    fs = _fs()
    digest = hashlib.sha256(raw).hexdigest()[:12]
    target = Path(root) / "quarantine" / f"{Path(str(path)).name}.{kind}.{digest}"
    if fs.read(target).status == "missing":
        fs.write_atomic(target, raw)
    return target


def sim_atomic_write(path, data, *, durable=True, mode=0o600, unchanged_since=...):
    if isinstance(data, str):
        data = data.encode()
    _fs().write_atomic(Path(path), data, durable=durable)


def sim_ensure_dir(path):
    _fs().makedirs(Path(path))
    return Path(path)


def sim_listdir(directory):
    return _fs().listdir(Path(directory))


def sim_fold(found, home, host):
    fs = _fs()
    moved = []
    if not found:
        return moved
    target_dir = Path(home) / "backups" / "2026-12-01" / host
    fs.makedirs(target_dir)
    for item in found:
        got = fs.read(item.path)
        if not got.ok or got.data != item.raw:
            continue
        target = target_dir / item.path.name
        if fs.read(target).status != "missing":
            target = target.with_name(f"{target.name}.{fs.ops}")
        if fs.rename(item.path, target):
            moved.append(target)
    return moved


def legacy_store_class(store_module: types.ModuleType):
    """A subclass of ``store_module.Store`` whose remaining direct I/O goes through the simulated FS."""
    Base = store_module.Store

    class LegacySimStore(Base):
        def _shard_paths(self):
            names = sorted(n for n in _fs().listdir(self.home / "hosts") if n.endswith(".json"))
            from subconscious.state.copynames import is_original
            from subconscious.state.ids import is_host_id

            paths = [self.home / "hosts" / n for n in names]
            return [p for p in paths if is_host_id(p.stem) and is_original(p.name, where="hosts")]

        @staticmethod
        def _names_host(path, original):
            got = _fs().read(path)
            try:
                value = json.loads(got.data) if got.ok else None
            except ValueError:
                return False
            return isinstance(value, dict) and value.get("host") == original[: -len(".json")]

        def _next_stamp(self, seen: Stamp) -> Stamp:
            path = self._clock_path()
            got = _fs().read(path)
            try:
                previous = Stamp.decode(json.loads(got.data)["hlc"]) if got.ok else ZERO
            except (ValueError, KeyError, TypeError):
                previous = ZERO
            stamp = tick(previous, self.now(), seen)
            _fs().write_atomic(path, (json.dumps({"hlc": stamp.encode()}) + "\n").encode(), durable=False)
            return stamp

        def lock(self):
            return _fs().lock(self.locks_dir, self.host, self.lock_timeout)

        def sweep_temp(self, max_age_s: float = 600.0):
            return []

    return LegacySimStore


@contextmanager
def patched(fs: SimFS, store_module: types.ModuleType) -> Iterator[None]:
    """While inside: the store's I/O helpers are the simulated file system's."""
    targets = [
        (store_module, "atomic_write", sim_atomic_write),
        (store_module, "read_json", sim_read_json),
        (store_module, "ensure_dir", sim_ensure_dir),
        (store_module, "set_aside", sim_set_aside),
        (sessions_mod, "atomic_write", sim_atomic_write),
        (files_mod, "set_aside", sim_set_aside),
        (copies_mod, "listdir", sim_listdir),
        (copies_mod, "fold", sim_fold),
    ]
    saved = [(m, n, getattr(m, n)) for m, n, _ in targets if hasattr(m, n)]
    _CURRENT.append(fs)
    for m, n, f in targets:
        setattr(m, n, f)
    try:
        yield
    finally:
        for m, n, f in saved:
            setattr(m, n, f)
        _CURRENT.pop()


def load_store_at(commit: str) -> types.ModuleType:
    """``subconscious/state/store/core.py`` as it was at ``commit``, imported beside today's modules (its
    relative imports resolve to today's package)."""
    name = f"subconscious.state._store_{commit}"
    if name in sys.modules:
        return sys.modules[name]
    root = Path(__file__).resolve().parents[2]
    source = subprocess.run(["git", "show", f"{commit}:subconscious/state/store/core.py"], cwd=root,
                            capture_output=True, text=True, check=True).stdout
    spec = importlib.util.spec_from_loader(name, loader=None)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "subconscious.state"
    module.__file__ = f"<store.py at {commit}>"
    sys.modules[name] = module
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module
