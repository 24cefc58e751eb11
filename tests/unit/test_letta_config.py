"""Base URL normalisation, agent id validation, settings from the environment, secret redaction."""
from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from subconscious.letta.config import LettaSettings, check_id, display_url, normalize_base_url, validate_agent_id
from subconscious.letta.errors import LettaConfigError, LettaError, redact

AGENT = "agent-123e4567-e89b-42d3-a456-426614174000"


@pytest.mark.parametrize("raw,expected", [
    (None, "https://api.letta.com/v1"),
    ("", "https://api.letta.com/v1"),
    ("  https://api.letta.com  ", "https://api.letta.com/v1"),
    ("https://api.letta.com/v1", "https://api.letta.com/v1"),
    ("http://localhost:8283", "http://localhost:8283/v1"),
    ("http://localhost:8283/", "http://localhost:8283/v1"),
    ("http://localhost:8283/v1/", "http://localhost:8283/v1"),
    ("http://localhost:8283//v1//", "http://localhost:8283/v1"),
    ("HTTP://127.0.0.1:8283", "http://127.0.0.1:8283/v1"),
    ("https://proxy.example/letta/", "https://proxy.example/letta/v1"),
    ("http://h:1/v1?x=1#frag", "http://h:1/v1"),
])
def test_normalize_base_url(raw, expected):
    assert normalize_base_url(raw) == expected


@pytest.mark.parametrize("raw", ["localhost:8283", "ftp://host", "api.letta.com", "http://", "http:///v1"])
def test_bad_base_urls_say_how_to_write_one(raw):
    with pytest.raises(LettaConfigError, match="LETTA_BASE_URL") as exc:
        normalize_base_url(raw)
    assert "http://localhost:8283" in str(exc.value)


_host = st.from_regex(r"[a-z][a-z0-9\-]{0,10}(\.[a-z]{2,5}){0,2}", fullmatch=True)
_prefix = st.lists(st.from_regex(r"[a-z0-9_\-]{1,6}", fullmatch=True), max_size=3).map(lambda p: "/".join(p))


@given(st.sampled_from(["http", "https"]), _host, st.one_of(st.none(), st.integers(1, 65535)), _prefix,
       st.booleans(), st.integers(0, 3))
@example("http", "v1", None, "", True, 0)  # a host named v1: http://v1/v1 has one /v1 path, not two
@example("https", "h", 443, "v1", False, 1)  # a proxy prefix /v1 is taken as the API root
@example("https", "h", None, "v1", True, 2)  # ... and with /v1 after it, kept as it is
def test_normalisation_is_idempotent_and_ends_in_v1(scheme, host, port, prefix, with_v1, slashes):
    netloc = host + (f":{port}" if port else "")
    base = "/" + prefix if prefix else ""
    path = base + ("/v1" if with_v1 else "") + "/" * slashes
    once = normalize_base_url(f"{scheme}://{netloc}{path}")
    # the assertions are about the path: the host may itself be "v1" (http://v1/v1 ends in "/v1/v1")
    api = urlsplit(once).path
    assert api.endswith("/v1") and "//" not in api
    assert api == (base if base.endswith("/v1") and not with_v1 else base + "/v1")  # exactly one /v1 added
    assert once == f"{scheme}://{netloc}{api}"
    assert normalize_base_url(once) == once
    assert normalize_base_url(once + "/") == once


def test_display_url_masks_credentials():
    assert display_url("https://user:pw@h.example/v1") == "https://***@h.example/v1"
    assert "pw" not in str(LettaSettings.from_env({"LETTA_BASE_URL": "https://user:pw@h.example"}))


def test_agent_id_validation():
    assert validate_agent_id(AGENT) == AGENT
    assert validate_agent_id(" " + AGENT.upper().replace("AGENT-", "agent-") + " ") == AGENT
    with pytest.raises(LettaConfigError, match="looks like an agent name"):
        validate_agent_id("Subconscious")
    with pytest.raises(LettaConfigError, match="must look like agent-"):
        validate_agent_id("agent-123")


@pytest.mark.parametrize("bad", ["../agents", "a/b", "", "x" * 200, "conv-1?x=1", "id with space"])
def test_ids_that_could_escape_the_url_path_are_refused(bad):
    with pytest.raises(LettaConfigError):
        check_id(bad, "conversation id")


def test_settings_from_env():
    s = LettaSettings.from_env({"LETTA_BASE_URL": "http://localhost:8283/", "LETTA_API_KEY": " k ",
                                "LETTA_AGENT_ID": AGENT, "LETTA_MODEL": "openai/gpt-4.1-mini",
                                "LETTA_CONTEXT_WINDOW": "32000"})
    assert (s.base_url, s.api_key, s.agent_id, s.model, s.context_window) == (
        "http://localhost:8283/v1", "k", AGENT, "openai/gpt-4.1-mini", 32000)


def test_cloud_without_key_explains_what_to_do():
    with pytest.raises(LettaConfigError, match="LETTA_API_KEY is not set"):
        LettaSettings.from_env({})
    assert LettaSettings.from_env({"LETTA_BASE_URL": "http://127.0.0.1:8283"}).api_key is None


@pytest.mark.parametrize("cw", ["big", "12", "-5"])
def test_bad_context_window(cw):
    with pytest.raises(LettaConfigError, match="LETTA_CONTEXT_WINDOW"):
        LettaSettings.from_env({"LETTA_BASE_URL": "http://h", "LETTA_CONTEXT_WINDOW": cw})


def test_settings_repr_hides_the_key():
    s = LettaSettings.from_env({"LETTA_API_KEY": "sk-let-verysecretvalue"})
    assert "verysecret" not in repr(s) and "sk-let" not in repr(s) and "<set>" in repr(s)


# ---------------------------------------------------------------- redaction

_secret = st.text(alphabet=st.characters(whitelist_categories=("Ll", "Lu", "Nd"), whitelist_characters="-_"),
                  min_size=12, max_size=60)


@given(_secret, st.text(max_size=80), st.text(max_size=80), st.integers(0, 100), st.integers(0, 100))
def test_no_piece_of_the_secret_survives_redaction(secret, before, after, a, b):
    lo, hi = sorted((a % len(secret), b % len(secret)))
    piece = secret[lo:hi] if hi - lo >= 6 else secret  # any 6+ char piece, e.g. a prefix
    out = redact(before + piece + after, secret, limit=10_000)
    assert piece not in out
    for i in range(len(secret) - 5):
        assert secret[i:i + 6] not in out


def test_redaction_keeps_other_text_and_cuts_long_text():
    assert redact("status 500: boom", "sk-secret-123456") == "status 500: boom"
    assert redact("Bearer sk-secret-123456 bad", "sk-secret-123456") == "Bearer [redacted] bad"
    assert len(redact("x" * 5000, None, limit=100)) == 103


def test_error_message_composition():
    e = LettaError("reading agent", "check the id.", status=404, detail="Not found.")
    assert str(e) == "reading agent: Not found. check the id."
    assert repr(e).startswith("LettaError(")
