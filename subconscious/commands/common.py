"""What several verbs share (kept light: imported by verbs only, its own imports deferred)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..runtime import Runtime


def load_runtime() -> Runtime | None:
    """This machine's runtime (settings, local dirs, host), or None after saying why not on stderr (a bad
    configuration or identifier: the verb exits 2)."""
    from ..config import ConfigError
    from ..runtime import runtime
    from ..state.ids import InvalidIdentifier

    try:
        return runtime()
    except (ConfigError, InvalidIdentifier) as exc:
        print(f"subconscious: {exc}", file=sys.stderr)
        return None
