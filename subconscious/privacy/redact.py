"""Redaction of secrets in text that leaves this machine: transcripts sent to Letta, the results of the
agent's tools, the log. Pure; idempotent, and it never grows a secret back (property tests in
tests/unit/test_transcript_properties.py; recall per format and false positives measured on a corpus by
benchmarks/redaction_bench.py and tests/unit/test_redact_corpus.py).

It works on content, not on names alone, because a tool result can start anywhere in a file (Read with an
offset, a Grep hit on one line of a key):

- private keys: PEM (RSA, EC, DSA, PKCS#8, encrypted), OpenSSH and PGP private blocks from their BEGIN line
  through the lines a key is made of (in a file, as Read or Grep show it, or in a string literal with ``\n``
  escapes); key bodies without their header: any base64 run of 40+ characters with upper case, lower case and
  digits and a high character entropy, and the short last line of such a body;
- token formats by their shape: Anthropic/OpenAI/Letta ``sk-``, AWS key ids, GCP (``AIza``, ``ya29.``,
  ``GOCSPX-``), Azure (client secrets ``…Q~…``, SAS ``sig=``), GitHub, GitLab, Slack (tokens, webhooks),
  Discord (bot tokens, webhooks), Telegram bot tokens, Stripe ``sk_``/``rk_``/``whsec_``, SendGrid, Mailgun,
  Mailchimp, Hugging Face, Shopify, DigitalOcean, npm, PyPI, Docker Hub, Heroku, Atlassian, Vault ``hvs.``,
  Terraform Cloud, Databricks, Linear, Notion, Postman, Grafana, New Relic, Sentry, Pulumi, Doppler, Square,
  PlanetScale, Supabase, Twilio SIDs (and a 32-hex auth token near one), age secret keys, JWTs;
- credentials in their usual places: ``Authorization: Basic/Bearer …`` (headers, dicts, JSON), cookies,
  ``scheme://user:pass@host`` (the password may hold ``/`` and ``@``: it ends at the last ``@`` before a host),
  ``Password=…;``, ``curl -u``, ``mysql -p``, ``sshpass -p``, ``docker login -p``, ``--password``/``--token``
  flags, ``echo … | … --password-stdin``, docker ``config.json`` ``"auth"``, Kubernetes Secret ``data`` and
  ``stringData``, netrc ``password``, htpasswd/shadow/bcrypt hashes, XML elements and attributes, Ethereum keys
  (``0x`` + 64 hex on a line that speaks of a key or wallet);
- values next to secret-ish names (``password``, ``pw``, ``secret``, ``token``, ``api_key``, ``AccountKey``,
  …) in .env, YAML, TOML, INI, Java properties, JSON and code: always for password/secret names and for
  ``.env``-style ``UPPER_NAME=value``, else when the value looks like a key (letters and digits, or high
  entropy); placeholders (``TOKEN``, ``${PASS}``, ``sk-...``), code (``password = args.password``) and names
  about a secret (``TOKEN_HEADER``) are left;
- a key split across string literals (``"sk-ant-" "api03-…"``, ``'AKIA' + '…'``): the joined literals are
  searched, and a secret found across two or more of them is removed from each.

Speed matters (every transcript line): each rule is skipped unless one of its literal words occurs in the text
(in a long text, only the lines holding one are searched), the formats without a word are looked for only in
runs of 24+ token characters (one byte-level scan), and every pattern is linear (adversarial inputs:
tests/unit/test_redact_adversarial.py, timed by the benchmark).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Callable

class _Lazy:
    """A pattern compiled when first used: most rules never run in a hook's short text, and compiling them
    all would cost a hook that redacts one log line tens of milliseconds."""

    __slots__ = ("source", "flags", "_compiled")

    def __init__(self, source: str, flags: int = 0):
        self.source, self.flags, self._compiled = source, flags, None

    @property
    def compiled(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self.source, self.flags)
        return self._compiled

    def finditer(self, *args):
        return self.compiled.finditer(*args)

    def search(self, *args):
        return self.compiled.search(*args)


_lazy = _Lazy


REDACTED = "[REDACTED]"
_SECRET_NAME = re.compile(r"pass|secret|credential|pwd|(?<![a-z])pw(?![a-z])", re.I)
_PLAIN_VALUES = {"true", "false", "null", "none", "yes", "no", "0", "1"}
_ENV_REF = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|%[A-Za-z_][A-Za-z0-9_]*%")
_HEX = re.compile(r"[0-9a-fA-F]+")
# six letters or digits in a row (abcdef, OPQRST, 012345): 1 in 10^9 per place in random base64
_ALPHABET = _Lazy("|".join(a[i:i + 6] for a in ("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz",
                                                      "0123456789") for i in range(len(a) - 5)))

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
    if _ALPHABET.search(core):
        return False  # "ABCDEFGH…abcdefgh…0123456789": an alphabet in code, not key material
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
                   "tokens credentials key keys both all any each every none some".split())
_STRING_PREFIX = frozenset({"b", "r", "f", "u", "rb", "br", "fr", "rf"})


def _code_or_prose_value(value: str) -> bool:
    bare = value.rstrip(")]}")  # the end of a call or a dict: f(KEY=PASSPHRASE), {"token": self.token}
    return (value.lower() in _WORDS or _CODE_VALUE.fullmatch(value) is not None
            or value.startswith(("$(", "[", "(", "{", "="))
            or _placeholder(value)
            or bare != value and (bare.lower() in _PLACEHOLDERS or _ATTRIBUTE.fullmatch(bare) is not None))


_ATTRIBUTE = re.compile(r"[a-z_]+(?:\.[a-z_][a-z0-9_]*)+")


# names of things about a secret, not of a secret: TOKEN_HEADER = "X-Token", PASSWORD_FILE=/run/secrets/db
_META_NAME = _Lazy(r"(?i)[_\-.](?:header|var|env|name|placeholder|file|path|dir|field|prefix|len|length|type|url|uri"
                        r"|endpoint|cmd|command|hint|label|format|mode|policy|count|ttl|bytes|chars)s?$")
# "(a secret: anyone with it …)", "Not secret: stored …": a name after an article or a negation, in a sentence
_PROSE_BEFORE = re.compile(r"(?i)(?:^|[\s(\"'])(?:a|an|the|not|no|is|like|your|its|this|our|my)\s+$")


def _code_or_prose(m: re.Match, value: str) -> bool:
    if _code_or_prose_value(value) or value.endswith(("...", "\u2026")) or _META_NAME.search(m.group("n")):
        return True
    if m.string[m.start("n") - 1:m.start("n")] == "/":
        return True  # a path: "/etc/passwd": …
    if value.isalpha() and value.islower():
        start = m.start("n")
        line = m.string[m.string.rfind("\n", 0, start) + 1:start]
        if _PROSE_BEFORE.search(line):
            return True
    end = m.end("v")
    after = m.string[end:end + 1]
    if value.lower() not in _STRING_PREFIX or after not in ("'", '"'):
        return False
    line_end = m.string.find("\n", end + 1)
    rest = m.string[end + 1:line_end if line_end != -1 else len(m.string)]
    return after in rest  # b"" opens a string that closes on its line; a one-letter value before a quote does not


def _to_closing_quote(m: re.Match, span: tuple[int, int]) -> list:
    """A quoted value is secret up to its closing quote on the line (``'correct horse battery staple'``);
    an escaped one (``\\"hunter2\\"`` in JSON inside JSON) up to the escaped quote."""
    s, (a, b) = m.string, span
    q = s[a - 1:a]
    if q not in ("'", '"'):
        return [span]
    close = ("\\" + q) if s[a - 2:a - 1] == "\\" else q
    line_end = s.find("\n", b)
    j = s.find(close, b, line_end if line_end != -1 else len(s))
    return [(a, j)] if j != -1 and j - a <= 300 else [span]


def _key_value(m: re.Match) -> list:
    return [_to_closing_quote(m, sp)[0] for sp in _key_value_spans(m)]


def _key_value_spans(m: re.Match) -> list:
    value = m.group("v")
    if not value or value.startswith(REDACTED) or value.lower() in _PLAIN_VALUES:
        return []
    name = m.group("n")
    if _code_or_prose(m, value):
        return []
    if _SECRET_NAME.search(name):
        if (value[0] == "/" or value[:2] == "~/" or value == "~") and "pw" in name.lower() \
                and not re.search(r"pass|secret|credential", name, re.I):
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


_PLACEHOLDERS = frozenset("token password pass passwd passphrase pw pwd secret key apikey api_key user username pat "
                          "xxx xxxx xxxxx *** ****".split())


def _placeholder(value: str) -> bool:
    """A value documentation writes in place of a secret: TOKEN, <password>, ${PASS}, $PASS, ***, …"""
    v = value.strip("<>[]{}")
    return (value.lower() in _PLACEHOLDERS or v.lower() in _PLACEHOLDERS or _ENV_REF.fullmatch(value) is not None
            or value.startswith(("$", "%", "<", "{{")) or set(value) <= set("*x.X…"))


def _placeholder_or(g: int) -> Spans:
    def spans(m: re.Match) -> list:
        v = m.group(g)
        if not v or v.startswith(REDACTED) or _placeholder(v):
            return []
        return [m.span(g)]
    return spans


def _user_pass(m: re.Match) -> list:
    """curl -u user:password (and -u token: with the token as the user name)"""
    user, password = m.group(2), m.group(3)
    if password:
        if user.isdigit() and password.isdigit() or _placeholder(password) or password.startswith(REDACTED):
            return []  # -u 1000:1000 is a uid:gid
        return [m.span(3)]
    return [] if _placeholder(user) or user.startswith(REDACTED) else [m.span(2)]


def _flag_value(m: re.Match) -> list:
    v = m.group(2)
    if not v or v.startswith((REDACTED, "-")) or _placeholder(v) or v.lower() in _PLAIN_VALUES or _code_or_prose_value(v) \
            or not any(c.isalnum() for c in v):
        return []
    return [m.span(2)]


_ETH_CONTEXT = re.compile(r"(?i)priv|secret|key|wallet|signer|mnemonic|account|from_key|deployer|sign")


def _line_of(m: re.Match) -> str:
    s = m.string
    a = s.rfind("\n", 0, m.start()) + 1
    b = s.find("\n", m.end())
    return s[a:b if b != -1 else len(s)]


def _eth_key(m: re.Match) -> list:
    """0x + 64 hex is a transaction or block hash as often as a key: only on a line that speaks of a key."""
    return [m.span(1)] if _ETH_CONTEXT.search(_line_of(m)) else []


_HEX32 = re.compile(r"(?<![0-9A-Za-z])[0-9a-f]{32}(?![0-9A-Za-z])")


def _twilio(m: re.Match) -> list:
    """A Twilio SID, and any 32-hex value (the auth token) on its line and the next three."""
    out = [m.span()] if m.group(0)[:2] in ("AC", "SK") else []
    s = m.string
    a = s.rfind("\n", 0, m.start()) + 1
    b = m.end()
    for _ in range(4):
        b = s.find("\n", b + 1)
        if b == -1:
            b = len(s)
            break
    out.extend(h.span() for h in _HEX32.finditer(s, a, b))
    return out


def _hash_tail(m: re.Match) -> list:
    return [] if m.group(0).startswith(REDACTED) else [m.span()]


def _tag_value(m: re.Match) -> list:
    v = m.group("v").strip()
    if not v or v.startswith(REDACTED) or _code_or_prose_value(v) or v.lower() in _PLAIN_VALUES:
        return []
    return [m.span("v")]


_COOKIE_PAIR = re.compile(r"([A-Za-z0-9_.$!#%&*+^`|~\-]{1,100})=([^;,\s]{6,})")
_COOKIE_ATTRS = frozenset("path domain expires max-age samesite priority version comment".split())


def _cookie_values(m: re.Match) -> list:
    out = []
    for p in _COOKIE_PAIR.finditer(m.string, m.start(1), m.end(1)):
        if p.group(1).lower() not in _COOKIE_ATTRS and REDACTED not in p.group(2):
            out.append(p.span(2))
    return out


_B64 = r"A-Za-z0-9+/"
_TOKEN_CHARS = r"A-Za-z0-9+/_\-"
# a line prefix as tools and editors show it: Read's "   12\t", Grep's "path:12:" / "path-12-", quotes, spaces
_PREFIX = r"(?:[ \t]*\d+\t|[^\s:]{1,200}[:\-]\d+[:\-])?[ \t\"']*"

# a private key block from its BEGIN line through the lines that can be part of one (base64, armour headers such
# as "Proc-Type: 4,ENCRYPTED", blank lines), as a file, as Read or Grep show it or inside a string literal with
# "\n" escapes, and its END line; what follows a key cut short (code, prose) is left to the other rules
_PEM_SEP = rf"(?:\r?\n{_PREFIX}|(?:\\r)?\\n)"
_PEM = re.compile(rf"-----BEGIN[A-Z0-9 ]{{0,40}}PRIVATE KEY(?: BLOCK)?-----"
                  rf"(?:{_PEM_SEP}(?:[A-Za-z][A-Za-z0-9\-]{{0,30}}:[ \t][^\n\\\"]{{0,200}}|[{_B64}=]+)?[ \t\"',+]*(?=\r?\n|\\[rn]|-----END|\Z))*"
                  rf"(?:{_PEM_SEP}?-----END[A-Z0-9 ]{{0,40}}PRIVATE KEY(?: BLOCK)?-----)?")
_DISCORD = re.compile(r"[MNO][A-Za-z0-9_\-]{23,27}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,40}(?![A-Za-z0-9_\-])")
# a key body with no header in sight (a Read from an offset, a Grep hit), and its short last line (+ PGP checksum)
_RUN = re.compile(rf"(?P<run>[{_TOKEN_CHARS}]{{40,}}={{0,2}})(?![{_TOKEN_CHARS}=])"
                  rf"(?:[ \t\"']*\r?\n{_PREFIX}(?P<tail>[{_B64}]{{1,39}}={{0,2}}(?:[ \t]*\r?\n{_PREFIX}=[{_B64}]{{4}})?"
                  rf"|=[{_B64}]{{4}})[ \t\"']*(?=\r?\n|\Z))?")

# Rules found within the lines that hold one of their lower-case words (and the line after):
# (pattern, spans of a match to replace, words).

_RULES: list[tuple[_Lazy, Spans, tuple[str, ...]]] = [
    (_lazy(r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_\-]{16,}"), _group(0), ("sk-",)),  # Anthropic, OpenAI, Letta
    (_lazy(r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA|AROA|AIDA|ANPA|AGPA|APKA)[0-9A-Z]{16}(?![A-Za-z0-9])"),
     _group(0), ("akia", "asia", "abia", "acca", "aroa", "aida", "anpa", "agpa", "apka")),
    (_lazy(r"(?<![A-Za-z0-9])gh[pousr]_[A-Za-z0-9]{20,}"), _group(0), ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    (_lazy(r"(?<![A-Za-z0-9])github_pat_[A-Za-z0-9_]{20,}"), _group(0), ("github_pat_",)),
    (_lazy(r"(?<![A-Za-z0-9])(?:glpat|gldt|glrt|glptt|glcbt|glsoat|glft|glimt|glagent|gloas)-[A-Za-z0-9_\-]{20,}"
                r"|(?<![A-Za-z0-9])GR1348941[A-Za-z0-9_\-]{20,}"), _group(0), ("glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "glsoat-", "glft-", "glimt-", "glagent-", "gloas-",
                  "gr1348941")),
    (_lazy(r"(?<![A-Za-z0-9])xox[abposre]-[A-Za-z0-9\-]{10,}|(?<![A-Za-z0-9])xapp-\d-[A-Za-z0-9\-]{10,}"),
     _group(0), ("xox", "xapp-")),
    (_lazy(r"hooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9/_\-]{8,})"), _group(1),
     ("hooks.slack.com",)),
    (_lazy(r"discord(?:app)?\.com/api/webhooks/\d+/([A-Za-z0-9_\-]{20,})"), _group(1), ("/api/webhooks/",)),
    (_lazy(r"(?<![A-Za-z0-9])(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}|(?<![A-Za-z0-9])whsec_[A-Za-z0-9]{16,}"),
     _group(0), ("sk_live_", "sk_test_", "rk_live_", "rk_test_", "whsec_")),  # Stripe
    (_lazy(r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_\-]{30,}"), _group(0), ("aiza",)),  # Google API keys
    (_lazy(r"(?<![A-Za-z0-9])(?:ya29\.[0-9A-Za-z_\-]{20,}|GOCSPX-[0-9A-Za-z_\-]{20,})"), _group(0),
     ("ya29.", "gocspx-")),  # Google OAuth access tokens, client secrets
    (_lazy(r"(?<![A-Za-z0-9_~.\-])[A-Za-z0-9_~.\-]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}(?![A-Za-z0-9_~.\-])"),
     _group(0), ("q~",)),  # Azure AD client secrets
    (_lazy(r"[?&]sig=([A-Za-z0-9%+/=]{16,})"), _group(1), ("sig=",)),  # Azure SAS signatures
    (_lazy(r"(?<![A-Za-z0-9])(?:npm_[A-Za-z0-9]{30,}|pypi-[A-Za-z0-9_\-]{40,})"), _group(0), ("npm_", "pypi-")),
    (_lazy(r"(?<![A-Za-z0-9])\d{8,10}:AA[A-Za-z0-9_\-]{32,34}(?![A-Za-z0-9_\-])"), _group(0), (":aa",)),  # Telegram bots
    (_lazy(r"(?<![A-Za-z0-9])SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}(?![A-Za-z0-9_\-])"), _group(0),
     ("sg.",)),  # SendGrid
    (_lazy(r"(?<![A-Za-z0-9])(?:hf_[A-Za-z0-9]{34,}|shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}|do[opr]_v1_[a-f0-9]{64}"
                r"|key-[0-9a-f]{32}(?![0-9A-Za-z]))"), _group(0),
     ("hf_", "shpat_", "shpss_", "shpca_", "shppa_", "dop_v1_", "doo_v1_", "dor_v1_", "key-")),  # Hugging Face,
    # Shopify, DigitalOcean, Mailgun
    (_lazy(r"(?<![A-Za-z0-9])(?:dckr_pat_[A-Za-z0-9_\-]{20,}|HRKU-AA[A-Za-z0-9_\-]{50,}|ATATT3[A-Za-z0-9_\-=]{100,}"
                r"|ATBB[A-Za-z0-9_=.\-]{28,}|ATCTT3[A-Za-z0-9_\-=]{100,}|hv[sbr]\.[A-Za-z0-9_\-]{24,}"
                r"|[a-z0-9]{14}\.atlasv1\.[A-Za-z0-9_\-=]{60,}|dapi[0-9a-f]{32}(?:-\d)?|lin_api_[A-Za-z0-9]{40}"
                r"|ntn_[A-Za-z0-9]{40,}|secret_[A-Za-z0-9]{43}(?![A-Za-z0-9])|PMAK-[0-9a-f]{24}-[0-9a-f]{34}"
                r"|gl(?:sa|c)_[A-Za-z0-9+/=_]{32,}|NRAK-[A-Z0-9]{27}|NRJS-[a-f0-9]{19}|sntr[ysu]s?_[A-Za-z0-9_=+/\-]{40,}"
                r"|pul-[a-f0-9]{40}|dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}|sq0(?:atp|csp)-[0-9A-Za-z_\-]{22,}"
                r"|EAAA[A-Za-z0-9_\-]{40,}|pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_\-=.]{32,}|sbp_[a-f0-9]{40}"
                r"|[0-9a-f]{32}-us\d{1,2}(?![0-9A-Za-z])|[0-9a-f]{32}-[0-9a-f]{8}-[0-9a-f]{8}(?![0-9A-Za-z]))"),
     _group(0), ("dckr_pat_", "hrku-", "atatt3", "atbb", "atctt3", "hvs.", "hvb.", "hvr.", ".atlasv1.", "dapi", "lin_api_",
                 "ntn_", "secret_", "pmak-", "glsa_", "glc_", "nrak-", "nrjs-", "sntr", "pul-", "dp.pt.", "dp.st.", "dp.sa.",
                 "dp.ct.", "dp.scim.", "dp.audit.", "sq0atp-", "sq0csp-", "eaaa", "pscale_", "sbp_")),  # Docker Hub, Heroku,
    # Atlassian, Vault, Terraform Cloud, Databricks, Linear, Notion, Postman, Grafana, New Relic, Sentry, Pulumi,
    # Doppler, Square, PlanetScale, Supabase
    (_lazy(r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{50,}"), _group(0), ("age-secret-key-1",)),  # age
    (_lazy(r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]{6,}\.eyJ[A-Za-z0-9_\-]{6,}\.[A-Za-z0-9_\-]*"), _group(0),
     ("eyj",)),  # JWTs: base64url('{"') . base64url('{"') . signature
    (_lazy(r"(?i)\bbearer\s+([A-Za-z0-9._~+/\-]{16,}=*)"), _group(1), ("bearer",)),
    (_lazy(r"(?i)\bauthorization[\"']?\s*[:=]\s*[\"']?(?:basic|token|digest|bearer)\s+([A-Za-z0-9._~+/\-]{4,}=*)"),
     _group(1), ("authorization",)),
    # user:password@host: the password may hold "/" and "@" (the user info ends at the LAST @ before a host)
    (_lazy(r"(?i)\b[a-z][a-z0-9+.\-]{0,20}://[^\s:/\"'<>]{0,100}:([^\s\"'<>]{1,200})"
                r"@[A-Za-z0-9.\-\[\]_%]+(?::\d{1,5})?(?![^/?#\s\"'<>,;)\]}`\\])"), _placeholder_or(1), ("://",)),
    # command lines: curl's -u user and password, mysql's -p, sshpass and docker login -p, flags named for a secret,
    # echo … | docker login --password-stdin
    (_lazy(r"(?:\bcurl\b|\bwget\b|\bhttp(?= ))[^\n]{0,300}?\s(?:-u|--user)(?:\s+|=)?([\"']?)([^\s:\"']{1,100}):"
                r"([^\s\"']{0,200})\1"), _user_pass, ("curl", "wget", "http ")),
    (_lazy(r"(?:\bmysql\w*|\bmariadb\w*)[^\n|;&]{0,300}?\s-p(?![\s\-])([\"']?)([^\s\"'`;|&]+)\1"), _flag_value,
     ("mysql", "mariadb")),
    (_lazy(r"(?:\bsshpass\b|\b(?:docker|podman|buildah|skopeo|nerdctl|oras)\s+login\b)[^\n|;&]{0,300}?\s-p\s*([\"']?)([^\s\"'`;|&]+)\1"),
     _flag_value, ("sshpass", " login")),
    (_lazy(r"(?i)(?<![\w\-])--?(?:password|passwd|pass|pwd|pw|token|api-?key|secret|client-secret|auth-token|access-token"
                r"|private-key)(?:=|[ \t]+)([\"']?)([^\s\"'`;|&]+)\1"), _flag_value,
     ("-pass", "-pw", "-token", "-api", "-secret", "-client-secret", "-auth-token", "-access-token", "-private-key")),
    (_lazy(r"\becho\s+(?:-n\s+)?([\"']?)([^\s\"'|]+)\1\s*\|[^\n]{0,200}?(?:--password-stdin|--with-token)"),
     _flag_value, ("-stdin", "--with-token")),
    (_lazy(r"(?:--password-stdin|--with-token)[^\n|]{0,200}?<<<\s*([\"']?)([^\s\"']+)\1"), _flag_value,
     ("-stdin", "--with-token")),
    # docker's config.json
    (_lazy(r"\"(?:auth|identitytoken|registrytoken)\"\s*:\s*\"([^\"\s]{4,})\""), _group(1),
     ('"auth"', '"identitytoken"', '"registrytoken"')),
    # netrc: machine HOST [login L] [account A] password P
    (_lazy(r"(?i)\b(?:machine\s+\S+|default)(?:\s+(?:\d+\t\s*)?(?:login|account|port)\s+\S+){0,4}"
                r"\s+(?:\d+\t\s*)?password\s+(\S+)"),
     _group(1), ("machine", "default login", "default account", "default password")),
    # Twilio: a 32-hex auth token near the word (the SIDs are found by their shape, in _RUN_SHAPES)
    (_lazy(r"(?i)twilio"), _twilio, ("twilio",)),
    # password hashes (htpasswd, /etc/shadow, bcrypt): offline guessing material
    (_lazy(r"\$(?:apr1|2[abxy]|1|5|6|y|gy|7)\$[A-Za-z0-9./$=]{20,}|\{S?SHA\}[A-Za-z0-9+/=]{20,}"), _hash_tail,
     ("$apr1$", "$2a$", "$2b$", "$2x$", "$2y$", "$1$", "$5$", "$6$", "$y$", "$gy$", "$7$", "{sha}", "{ssha}")),
    # XML elements and attributes named for a secret; a Kubernetes env entry (name DB_PASS, then its value line)
    (_lazy(r"(?i)<(?P<n>[A-Za-z_:.\-]{0,40}(?:pass|secret|token|pwd|credential|api_?key|apikey)[A-Za-z_:.\-]{0,40})"
                r"(?:\s[^<>]{0,200})?>(?P<v>[^<\n]{1,300})</"), _tag_value, ("pass", "secret", "token", "pwd", "credential", "key")),
    (_lazy(r"(?i)\b(?:key|name)\s*=\s*\"[^\"\n]{0,60}(?:pass|secret|token|pwd|credential|key)[^\"\n]{0,60}\"\s+value\s*=\s*\"([^\"\n]+)\""),
     _group(1), ('value="', "value ="),),
    (_lazy(r"(?i)\bname:\s*[\"']?[A-Za-z0-9_.\-]{0,40}(?:pass|secret|token|pwd|credential|api_?key)[A-Za-z0-9_.\-]{0,40}[\"']?"
                r"[ \t]*\r?\n[ \t]*(?:\d+\t[ \t]*)?value:[ \t]*[\"']?([^\"'\n]+)"), _group(1), ("name:",)),
    # cookies: Cookie/Set-Cookie headers, curl -b / --cookie, "cookie": "…" in JSON
    (_lazy(r"(?i)(?:\b(?:set-)?cookie[\"']?\s*:[ \t]*[\"']?|(?<!\S)(?:-b|--cookie)\s+[\"']?)([^\n\"']+)"),
     _cookie_values, ("cookie", "-b ")),
    # (the lookahead first lets the engine pass over most places at the cost of one class test: 2.4x faster)
    (_lazy(r"(?i)(?=[acemprst])(?P<n>(?:pass(?:word|wd|phrase|(?![a-z]))|pwd|secret|credentials?|api[_\-]?key|apikey|access[_\-]?key|"
                r"private[_\-]?key|account[_\-]?key|shared[_\-]?access[_\-]?key|(?:auth|signing|encryption|master)"
                r"[_\-]?key|token|(?<![a-z])pw(?![a-z]))[A-Za-z0-9_.\-]{0,40})(?:\\?[\"'])?(?:[ \t]*:?=|:|(?<=[\"'])[ \t]+:)[ \t]*"
                r"(?:\\?[\"'])?(?P<v>[^\s\"'`,;&<>\\]+)"),
     _key_value, ("pass", "secret", "credential", "key", "token", "pwd", "pw")),
]

# Found by shape inside runs of 24+ token characters (see _runs): no word to look for first
_RUN_SHAPES: list[tuple[_Lazy, Spans]] = [
    # Ethereum private keys: 0x + 64 hex on a line that speaks of a key, wallet, signer or account
    (_lazy(r"(?<![0-9A-Za-z])0x([0-9a-fA-F]{64})(?![0-9A-Za-z])"), lambda m: _eth_key(m)),
    # Twilio account and API key SIDs (and a 32-hex auth token near one)
    (_lazy(r"(?<![A-Za-z0-9])(?:AC|SK)[0-9a-f]{32}(?![A-Za-z0-9])"), lambda m: _twilio(m)),
    # Mailchimp (hex-usN), Mailgun private keys (hex32-hex8-hex8)
    (_lazy(r"(?<![0-9A-Za-z])[0-9a-f]{32}-(?:us\d{1,2}|[0-9a-f]{8}-[0-9a-f]{8})(?![0-9A-Za-z])"), _group(0)),
]

_ALL_WORDS = tuple(sorted({"private key"} | {w for _p, _s, words in _RULES for w in words}, key=lambda w: (-len(w), w)))


def _trie(words) -> str:
    """A regular expression for ``words`` as a trie (``sk(?:-|_live_)``): at each place the engine tries one
    branch per next character, not every word; it finds the longest word starting there."""
    root: dict = {}
    for w in words:
        node = root
        for c in w:
            node = node.setdefault(c, {})
        node[""] = {}

    def emit(node: dict) -> str:
        alts = [re.escape(c) + emit(sub) for c, sub in sorted(node.items()) if c]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 and len(alts[0]) == 1 else "(?:" + "|".join(alts) + ")"
        return body + ("?" if "" in node else "")
    return emit(root)


# one scan decides most lines: the longest word at each place, and with it every word inside it (compiled once a
# process has redacted 256 KiB, e.g. the worker; before that, one substring test per word)
_ANY_WORD: list = []  # [the compiled trie], made when first used
_WARM = [0]
_INSIDE: dict[str, frozenset] = {}  # word -> the words inside it, filled when the trie is first used
_RULES_OF: dict[str, tuple[int, ...]] = {w: tuple(i for i, r in enumerate(_RULES) if w in r[2]) for w in _ALL_WORDS}
_TOKEN_SET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-")
_TO_RUNS = bytes(0x61 if chr(i) in _TOKEN_SET else 0x20 for i in range(256))  # token char -> "a", else " "
_A24, _A40 = b"a" * 24, b"a" * 40


def _runs(text: str, found: list) -> None:
    """Long runs of token characters: key bodies (40+), Discord bot tokens (24+ then ``.``) and the formats of
    :data:`_RUN_SHAPES`. Found with byte-level ``find`` on a translated copy (same indices: one byte per
    character), so ordinary text, whose words are short, costs almost nothing."""
    b = text.encode("ascii", "replace").translate(_TO_RUNS)
    i = b.find(_A24)
    while i != -1:
        end = b.find(b" ", i)
        end = len(b) if end == -1 else end
        for pattern, spans in _RUN_SHAPES:
            for m in pattern.finditer(text, max(0, i - 2), end):
                found.extend(spans(m))
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


def _merge(spans: list) -> list:
    spans.sort()
    merged = [spans[0]]
    for a, b in spans[1:]:
        if a <= merged[-1][1]:
            if b > merged[-1][1]:
                merged[-1] = (merged[-1][0], b)
        else:
            merged.append((a, b))
    return merged


def _word_windows(text: str, lower: str) -> dict[str, list]:
    """Each word's windows in a long text: (start, end) of each line holding it, with the line after it. One
    scan with the trie finds every word (and every word inside it) at once."""
    _compile_trie()
    n = len(text)
    out: dict[str, list] = {}
    search = _ANY_WORD[0].search
    line_a = line_b = -1
    m = search(lower)
    while m:
        i = m.start()
        if not line_a <= i < line_b:
            line_a = text.rfind("\n", 0, i) + 1
            e = text.find("\n", i)
            line_b = n if e == -1 else e
            e = text.find("\n", line_b + 1) if line_b < n else -1
            window = (line_a, n if e == -1 else e)
        for w in _INSIDE[m.group()]:
            ws = out.setdefault(w, [])
            if not ws or ws[-1] != window:
                ws.append(window)
        m = search(lower, i + 1)
    return out


# Kubernetes Secrets: every value of the data and stringData maps in a Secret's document (YAML or JSON)
_LINE_PREFIX = re.compile(r"(?:[ \t]*\d+\t|[^\s:]{1,200}[:\-]\d+[:\-])?")
_K8S_KIND = re.compile(r"(?m)^(?:[ \t]*\d+\t|[^\s:]{1,200}[:\-]\d+[:\-])?[ \t]*kind:[ \t]*[\"']?Secret[\"']?[ \t]*$")
_K8S_MAP = re.compile(r"([ \t]*)(?:data|stringData):[ \t]*$")
_K8S_ENTRY = re.compile(r"([ \t]*)[\"']?[A-Za-z0-9_.\-]+[\"']?:[ \t]+(?:[|>][-+]?[ \t]*$)?[\"']?([^\"'\n]*)")
_K8S_JSON = re.compile(r"\"(?:data|stringData)\"\s*:\s*\{([^{}]*)\}")
_JSON_VALUE = re.compile(r"\"[^\"\n]*\"\s*:\s*\"([^\"\n]+)\"")


def _k8s_secrets(text: str) -> list:
    out = []
    if re.search(r"\"kind\"\s*:\s*\"Secret\"", text):
        for m in _K8S_JSON.finditer(text):
            out.extend(v.span(1) for v in _JSON_VALUE.finditer(text, m.start(1), m.end(1)))
    pos = 0
    for doc in re.split(r"(?m)^(?=---[ \t]*$)", text):
        if _K8S_KIND.search(doc):
            lines, at = doc.split("\n"), pos
            i, inside = 0, None
            for line in lines:
                body_at = _LINE_PREFIX.match(line).end()
                body = line[body_at:]
                if inside is not None:
                    e = _K8S_ENTRY.match(body)
                    indent = len(body) - len(body.lstrip(" \t"))
                    if body.strip() and indent <= inside:
                        inside = None
                    elif e and e.group(2).strip():
                        out.append((at + body_at + e.start(2), at + body_at + e.end(2)))
                    elif body.strip():
                        out.append((at + body_at + indent, at + len(line)))  # a line of a block scalar
                if inside is None:
                    mm = _K8S_MAP.match(body)
                    if mm:
                        inside = len(mm.group(1))
                at += len(line) + 1
                i += 1
        pos += len(doc)
    return [(a, b) for a, b in out if b > a and not text.startswith(REDACTED, a)]


# A key split across string literals ("sk-ant-" "api03-…", 'AKIA' + '…'): the joined text is searched, and each
# secret found across two or more literals is removed from each of them
_LITERALS = re.compile(r"""(?:"[^"\\\n]{1,300}"|'[^'\\\n]{1,300}')"""
                       r"""(?:(?:[ \t]*\+)?\s{0,40}(?:\d+\t[ \t]*)?[rbuf]{0,2}(?:"[^"\\\n]{1,300}"|'[^'\\\n]{1,300}'))+""")
