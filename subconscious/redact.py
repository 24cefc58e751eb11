"""Redaction of secrets in text that leaves this machine: transcripts sent to Letta, the results of the
agent's tools, the log. Pure; idempotent, and it never grows a secret back (property tests in
tests/unit/test_transcript_properties.py; recall per format and false positives measured on a corpus by
benchmarks/redaction_bench.py and tests/unit/test_redact_corpus.py).

It works on content, not on names alone, because a tool result can start anywhere in a file (Read with an
offset, a Grep hit on one line of a key):

- private keys: PEM, OpenSSH and PGP private blocks from their BEGIN line (to END, or to the end of the
  text); key bodies without their header: any base64 run of 40+ characters with upper case, lower case and
  digits and a high character entropy, and the short last line of such a body;
- token formats by their shape: Anthropic/OpenAI/Letta ``sk-``, AWS key ids, GCP (``AIza``, ``ya29.``,
  ``GOCSPX-``), Azure (client secrets ``…Q~…``, SAS ``sig=``), GitHub, GitLab, Slack (tokens, webhooks),
  Discord (bot tokens, webhooks), Telegram bot tokens, Stripe ``sk_``/``rk_``/``whsec_``, SendGrid, Mailgun,
  Hugging Face, Shopify, DigitalOcean, npm, PyPI, age secret keys, JWTs, bearer and basic credentials;
- connection strings with a password (``scheme://user:pass@``, ``Password=…;``);
- values next to secret-ish names (``password``, ``secret``, ``token``, ``api_key``, ``AccountKey``, …):
  always for password/secret names and for ``.env``-style ``UPPER_NAME=value``, else when the value looks
  like a key (letters and digits, or high entropy).

Speed matters (every transcript line): each rule is skipped unless one of its literal words occurs in the
text, and the only rule without a word (long base64 runs) is a single linear scan.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Callable

REDACTED = "[REDACTED]"
_SECRET_NAME = re.compile(r"pass|secret|credential|pwd", re.I)
_PLAIN_VALUES = {"true", "false", "null", "none", "yes", "no", "0", "1"}
_ENV_REF = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|%[A-Za-z_][A-Za-z0-9_]*%")
_HEX = re.compile(r"[0-9a-fA-F]+")

Spans = Callable[[re.Match], list]  # the spans of a match to replace ([] = not a secret)


def entropy(s: str) -> float:
    """Shannon entropy of ``s`` in bits per character."""
    n = len(s)
    return -sum(k / n * math.log2(k / n) for k in Counter(s).values())


def looks_random(s: str, min_len: int = 40) -> bool:
    """Key material rather than words: long, upper and lower case and digits, not hex, high entropy
    (random base64 of 40 chars scores about 4.8 bits per char; identifiers and prose stay under 4.3)."""
    core = s.rstrip("=")
    if len(core) < min_len or _HEX.fullmatch(core):
        return False
    if core.isalpha() or core.isdigit() or core.lower() == core or core.upper() == core:
        return False  # needs upper case, lower case and digits
    if not any(c.isdigit() for c in core):
        return False
    # random text of n symbols from 64 has entropy close to log2(min(n, 64)); words fall far below it
    need = 4.3 if len(core) < 64 else 4.6
    return entropy(core) >= need


def _group(g: int) -> Spans:
    def spans(m: re.Match) -> list:
        v = m.group(g)
        if not v or v.startswith(REDACTED):
            return []
        return [m.span(g)]
    return spans


# Values after a secret-ish name that are code or prose, not secrets: `password = args.password`,
# `secret: bytes`, `key = derive_key(...)`, `PASSPHRASE_ENV = "SUBCONSCIOUS_PASSPHRASE"`, "the passphrase: the".
_CODE_VALUE = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\(.*|[a-z_]+(?:\.[a-z_][a-z0-9_]*)+|[A-Z]+(?:_[A-Z]+)+|"
                         r"(?:str|bytes|bool|int|float|tuple|list|dict|set|frozenset|Optional|Any|None|object)"
                         r"(?:[\[|\])].*)?|\d{1,3}|[^A-Za-z0-9]+")
_WORDS = frozenset("the a an it is to of and or in on for with you your we this that not be are as at by from if so "
                   "then there use see set here below above secret secrets password passwords passphrase token "
                   "tokens credentials key keys".split())
_STRING_PREFIX = frozenset({"b", "r", "f", "u", "rb", "br", "fr", "rf"})


def _code_or_prose_value(value: str) -> bool:
    return value.lower() in _WORDS or _CODE_VALUE.fullmatch(value) is not None


def _code_or_prose(m: re.Match, value: str) -> bool:
    if _code_or_prose_value(value):
        return True
    end = m.end("v")
    after = m.string[end:end + 1]
    if value.lower() not in _STRING_PREFIX or after not in ("'", '"'):
        return False
    line_end = m.string.find("\n", end + 1)
    rest = m.string[end + 1:line_end if line_end != -1 else len(m.string)]
    return after in rest  # b"" opens a string that closes on its line; a one-letter value before a quote does not


def _key_value(m: re.Match) -> list:
    value = m.group("v")
    if not value or value.startswith(REDACTED) or value.lower() in _PLAIN_VALUES:
        return []
    name = m.group("n")
    if _code_or_prose(m, value):
        return []
    if _SECRET_NAME.search(name):
        if value[0] in "/~" and "pwd" in name.lower() and not re.search(r"pass|secret|credential", name, re.I):
            return []  # PWD=/home/me in an `env` dump is a directory
        return [m.span("v")]
    if _ENV_REF.fullmatch(value.rstrip(":.,)")):
        return []  # a reference to an environment variable, not a value
    sep = m.group(0)[len(name):m.start("v") - m.start(0)]
    if name == name.upper() and not sep[:1].isspace() and len(value) >= 4:
        return [m.span("v")]  # .env, shell, YAML: an UPPER_NAME with any value
    if sep.endswith(("'", '"')) and len(value) >= 8:
        return [m.span("v")]  # a string literal after a token-ish name
    if len(value) >= 8 and any(c.isalpha() for c in value) and any(c.isdigit() for c in value):
        return [m.span("v")]  # tokens and keys (so max_tokens=4096 is left alone)
    if len(value) >= 20 and entropy(value) >= 3.8 and not re.fullmatch(r"[A-Za-z_.]+\(?", value):
        return [m.span("v")]
    return []


def _random_run(m: re.Match) -> list:
    if not looks_random(m.group("run")):
        return []
    out = [m.span("run")]
    if m.group("tail"):
        out.append(m.span("tail"))
    return out


_B64 = r"A-Za-z0-9+/"
_TOKEN_CHARS = r"A-Za-z0-9+/_\-"
# a line prefix as tools and editors show it: Read's "   12\t", Grep's "path:12:" / "path-12-", quotes, spaces
_PREFIX = r"(?:[ \t]*\d+\t|[^\s:]{1,200}[:\-]\d+[:\-])?[ \t\"']*"

# a private key block from its BEGIN line to its END line, or to the end of the text
_PEM = re.compile(r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----.*?"
                  r"(?:-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|\Z)", re.S)
_DISCORD = re.compile(r"[MNO][A-Za-z0-9_\-]{23,27}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,40}(?![A-Za-z0-9_\-])")
# a key body with no header in sight (a Read from an offset, a Grep hit), and its short last line (+ PGP checksum)
_RUN = re.compile(rf"(?P<run>[{_TOKEN_CHARS}]{{40,}}={{0,2}})(?![{_TOKEN_CHARS}=])"
                  rf"(?:[ \t\"']*\r?\n{_PREFIX}(?P<tail>[{_B64}]{{1,39}}={{0,2}}(?:[ \t]*\r?\n{_PREFIX}=[{_B64}]{{4}})?"
                  rf"|=[{_B64}]{{4}})[ \t\"']*(?=\r?\n|\Z))?")

# Rules found within the lines that hold one of their lower-case words (and the line after):
# (pattern, spans of a match to replace, words).
_RULES: list[tuple[re.Pattern[str], Spans, tuple[str, ...]]] = [
    (re.compile(r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_\-]{16,}"), _group(0), ("sk-",)),  # Anthropic, OpenAI, Letta
    (re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA|AROA|AIDA|ANPA|AGPA|APKA)[0-9A-Z]{16}(?![A-Za-z0-9])"),
     _group(0), ("akia", "asia", "abia", "acca", "aroa", "aida", "anpa", "agpa", "apka")),
    (re.compile(r"(?<![A-Za-z0-9])gh[pousr]_[A-Za-z0-9]{20,}"), _group(0), ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    (re.compile(r"(?<![A-Za-z0-9])github_pat_[A-Za-z0-9_]{20,}"), _group(0), ("github_pat_",)),
    (re.compile(r"(?<![A-Za-z0-9])(?:glpat|gldt|glrt|glptt|glcbt|glsoat|glft|glimt|glagent|gloas)-[A-Za-z0-9_\-]{20,}"
                r"|(?<![A-Za-z0-9])GR1348941[A-Za-z0-9_\-]{20,}"), _group(0), ("glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "glsoat-", "glft-", "glimt-", "glagent-", "gloas-",
                  "gr1348941")),
    (re.compile(r"(?<![A-Za-z0-9])xox[abposre]-[A-Za-z0-9\-]{10,}|(?<![A-Za-z0-9])xapp-\d-[A-Za-z0-9\-]{10,}"),
     _group(0), ("xox", "xapp-")),
    (re.compile(r"hooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9/_\-]{8,})"), _group(1),
     ("hooks.slack.com",)),
    (re.compile(r"discord(?:app)?\.com/api/webhooks/\d+/([A-Za-z0-9_\-]{20,})"), _group(1), ("/api/webhooks/",)),
    (re.compile(r"(?<![A-Za-z0-9])(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}|(?<![A-Za-z0-9])whsec_[A-Za-z0-9]{16,}"),
     _group(0), ("sk_live_", "sk_test_", "rk_live_", "rk_test_", "whsec_")),  # Stripe
    (re.compile(r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_\-]{30,}"), _group(0), ("aiza",)),  # Google API keys
    (re.compile(r"(?<![A-Za-z0-9])(?:ya29\.[0-9A-Za-z_\-]{20,}|GOCSPX-[0-9A-Za-z_\-]{20,})"), _group(0),
     ("ya29.", "gocspx-")),  # Google OAuth access tokens, client secrets
    (re.compile(r"(?<![A-Za-z0-9_~.\-])[A-Za-z0-9_~.\-]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}(?![A-Za-z0-9_~.\-])"),
     _group(0), ("q~",)),  # Azure AD client secrets
    (re.compile(r"[?&]sig=([A-Za-z0-9%+/=]{16,})"), _group(1), ("sig=",)),  # Azure SAS signatures
    (re.compile(r"(?<![A-Za-z0-9])(?:npm_[A-Za-z0-9]{30,}|pypi-[A-Za-z0-9_\-]{40,})"), _group(0), ("npm_", "pypi-")),
    (re.compile(r"(?<![A-Za-z0-9])\d{8,10}:AA[A-Za-z0-9_\-]{32,34}(?![A-Za-z0-9_\-])"), _group(0), (":aa",)),  # Telegram bots
    (re.compile(r"(?<![A-Za-z0-9])SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}(?![A-Za-z0-9_\-])"), _group(0),
     ("sg.",)),  # SendGrid
    (re.compile(r"(?<![A-Za-z0-9])(?:hf_[A-Za-z0-9]{34,}|shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}|do[opr]_v1_[a-f0-9]{64}"
                r"|key-[0-9a-f]{32}(?![0-9A-Za-z]))"), _group(0),
     ("hf_", "shpat_", "shpss_", "shpca_", "shppa_", "dop_v1_", "doo_v1_", "dor_v1_", "key-")),  # Hugging Face,
    # Shopify, DigitalOcean, Mailgun
    (re.compile(r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{50,}"), _group(0), ("age-secret-key-1",)),  # age
    (re.compile(r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]{6,}\.eyJ[A-Za-z0-9_\-]{6,}\.[A-Za-z0-9_\-]*"), _group(0),
     ("eyj",)),  # JWTs: base64url('{"') . base64url('{"') . signature
    (re.compile(r"(?i)\bbearer\s+([A-Za-z0-9._~+/\-]{16,}=*)"), _group(1), ("bearer",)),
    (re.compile(r"(?i)\bauthorization\s*[:=]\s*[\"']?(?:basic|token|digest)\s+([A-Za-z0-9._~+/\-]{8,}=*)"),
     _group(1), ("authorization",)),
    (re.compile(r"(?i)\b[a-z][a-z0-9+.\-]{0,20}://[^\s:/@\"'<>]{0,100}:([^\s@/\"'<>]{1,200})@"), _group(1), ("://",)),
    (re.compile(r"(?i)(?P<n>(?:pass(?:word|wd|phrase|(?![a-z]))|pwd|secret|credentials?|api[_\-]?key|apikey|access[_\-]?key|"
                r"private[_\-]?key|account[_\-]?key|shared[_\-]?access[_\-]?key|(?:auth|signing|encryption|master)"
                r"[_\-]?key|token)[A-Za-z0-9_.\-]{0,40})[\"']?(?::|[ \t]*=)[ \t]*[\"']?(?P<v>[^\s\"'`,;&<>]+)"),
     _key_value, ("pass", "secret", "credential", "key", "token", "pwd")),
]

_ALL_WORDS = tuple(sorted({"private key"} | {w for _p, _s, words in _RULES for w in words}))
_ANY_WORD = re.compile("|".join(re.escape(w) for w in _ALL_WORDS))  # one scan decides most lines
_TOKEN_SET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-")
_TO_RUNS = bytes(0x61 if chr(i) in _TOKEN_SET else 0x20 for i in range(256))  # token char -> "a", else " "
_A24, _A40 = b"a" * 24, b"a" * 40


def _runs(text: str, found: list) -> None:
    """Long runs of token characters: key bodies (40+) and Discord bot tokens (24+ then ``.``). Found with
    byte-level ``find`` on a translated copy (same indices: one byte per character), so ordinary text,
    whose words are short, costs almost nothing."""
    b = text.encode("ascii", "replace").translate(_TO_RUNS)
    i = b.find(_A24)
    while i != -1:
        end = b.find(b" ", i)
        end = len(b) if end == -1 else end
        if end - i >= 40:
            m = _RUN.match(text, i)
            if m:
                found.extend(_random_run(m))
        elif end < len(text) and text[end] == ".":
            m = _DISCORD.match(text, i)
            if m:
                found.append(m.span())
                end = m.end()
        i = b.find(_A24, end)


def _windows(text: str, lower: str, words: tuple[str, ...]) -> list[tuple[int, int]]:
    """(start, end) of each line holding one of ``words``, with the line after it; merged."""
    n = len(text)
    spans = []
    for w in words:
        i = lower.find(w)
        while i != -1:
            a = text.rfind("\n", 0, i) + 1
            b = text.find("\n", i + len(w))
            b = n if b == -1 else text.find("\n", b + 1)
            b = n if b == -1 else b
            spans.append((a, b))
            i = lower.find(w, b)
    if not spans:
        return []
    spans.sort()
    merged = [spans[0]]
    for a, b in spans[1:]:
        if a <= merged[-1][1]:
            if b > merged[-1][1]:
                merged[-1] = (merged[-1][0], b)
        else:
            merged.append((a, b))
    return merged


def find_secrets(text: str) -> list[tuple[int, int]]:
    """Spans of ``text`` that :func:`redact` replaces (first pass), sorted; they may overlap."""
    found: list = []
    lower = text.lower()
    present = {w for w in _ALL_WORDS if w in lower} if _ANY_WORD.search(lower) else ()
    if present:
        n = len(text)
        whole = n <= 2048 or len(lower) != n  # short (a transcript line), or lower() changed lengths
        if "private key" in present:
            found.extend(m.span() for m in _PEM.finditer(text))
        for pattern, spans, words in _RULES:
            if present.isdisjoint(words):
                continue
            for a, b in [(0, n)] if whole else _windows(text, lower, [w for w in words if w in present]):
                for m in pattern.finditer(text, a, b):
                    found.extend(spans(m))
    if len(text) >= 24:
        _runs(text, found)
    return sorted(found)


def _apply(text: str, spans: list) -> str:
    """``text`` with each span (sorted by start) replaced; overlapping spans become one ``[REDACTED]``."""
    out, at = [], 0
    for a, b in spans:
        if a < at:
            at = max(at, b)
            continue
        out.append(text[at:a])
        out.append(REDACTED)
        at = b
    out.append(text[at:])
    return "".join(out)


def redact(text: str) -> str:
    """Replace secrets (see the module docstring) with ``[REDACTED]``. Idempotent; the result has no
    :func:`find_secrets` span."""
    for _ in range(16):
        spans = find_secrets(text)
        if not spans:
            return text
        text = _apply(text, spans)
    return text
