"""Properties of the pure settings-file edits (subconscious.local.settingsfile): install is idempotent, never
touches another tool's hooks or settings, and uninstall undoes it exactly."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from subconscious.local.settingsfile import (count_ours, detect_indent, install, is_ours, parse_settings, plugin_hooks,
                                       render, uninstall)

REPO = Path(__file__).resolve().parents[2]
OURS = plugin_hooks((REPO / "hooks" / "hooks.json").read_text())
N_OURS = len(json.loads((REPO / "hooks" / "hooks.json").read_text())["hooks"])  # one handler per event
EVENT_NAMES = st.sampled_from(["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "Notification"])
their_commands = st.sampled_from(["notify-send done", "prettier --write", "echo subconscious", "~/bin/guard.sh",
                                  "subconscious status", "python -m subconscious_hooks stop", "hook stop"])
their_handlers = st.fixed_dictionaries({"type": st.just("command"), "command": their_commands},
                                       optional={"timeout": st.integers(1, 600)})
our_handlers = st.builds(lambda ev, t: {"type": "command", "command": f"subconscious hook {ev}", "timeout": t},
                         st.sampled_from(["session-start", "user-prompt-submit", "pre-tool-use", "stop"]),
                         st.integers(1, 60))
groups = st.builds(lambda m, hs: ({"matcher": m} if m is not None else {}) | {"hooks": hs},
                   st.one_of(st.none(), st.sampled_from(["*", "Bash", "Edit|Write", ""])),
                   st.lists(their_handlers, min_size=1, max_size=3))
their_hooks = st.dictionaries(EVENT_NAMES, st.lists(groups, min_size=1, max_size=3), min_size=1, max_size=4)
other_keys = st.dictionaries(st.sampled_from(["model", "env", "permissions", "enabledPlugins", "statusLine"]),
                             st.one_of(st.text(max_size=5), st.dictionaries(st.text(max_size=3), st.booleans(), max_size=2)),
                             max_size=3)
settings_without_ours = st.builds(lambda keys, hooks: {**keys, **({"hooks": hooks} if hooks else {})},
                                  other_keys, st.one_of(st.none(), their_hooks))


def theirs(settings: dict) -> list:
    return [(e, g.get("matcher"), h) for e, gs in settings.get("hooks", {}).items() for g in gs
            for h in g.get("hooks", []) if not is_ours(h)]


@given(settings_without_ours)
def test_install_then_uninstall_gives_back_the_same_settings(s):
    installed = install(s, OURS)
    assert count_ours(installed) == sum(len(g["hooks"]) for gs in OURS.values() for g in gs) == N_OURS
    back, removed = uninstall(installed)
    assert back == s and removed == N_OURS


@given(settings_without_ours)
def test_install_is_idempotent_and_keeps_everything_else(s):
    once = install(s, OURS)
    assert install(once, OURS) == once
    assert theirs(once) == theirs(s)
    assert {k: v for k, v in once.items() if k != "hooks"} == {k: v for k, v in s.items() if k != "hooks"}


@given(settings_without_ours, st.lists(st.tuples(EVENT_NAMES, our_handlers), max_size=4), st.randoms())
def test_older_copies_of_ours_anywhere_are_replaced_by_exactly_one(s, planted, rnd):
    s = json.loads(json.dumps(s))
    for event, handler in planted:  # our handlers mixed into their groups, or groups of their own
        gs = s.setdefault("hooks", {}).setdefault(event, [])
        if gs and rnd.random() < 0.5:
            rnd.choice(gs)["hooks"].insert(0, handler)
        else:
            gs.append({"hooks": [handler]})
    once = install(s, OURS)
    assert count_ours(once) == N_OURS and theirs(once) == theirs(s)
    assert uninstall(once)[0] == uninstall(s)[0]


@given(settings_without_ours, st.sampled_from([2, 4, "\t"]))
def test_render_round_trips_and_keeps_the_indent(s, indent):
    text = render(s, indent)
    assert parse_settings(text) == s
    if "\n " in text or "\n\t" in text:
        assert detect_indent(text) == indent
