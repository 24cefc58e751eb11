"""What several verbs share (kept light: imported by verbs only, its own imports deferred)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..local.runtime import Runtime

# the verb's last error as fail() said it: what cli.main prints as {"error", "kind"} under --json
last_error: dict | None = None


def fail(verb: str | None, message: object, kind: str, code: int) -> int:
    """Say what went wrong on stderr, one line (``subconscious VERB: message``, control characters removed and
    line breaks made spaces: the message may hold the server's or a file's text), keep it for ``--json``, and
    return ``code``.
    ``kind``: config (exit 2: a setting or identifier), usage (2), server (1: Letta failed), not_found (1)."""
    global last_error
    from ..base.termtext import clean

    text = " ".join(clean(str(message)).split("\n")).strip()  # one line, whatever the message quotes
    last_error = {"error": text, "kind": kind, "exit": code}
    print(f"subconscious{' ' + verb if verb else ''}: {text}", file=sys.stderr)
    return code


def load_runtime() -> Runtime | None:
    """This machine's runtime (settings, local dirs, host), or None after saying why not on stderr (a bad
    configuration or identifier: the verb exits 2)."""
    from ..config import ConfigError
    from ..local.runtime import runtime
    from ..state.ids import InvalidIdentifier

    try:
        return runtime()
    except (ConfigError, InvalidIdentifier) as exc:
        fail(None, exc, "config", 2)
        return None