_LITERAL = re.compile(r""""([^"\\\n]*)"|'([^'\\\n]*)'""")


def _split_literals(text: str) -> list:
    out = []
    for m in _LITERALS.finditer(text):
        parts = []  # (start in text, content)
        for lit in _LITERAL.finditer(text, m.start(), m.end()):
            g = 1 if lit.group(1) is not None else 2
            parts.append((lit.start(g), lit.group(g)))
        if len(parts) < 2:
            continue
        joined, starts = "", []
        for a, c in parts:
            starts.append(len(joined))
            joined += c
        if len(joined) < 16:
            continue
        for a, b in find_secrets(joined, _literals=False):
            hit = [(i, max(a, s0), min(b, s0 + len(parts[i][1]))) for i, s0 in enumerate(starts)
                   if s0 < b and a < s0 + len(parts[i][1])]
            if len(hit) >= 2:
                for i, x, y in hit:
                    out.append((parts[i][0] + x - starts[i], parts[i][0] + y - starts[i]))
    return out


def _compile_trie() -> None:
    if not _ANY_WORD:
        _INSIDE.update({w: frozenset(v for v in _ALL_WORDS if v in w) for w in _ALL_WORDS})
        _ANY_WORD.append(re.compile(_trie(_ALL_WORDS)))


