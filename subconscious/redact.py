"""Redaction of obvious secrets (API keys, tokens, private keys, ``password=…``) in text that leaves this
machine: transcripts sent to Letta and the results of the agent's tools. Pure; idempotent, and it never
grows a secret back (property tests in tests/unit/test_transcript_properties.py)."""

from __future__ import annotations

import re

REDACTED = "[REDACTED]"
_SECRET_NAME = re.compile(r"pass|secret|credential", re.I)
_PLAIN_VALUES = {"true", "false", "null", "none", "yes", "no", "0", "1"}

# (pattern, group holding the secret, lower-case words one of which must occur); applied in order.
_PATTERNS: list[tuple[re.Pattern[str], int, tuple[str, ...]]] = [
    (re.compile(r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY-----.*?(?:-----END[A-Z0-9 ]{0,40}PRIVATE KEY-----|\Z)", re.S),
     0, ("private key-----",)),
    (re.compile(r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_\-]{16,}"), 0, ("sk-",)),     # Anthropic, OpenAI, Letta ... keys
    (re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])"), 0, ("akia", "asia")),  # AWS key ids
    (re.compile(r"(?<![A-Za-z0-9])gh[pousr]_[A-Za-z0-9]{20,}"), 0, ("_",)),    # GitHub tokens
    (re.compile(r"(?<![A-Za-z0-9])github_pat_[A-Za-z0-9_]{20,}"), 0, ("github_pat_",)),
    (re.compile(r"(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9\-]{10,}"), 0, ("xox",)),   # Slack
    (re.compile(r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_\-]{30,}"), 0, ("aiza",)),          # Google API keys
    (re.compile(r"(?i)\bbearer\s+([A-Za-z0-9._~+/\-]{16,}=*)"), 1, ("bearer",)),
    (re.compile(r"(?i)\bauthorization\s*[:=]\s*[\"']?(?:basic|token|digest)\s+([A-Za-z0-9._~+/\-]{8,}=*)"), 1,
     ("authorization",)),
    (re.compile(r"(?i)\b[a-z][a-z0-9+.\-]{0,20}://[^\s:/@\"'<>]{1,100}:([^\s@/\"'<>]{1,200})@"), 1, ("://",)),
    (re.compile(r"(?i)(?:pass(?:word|wd|phrase)?|secret|credentials?|api[_\-]?key|apikey|access[_\-]?key|"
                r"private[_\-]?key|token)[A-Za-z0-9_.\-]{0,40}[\"']?[ \t]*[:=][ \t]*[\"']?([^\s\"'`,;&<>]+)"), 1,
     ("pass", "secret", "credential", "key", "token")),
]
_KV = _PATTERNS[-1][0]


def _is_secret(pattern: re.Pattern[str], m: re.Match[str], group: int) -> bool:
    value = m.group(group)
    if value.startswith(REDACTED) or value == REDACTED:
        return False
    if pattern is _KV:
        if value.lower() in _PLAIN_VALUES:
            return False
        if not _SECRET_NAME.search(m.group(0)[: m.start(1) - m.start(0)]):
            # tokens and keys: long, with letters and digits (so max_tokens=4096 is left alone)
            return len(value) >= 8 and any(c.isalpha() for c in value) and any(c.isdigit() for c in value)
    return True


def find_secrets(text: str) -> list[tuple[int, int]]:
    """Spans of ``text`` that :func:`redact` would replace (first pass)."""
    spans = []
    lower = text.lower()
    for pattern, group, words in _PATTERNS:
        if not any(w in lower for w in words):
            continue
        for m in pattern.finditer(text):
            if _is_secret(pattern, m, group):
                spans.append(m.span(group))
    return sorted(spans)


def _sub(pattern: re.Pattern[str], group: int, m: re.Match[str]) -> str:
    if not _is_secret(pattern, m, group):
        return m.group(0)
    a, b = m.span(group)
    s = m.start(0)
    return m.group(0)[: a - s] + REDACTED + m.group(0)[b - s:]


def _pass(text: str) -> str:
    lower = text.lower()
    for pattern, group, words in _PATTERNS:
        if any(w in lower for w in words):
            new = pattern.sub(lambda m, p=pattern, g=group: _sub(p, g, m), text)
            if new != text:
                text, lower = new, new.lower()
    return text


def redact(text: str) -> str:
    """Replace obvious secrets (API keys, tokens, AWS keys, private key blocks, ``password=``
    values, URL passwords) with ``[REDACTED]``. Idempotent; the result has no
    :func:`find_secrets` span."""
    for _ in range(16):
        new = _pass(text)
        if new == text:
            return text
        text = new
    return text
