"""Redaction runs in the worker over whole transcripts and tool results: input made to make a backtracking
pattern slow must still come out (the test's timeout bounds it; benchmarks/redaction_bench.py prints the time for
10,000 and 100,000 characters of each case: linear), and the laws hold on it: idempotent, nothing left that the
rules would find. Built from the pieces each rule looks for, so the generated text reaches the rules' slow paths
(a password with no @ after it, a BEGIN line with no key, literals that never close)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from subconscious.privacy.redact import find_secrets, redact
from tests.harness.sizes import examples

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import redaction_bench as bench  # noqa: E402

PIECES = ["://", "https://u", ":", "@", "/", "password", "pw", "secret", "token", "=", " = ", ": ", "\n", "\\n", "\r\n",
          '"', "'", " ", "\t", "+", "-----BEGIN PRIVATE KEY-----", "-----END PRIVATE KEY-----", "Proc-Type: 4",
          "mysql", " -p", "sshpass", "curl", " -u ", "machine", " login ", " password ", "Cookie: ", "a=bbbbbbbb;",
          "0x", "0f" * 8, "AC", "SK", "kind: Secret", "data:", "  k: ", "sk-ant-", "AKIA", "ABCD1234efgh", "aB3+/" * 3,
          "<password>", "</", "Authorization: Basic ", "Bearer ", "$2y$05$", "   12\t", "src/a.py:3:", "twilio",
          "--token ", "echo x | ", "--password-stdin", '"auth": "', "name: DB_PASS", "value: ", "eyJ", ".", "_"]

text = st.lists(st.sampled_from(PIECES), max_size=400).map("".join)


def _laws(s: str) -> None:
    once = redact(s)
    assert redact(once) == once
    assert find_secrets(once) == []


@settings(max_examples=examples(300), deadline=None)
@given(text)
def test_rule_pieces_in_any_order(s):
    _laws(s)


@settings(max_examples=examples(40), deadline=None)
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=4).map("".join), st.integers(1000, 20000))
def test_one_piece_repeated_to_20000_characters(unit, size):
    _laws(unit * (size // len(unit)))


@pytest.mark.parametrize("case", list(bench.ADVERSARIAL))
def test_the_benchmarks_adversarial_inputs(case):
    unit, prefix = bench.ADVERSARIAL[case]
    _laws(prefix + unit * (50_000 // len(unit)))