def _words_in(lower: str) -> set:
    if _WARM[0] < 1 << 18:
        _WARM[0] += len(lower)
        return {w for w in _ALL_WORDS if w in lower}
    _compile_trie()
    present: set = set()
    search = _ANY_WORD[0].search
    m = search(lower)
    while m:
        present |= _INSIDE[m.group()]
        m = search(lower, m.start() + 1)
    return present


def find_secrets(text: str, _literals: bool = True) -> list[tuple[int, int]]:
    """Spans of ``text`` that :func:`redact` replaces (first pass), sorted; they may overlap."""
    found: list = []
    lower = text.lower()
    n = len(text)
    whole = n <= 2048 or len(lower) != n  # short (a transcript line), or lower() changed lengths
    windows = None if whole else _word_windows(text, lower)
    present = _words_in(lower) if whole else set(windows)
    if present:
        if "private key" in present:
            found.extend(m.span() for m in _PEM.finditer(text))
        for i in sorted({i for w in present for i in _RULES_OF.get(w, ())}):
            pattern, spans, words = _RULES[i]
            for a, b in [(0, n)] if whole else _merge([x for w in words for x in windows.get(w, ())]):
                for m in pattern.finditer(text, a, b):
                    found.extend(spans(m))
        if "secret" in present and "kind" in lower:
            found.extend(_k8s_secrets(text))
    if len(text) >= 24:
        _runs(text, found)
        if _literals and _MAYBE_LITERALS.search(text):
            found.extend(_split_literals(text))
    if _literals and "\\" in text and _ESCAPE.search(text):
        found.extend(_escaped(text))
    return sorted(found)


