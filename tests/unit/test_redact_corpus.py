"""Redaction on a corpus of generated fake secrets (tests/fixtures/secrets/): every format caught in every
context, including the findings of issue 11 — a key body read from an offset or hit by Grep (no BEGIN line in
the result), PGP private key blocks, Stripe restricted keys, JWTs — and this repository's own code and prose
left readable."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import redaction_bench as bench  # noqa: E402

from subconscious.privacy.redact import REDACTED, find_secrets, redact  # noqa: E402

GENERATOR = bench.REPO / "tests" / "fixtures" / "secrets" / "generate.py"
CORPUS = bench.load_corpus()

# The bound on false positives (issue 23): at most 1 line in 1,000 of this repository's own *.py, *.md and *.json
# changed (about 51,000 lines; the secret fixtures and the tests of redaction, which hold fake secrets on purpose,
# are left out: benchmarks/redaction_bench.py ham_files). What a user notices is code the agent cannot read:
# at 0.1 % a 2,000-line Read shows at most a couple of "[REDACTED]" values. Measured: 0.070 % (most of it fake
# keys in test set-ups, LETTA_API_KEY="test-key-…"); the rules before issue 23 changed 0.80 % (a BEGIN line in a
# test hid the 333 lines after it); detect-secrets 1.5.0 flags 0.041 %.
FP_BOUND = 0.001
def test_the_corpus_is_what_the_generator_makes():
    assert subprocess.run([sys.executable, str(GENERATOR), "--check"]).returncode == 0


def test_the_corpus_covers_every_format_and_the_issue_11_cases():
    formats = {s["format"] for s in CORPUS}
    assert formats >= {"aws_access_key_id", "aws_secret_access_key", "gcp_api_key", "gcp_oauth_token",
                       "azure_client_secret", "azure_storage_key", "github_token", "gitlab_token", "slack_token",
                       "discord_bot_token", "stripe_secret_key", "stripe_restricted_key", "jwt", "pem_rsa",
                       "openssh", "pgp_private", "connection_string", "env_assignment", "generic_high_entropy",
                       "telegram_bot_token", "sendgrid_key", "huggingface_token", "shopify_token", "digitalocean_token",
                       "mailgun_key", "age_secret_key"}
    assert formats >= {"authorization_header", "url_password_special", "curl_user", "mysql_password", "sshpass",
                       "docker_config_auth", "kubernetes_secret", "twilio", "ethereum_private_key", "netrc",
                       "pw_assignment", "split_literal"}  # the formats issue 23 found passing through Read
    assert len(formats) >= 50
    contexts = {(s["format"], s["context"]) for s in CORPUS}
    for key in ("pem_rsa", "pem_pkcs8", "openssh", "pgp_private"):
        assert {(key, "read_offset"), (key, "grep_hits"), (key, "full")} <= contexts


@pytest.mark.parametrize("sample", CORPUS, ids=lambda s: "%s-%s" % (s["format"], s["context"]))
def test_every_sample_is_redacted(sample):
    out = redact(sample["text"])
    for secret in sample["secrets"]:
        assert secret not in out, (secret, out)
    assert REDACTED in out and redact(out) == out and find_secrets(out) == []


def test_recall_is_total_per_format():
    assert all(caught == total for caught, total in bench.recall(redact).values())


def test_false_positives_on_this_repository_stay_under_the_bound():
    bad, lines, examples = bench.false_positives(redact, bench.ham_files("repo"))
    assert lines > 40000
    assert bad / lines <= FP_BOUND, examples


def test_key_body_without_its_header():
    """The exact finding: Read from an offset, Grep on the base64 lines."""
    body = ["MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj",
            "MzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu",
            "NMoSfm76oqFvAp8Gy0iz5sxjZmSnXyCdPEovGhLa0VzMaQ8s+CLOyS56YyCFGeJZ",
            "agKj4hQ="]
    read = "\n".join("%6d\t%s" % (i + 5, line) for i, line in enumerate(body + ["-----END PRIVATE KEY-----"]))
    grep = "\n".join("secrets/server.key:%d:%s" % (i + 2, line) for i, line in enumerate(body[:3]))
    for text in (read, grep):
        out = redact(text)
        assert not any(line in out for line in body), out
    assert "     9\t" not in redact(read) or "agKj4hQ=" not in redact(read)


@pytest.mark.parametrize("text", [
    "rk_live_51HxQv2Lk8bYt0aZ1c9dEfGhIjKlMnOpQrStUvWx", "rk_test_4eC39HqLyjWDarjtT1zdp7dc",
    "Cookie: session=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF1xYz8BCADGf2k0\n=Ab12\n-----END PGP PRIVATE KEY BLOCK-----",
    "Cookie: sid=eyJhbGciOiJub25lIn0.eyJzdWIiOiJhZG1pbiIsInJvbGUiOiJvd25lciJ9.",  # unsigned: no long run at all
])
def test_formats_that_passed_before(text):
    out = redact(text)
    assert REDACTED in out
    for piece in ("51HxQv2Lk8bYt0aZ1c9d", "4eC39HqLyjWDarjtT1zd", "dozjgNryP4J3jVmNHl0w", "lQOYBF1xYz8BCADGf2k0",
                  "eyJzdWIiOiJhZG1pbiIsInJvbGUiOiJvd25lciJ9"):
        assert piece not in out


@pytest.mark.parametrize("text", [
    "password = args.password", "secret: bytes", "def derive_key(passphrase: str, params) -> Key:",
    "secrets = tuple(v for k, v in os.environ.items())", 'PASSPHRASE_ENV = "SUBCONSCIOUS_PASSPHRASE"',
    "git passes: ancestor", "commit a94a8fe5ccb19ba61c4c0873d391e987982fbbd3",
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "tests/unit/test_a_user_settings_link_is_followed_and_said", "API_KEY=${API_KEY}",
    "subconscious/agent_tools/readers.py:119:        row = \"%6d\\t%s\" % (i + 1, line)",
])
def test_code_stays_readable(text):
    assert redact(text) == text
