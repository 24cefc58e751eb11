from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from subconscious.config import ConfigError, expand_letta_home, load_settings
from subconscious.state.ids import InvalidIdentifier, check_host_id, check_session_id
from subconscious.state.store.core import session_file_name

HOSTILE = ["../x", "..", "a/b", "a\\b", "a\x00b", "", " ", ".hidden", "x" * 129, "a b", "é", "-lead", None, 5]


@pytest.mark.parametrize("sid", HOSTILE)
def test_hostile_session_ids_never_become_paths(sid):
    with pytest.raises(InvalidIdentifier):
        session_file_name(sid)


@given(st.text(max_size=140))
def test_any_accepted_session_id_stays_a_plain_file_name(sid):
    try:
        name = session_file_name(sid)
    except InvalidIdentifier:
        return
    assert Path(name).name == name and "/" not in name and ".." not in sid and "\x00" not in name


def test_claude_code_session_ids_are_accepted():
    assert check_session_id("0e1d5c4a-9c0f-4b55-9a43-7d0f6d6b2a11")


@pytest.mark.parametrize("host", ["../h", "h/x", "", ".h", "h" * 65, "a b"])
def test_hostile_host_ids_are_refused(host):
    with pytest.raises(InvalidIdentifier):
        check_host_id(host)


@pytest.mark.parametrize(
    "raw, expected",
    [("$HOME/sync", "/home/u/sync"), ("${HOME}/sync", "/home/u/sync"), ("~/sync", "/home/u/sync"),
     ("~", "/home/u"), ("/abs/path", "/abs/path"), ("rel", "/proj/rel")],
)
def test_letta_home_expansion(raw, expected):
    assert expand_letta_home(raw, "/home/u", "/proj") == Path(expected)


@pytest.mark.parametrize("raw", ["$DROPBOX/x", "${SYNC}/x", "%USERPROFILE%\\x", "~bob/x", "", "$HOMEDIR/x"])
def test_other_unexpanded_variables_are_refused_clearly(raw):
    with pytest.raises(ConfigError) as err:
        expand_letta_home(raw, "/home/u", "/proj")
    assert "LETTA_HOME" in str(err.value)


def test_settings_default_to_the_project_dir_like_upstream():
    s = load_settings({"HOME": "/home/u"}, cwd="/proj")
    assert s.state_home == Path("/proj/.letta/claude")
    assert (s.mode, s.sdk_tools, s.base_url) == ("whisper", "read-only", "https://api.letta.com")


def test_settings_refuse_unknown_modes_and_hide_the_key():
    with pytest.raises(ConfigError):
        load_settings({"LETTA_MODE": "loud"}, cwd="/p")
    s = load_settings({"LETTA_API_KEY": "sk-very-secret-value"}, cwd="/p")
    assert "sk-very-secret-value" not in repr(s)
