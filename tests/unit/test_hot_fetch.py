"""The fetching PreToolUse and UserPromptSubmit when the agent said nothing new (subconscious/hooks/fetch_shortcut.py):
real hook processes after a real SessionStart, against the fake Letta server of test_injection_hooks.

- nothing new since the watermark (only the user's lines and reasoning): each hook makes its one request,
  prints nothing and loads no ``subconscious.state`` module; UserPromptSubmit still arms the session's
  safety-net retry (spawn.pickup's ``arm``);
- a new note is shown exactly once, also by a PreToolUse whose TTL had run out (the fast path took the
  TTL, found the note and gave the TTL back, so the full path fetched instead of skipping);
- the pure rule (a note, the watermark in the page) agrees with context_messages.look_back.
"""

from __future__ import annotations

import json
import os
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from subconscious.local import claims
from subconscious.hooks import fetch_shortcut as hotfetch
from subconscious.injection.messages import look_back
from tests.unit.test_hot_path_imports import HOOK, loaded
from tests.unit.test_injection_hooks import Session, letta  # noqa: F401 - the fake server fixture
from tests.harness.sizes import examples

STATE = "subconscious.state"


def started(tmp_path, letta, **env) -> tuple[Session, str]:
    """A session begun by a real SessionStart, its first note shown (so the watermark is set)."""
    s = Session(tmp_path, letta, **env)
    assert s.hook("session-start") == ""
    conv = json.loads((s.home / f"session-{s.sid}.json").read_text())["conversationId"]
    letta.say(conv, "the first note")
    assert s.hook("user-prompt-submit").count("the first note") == 1
    return s, conv


def run(s: Session, event: str) -> tuple[set, str]:
    mods, proc = loaded(s.tmp, HOOK, ["hook", event], json.dumps(s.data(event)), s.env)
    assert "Traceback" not in proc.stderr, proc.stderr
    return mods, proc.stdout


def fetches(letta, limit: int) -> int:
    return sum(1 for r in letta.requests if r.startswith("GET ") and f"limit={limit}&" in r)


def test_nothing_new_takes_one_request_and_no_state_module(tmp_path, letta):
    s, conv = started(tmp_path, letta)
    letta.say(conv, "what the user typed", message_type="user_message")
    letta.say(conv, "thinking it over", message_type="reasoning_message")
    letta.say(conv, "   ")  # an assistant message with no text is no note
    marker = tmp_path / "local" / "sessions" / "pending" / s.sid
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the start message's worker (sends get a 503) marks its retry
        if marker.exists() and marker.stat().st_mtime < time.time() + 100:
            break
        time.sleep(0.1)
    marker.unlink()

    for event, limit in (("user-prompt-submit", 100), ("pre-tool-use", 50)):
        before = fetches(letta, limit)
        mods, out = run(s, event)
        assert out == ""
        assert not {m for m in mods if m == STATE or m.startswith(STATE + ".")}, event
        assert fetches(letta, limit) == before + 1, event  # fetched: one page, once
    due = marker.stat().st_mtime  # a turn began: its lines are delivered even if no Stop comes
    assert time.time() + 500 < due < time.time() + 700
    assert claims.state(tmp_path / "local" / "shown", s.sid)["fetch_ms"] > 0

    os.utime(marker, (time.time() - 1,) * 2)  # a retry is due: the prompt's full path picks it up
    mods, out = run(s, "user-prompt-submit")
    assert out == "" and "subconscious.delivery.spawn" in mods
    assert marker.stat().st_mtime > time.time() + 10  # claimed by the worker it started


def test_a_new_note_is_shown_exactly_once(tmp_path, letta):
    s, conv = started(tmp_path, letta, SUBCONSCIOUS_FETCH_TTL="5")
    shown_dir = tmp_path / "local" / "shown"
    assert claims.take_fetch(shown_dir, s.sid, 0, int(time.time() * 1000) - 10_000)  # the TTL ran out
    letta.say(conv, "the user's next line", message_type="user_message")
    letta.say(conv, "a fresh note")

    mods, out = run(s, "pre-tool-use")
    assert out.count("a fresh note") == 1 and "the first note" not in out
    assert "subconscious.hooks.events.pre_tool" in mods  # the full path showed it

    assert claims.take_fetch(shown_dir, s.sid, 0, int(time.time() * 1000) - 10_000)
    mods, out = run(s, "pre-tool-use")
    assert out == "" and not any(m.startswith(STATE + ".") for m in mods)  # shown once; nothing new now
    letta.say(conv, "a note before the prompt")
    out = run(s, "user-prompt-submit")[1] + run(s, "user-prompt-submit")[1]
    assert out.count("a note before the prompt") == 1 and "a fresh note" not in out


