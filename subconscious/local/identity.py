"""Machine-local state: never synced. Host identity, locks, clocks, logs, worker payloads, keys.

Lives under the per-user state dir (platformdirs) or ``SUBCONSCIOUS_STATE_DIR``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from ..state.ids import InvalidIdentifier, check_host_id


def default_state_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_state_dir("subconscious", appauthor=False))


@dataclass(frozen=True)
class Host:
    id: str  # stable id of this machine (or SUBCONSCIOUS_HOST)
    name: str  # readable name for reports


@dataclass(frozen=True)
class LocalDirs:
    root: Path

    @property
    def locks(self) -> Path:
        return self.root / "locks"

    @property
    def clocks(self) -> Path:
        return self.root / "clocks"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def payloads(self) -> Path:
        return self.root / "payloads"

    @property
    def keys(self) -> Path:
        return self.root / "keys"

    @property
    def host_file(self) -> Path:
        return self.root / "host.json"


def local_dirs(env: dict[str, str] | os._Environ = os.environ) -> LocalDirs:
    raw = env.get("SUBCONSCIOUS_STATE_DIR")
    root = Path(raw).expanduser() if raw else default_state_dir()
    return LocalDirs(root.absolute())


def host_identity(dirs: LocalDirs, env: dict[str, str] | os._Environ = os.environ) -> Host:
    """This machine's host id: ``SUBCONSCIOUS_HOST`` if set, else created once and kept."""
    override = env.get("SUBCONSCIOUS_HOST")
    if override:
        check_host_id(override)
        from ..state.copynames import is_original

        if not is_original(f"{override}.json", where="hosts"):
            raise InvalidIdentifier(f"refusing host id {override!r}: it reads as a sync engine's conflict copy")
        return Host(override, override)
    path = dirs.host_file
    for _ in range(3):
        try:
            data = json.loads(path.read_text())
            return Host(check_host_id(data["id"]), str(data.get("name") or data["id"]))
        except FileNotFoundError:
            pass
        except (ValueError, KeyError, TypeError, InvalidIdentifier) as exc:
            raise RuntimeError(f"{path} is damaged ({exc}); move it away to get a new host id") from None
        import secrets  # creating the id: once per machine, not on every hook
        import socket
        import time

        from ..state.files import atomic_write, ensure_dir

        name = socket.gethostname() or "host"
        data = {"id": "h" + secrets.token_hex(6), "name": name, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        ensure_dir(dirs.root)
        tmp = dirs.root / f".host-{os.getpid()}-{secrets.token_hex(3)}"
        atomic_write(tmp, json.dumps(data) + "\n")
        try:
            os.link(tmp, path)  # first writer wins; others read its id
        except FileExistsError:
            pass
        except OSError:  # no hard links (some file systems): fall back to an exclusive rename
            if not path.exists():
                os.replace(tmp, path)
        finally:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    raise RuntimeError(f"could not create the host id file {path}")
