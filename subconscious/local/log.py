"""The per-user log (machine-local), with secrets redacted before anything is written.

Hooks never print tracebacks into Claude Code; they log here and exit 0.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

_PATTERNS = [
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"\bsk-[A-Za-z0-9_-]{8,}"),
    re.compile(r"(?i)((?:api[_-]?key|token|password|secret)[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]{4,}"),
]


def redact(text: str, secrets: tuple[str, ...] = ()) -> str:
    """Remove known secret values, ``<private>`` text (:mod:`subconscious.privacy.private`), then whatever
    :mod:`subconscious.privacy.redact` finds (the same rules as transcripts and tool results), from ``text``."""
    for s in secrets:
        if s and len(s) >= 4:
            text = text.replace(s, "[redacted]")
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + "[redacted]", text)
    from ..privacy.private import hide_private  # imported when a record is written, not with the log
    from ..privacy.redact import redact as redact_secrets

    return redact_secrets(hide_private(text))


class _RedactingFormatter(logging.Formatter):
    def __init__(self, secrets: tuple[str, ...]):
        super().__init__("%(asctime)s %(levelname)s [%(process)d %(name)s] %(message)s")
        self.secrets = secrets

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        try:
            return redact(text, self.secrets)
        except ImportError:  # a hook's deadline (SIGALRM) landed inside the first record's import of the rules
            if getattr(record, "fixed_text", False):  # a constant message (the deadline's): nothing to redact
                return text
            return f"{self.formatTime(record)} {record.levelname} [{record.process} {record.name}] (a line withheld: " \
                   "the redaction rules were still being imported)"


_configured: set[Path] = set()


def setup(log_dir: Path, *, debug: bool = False, name: str = "subconscious") -> logging.Logger:
    """Log to ``log_dir/subconscious.log`` (0600, in a 0700 dir)."""
    logger = logging.getLogger("subconscious")
    path = log_dir / f"{name}.log"
    if path in _configured and any(getattr(h, "baseFilename", None) == os.path.abspath(path) for h in logger.handlers):
        return logger  # already logging there (a handler removed since, e.g. by a test, is added again)
    from ..state.files import ensure_dir

    ensure_dir(log_dir)  # every directory it creates is 0700, parents included
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.close(fd)
    handler = logging.FileHandler(path, encoding="utf-8")
    secrets = tuple(v for k, v in os.environ.items() if k in ("LETTA_API_KEY",) and v)
    handler.setFormatter(_RedactingFormatter(secrets))
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if debug else logging.INFO)
    logger.propagate = False
    _configured.add(path)
    return logger