def test_the_page_sizes_are_the_full_paths():
    from subconscious.hooks.events import pre_tool, prompt

    assert (hotfetch.PRE_TOOL_PAGE, hotfetch.PROMPT_PAGE) == (pre_tool.PAGE, prompt.PAGE)


TYPES = st.sampled_from(["assistant_message", "user_message", "reasoning_message", "tool_call_message", None])
CONTENT = st.one_of(st.none(), st.sampled_from(["", "  ", "a note", "\n"]),
                    st.lists(st.fixed_dictionaries({"type": st.sampled_from(["text", "image"]),
                                                    "text": st.sampled_from(["", " ", "x"])}), max_size=2))


@st.composite
def messages(draw):
    out = []
    for i in range(draw(st.integers(0, 8))):
        m = {"id": f"message-{draw(st.integers(0, 9))}"}
        kind = draw(TYPES)
        if kind is not None:
            m["message_type"] = kind
        m[draw(st.sampled_from(["content", "text"]))] = draw(CONTENT)
        out.append(m)
    return out


@given(messages(), st.one_of(st.none(), st.sampled_from([f"message-{i}" for i in range(10)])), st.integers(1, 10))
def test_nothing_new_only_when_look_back_finds_no_note_up_to_the_watermark(page, mark, limit):
    page = page[:limit]
    look = look_back(page, mark)
    reached = look.found if mark is not None else not page  # a short page may have more behind it (rows)
    assert hotfetch.nothing_new_in(page, mark, limit) == (reached and not look.notes)


@given(st.sampled_from(["http", "https", "HTTP"]), st.sampled_from(["localhost", "127.0.0.1", "api.letta.com", "[::1]"]),
       st.sampled_from(["", ":8283", ":80"]), st.sampled_from(["", "/", "/v1", "/v1/", "//letta//", "/a/v1"]))
def test_the_api_root_is_the_full_paths(scheme, host, port, path):
    from subconscious.letta.config import normalize_base_url

    url = f"{scheme}://{host}{port}{path}"
    root = hotfetch.api_root(url)
    if scheme.islower():
        assert root is not None and root[0] == normalize_base_url(url)
    else:
        assert root is None or root[0] == normalize_base_url(url)
    assert hotfetch.api_root(" ") == (normalize_base_url(None), "api.letta.com")


# The patterns hotfetch checked with re before it checked by character sets (re's import cost a hook 3-5 ms):
# the oracle the set checks must agree with, on URL-like and arbitrary strings.
_BASE_URL_RE = __import__("re").compile(
    r"(https?)://([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?(/[A-Za-z0-9._~/-]*)?")
_ID_RE = __import__("re").compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}")


def oracle_api_root(raw):
    value = (raw or "").strip() or hotfetch.DEFAULT_BASE_URL
    m = _BASE_URL_RE.fullmatch(value)
    if m is None:
        return None
    scheme, host, port, path = m.group(1), m.group(2), m.group(3) or "", m.group(4) or ""
    path = __import__("re").sub(r"/+", "/", path).rstrip("/")
    if not path.endswith("/v1"):
        path += "/v1"
    return f"{scheme}://{host}{port}{path}", host.lower()


URL_PARTS = st.sampled_from(["http", "https", "HTTP", "ftp", "://", ":", "/", "//", "[", "]", "::1", "1.2.3.4", "host",
                             "a-b.c", "_", "@", "user@", "?q=1", "#f", "~", "%20", "８", "²", "٣", " ", "\n", "é",
                             "0", "65535", "123456", "v1", "..", "-", "."])


@settings(max_examples=examples(3000))
@given(st.one_of(st.lists(URL_PARTS, max_size=10).map("".join), st.text(max_size=30), st.none(),
                 st.tuples(st.sampled_from(["http://", "https://"]), st.lists(URL_PARTS, max_size=8).map("".join)
                           ).map("".join)))
def test_the_set_checks_agree_with_the_patterns_they_replace(raw):
    assert hotfetch.api_root(raw) == oracle_api_root(raw)
    if raw is not None:
        assert hotfetch.plain_id(raw) == (_ID_RE.fullmatch(raw) is not None)


def test_ids_at_the_length_limit():
    for text in ("a" * 128, "a" * 129, "a" + "_" * 127, "_a", "a.b-c_d", ""):
        assert hotfetch.plain_id(text) == (_ID_RE.fullmatch(text) is not None), text