# a secret written with string escapes (JSON's "\u0073k-ant-…", "https:\/\/user:pw@…", a PEM key's "\n", \x41):
# found on the text with the escapes decoded, each span mapped back to the escaped text it came from
_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|[/nrt])")


def _escaped(text: str) -> list:
    decoded: list[str] = []
    starts: list[int] = []  # where each decoded character starts in ``text``
    at = 0
    for m in _ESCAPE.finditer(text):
        decoded.append(text[at:m.start()])
        starts.extend(range(at, m.start()))
        e = m.group()
        ch = {"/": "/", "n": "\n", "r": "\r", "t": "\t"}.get(e[1]) or chr(int(e[2:], 16))
        if 0xD800 <= ord(ch) <= 0xDFFF:
            ch = "\ufffd"
        decoded.append(ch)
        starts.append(m.start())
        at = m.end()
    decoded.append(text[at:])
    starts.extend(range(at, len(text)))
    starts.append(len(text))
    plain = "".join(decoded)
    ends = starts[1:]  # a decoded character ends where the next one starts
    return [(starts[a], ends[b - 1] if b > a else starts[a]) for a, b in find_secrets(plain, _literals=False)
            if b > a]


_MAYBE_LITERALS = re.compile(r"""["'](?:[ \t]*\+|\s*\n)?[ \t]*[rbuf]{0,2}["']|["'][ \t]*(?:\+|\r?\n)""")


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
