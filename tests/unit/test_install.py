"""`subconscious install` / `uninstall` on real settings files (the command run in-process via cli.main)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from subconscious import cli
from subconscious.local.settingsfile import is_ours, plugin_hooks

REPO = Path(__file__).resolve().parents[2]
RAW_PLUGIN_HOOKS = json.loads((REPO / "hooks" / "hooks.json").read_text())["hooks"]
# what a settings file gets: the plugin's matchers and timeouts, the launcher's exec form as a shell command
PLUGIN_HOOKS = plugin_hooks((REPO / "hooks" / "hooks.json").read_text())
# every event the plugin listens to, with its launcher argument (SessionStart: session-start, ...)
EVENTS = {event: groups[0]["hooks"][0]["args"][1] for event, groups in RAW_PLUGIN_HOOKS.items()}
N_OURS = sum(len(g["hooks"]) for gs in PLUGIN_HOOKS.values() for g in gs)  # one handler per event

# another tool's hooks, the way people have them: several events, matchers, one of ours' events shared
OTHER_TOOLS = {
    "model": "opus",
    "permissions": {"allow": ["Bash(npm test:*)"], "deny": []},
    "env": {"LETTA_MODE": "whisper"},
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "~/bin/guard-bash.sh",
                                                      "timeout": 3}]}],
        "PostToolUse": [{"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "prettier --write"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"},
                            {"type": "command", "command": "echo 'subconscious is a nice word'"}]}],
    },
}


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def write(path: Path, data, indent=2, mode=0o644) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = (json.dumps(data, indent=indent) + "\n").encode() if not isinstance(data, (str, bytes)) else (
        data.encode() if isinstance(data, str) else data)
    path.write_bytes(raw)
    path.chmod(mode)
    return raw


def backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".bak-*"))


def handlers(settings: dict, ours: bool) -> list[tuple[str, str | None, dict]]:
    return [(event, g.get("matcher"), h) for event, groups in settings.get("hooks", {}).items()
            for g in groups for h in g.get("hooks", []) if is_ours(h) == ours]


def test_install_adds_the_plugin_hooks_and_keeps_everything_else(tmp_path, capsys):
    f = tmp_path / "settings.json"
    original = write(f, OTHER_TOOLS, mode=0o640)
    code, out, err = run(capsys, "install", "--settings", str(f))
    assert code == 0, err
    assert "added subconscious hooks to %s" % f in out
    after = json.loads(f.read_text())
    # the same commands, matchers and timeouts as the plugin's hooks/hooks.json
    mine = {event: groups[-1] for event, groups in after["hooks"].items() if event in EVENTS}
    assert mine == {event: PLUGIN_HOOKS[event][0] for event in EVENTS}
    for event, arg in EVENTS.items():
        (handler,) = mine[event]["hooks"]
        (plugin_handler,) = RAW_PLUGIN_HOOKS[event][0]["hooks"]
        assert mine[event].get("matcher") == RAW_PLUGIN_HOOKS[event][0].get("matcher")
        assert handler["timeout"] == plugin_handler["timeout"] and "args" not in handler
        assert "\"$s\" hook %s || exit 1;" % arg in handler["command"]  # never blocks: exit 2 -> 1
        assert "${CLAUDE_PLUGIN_ROOT}" not in handler["command"]
    # other tools' hooks (same order, same events) and other settings are untouched
    assert handlers(after, ours=False) == handlers(OTHER_TOOLS, ours=False)
    assert {k: v for k, v in after.items() if k != "hooks"} == {k: v for k, v in OTHER_TOOLS.items() if k != "hooks"}
    assert after["hooks"]["PreToolUse"][0] == OTHER_TOOLS["hooks"]["PreToolUse"][0]  # theirs first, ours after
    # a timestamped backup with the old bytes, as private as the file was; the file keeps its mode
    (backup,) = backups(f)
    assert backup.read_bytes() == original and str(backup) in out
    assert stat.S_IMODE(backup.stat().st_mode) == 0o640 == stat.S_IMODE(f.stat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([f.name, backup.name])  # no temp files left


def test_install_is_idempotent(tmp_path, capsys):
    f = tmp_path / "settings.json"
    write(f, OTHER_TOOLS)
    assert run(capsys, "install", "--settings", str(f))[0] == 0
    once = f.read_bytes()
    code, out, _ = run(capsys, "install", "--settings", str(f))
    assert code == 0 and "already" in out and "nothing changed" in out
    assert f.read_bytes() == once and len(backups(f)) == 1
    assert len(handlers(json.loads(once), ours=True)) == N_OURS


def test_install_replaces_an_older_copy_of_our_hooks_instead_of_adding_a_second(tmp_path, capsys):
    f = tmp_path / "settings.json"
    old = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "subconscious hook stop", "timeout": 30}]}],
                     "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "notify-send hi"},
                                                     {"type": "command", "command": "subconscious hook user-prompt-submit"}]}]}}
    write(f, old)
    assert run(capsys, "install", "--settings", str(f))[0] == 0
    after = json.loads(f.read_text())
    assert after["hooks"]["Stop"] == PLUGIN_HOOKS["Stop"]
    assert after["hooks"]["UserPromptSubmit"] == [{"hooks": [{"type": "command", "command": "notify-send hi"}]},
                                                  PLUGIN_HOOKS["UserPromptSubmit"][0]]


def test_uninstall_removes_only_ours(tmp_path, capsys):
    f = tmp_path / "settings.json"
    original = write(f, OTHER_TOOLS)
    run(capsys, "install", "--settings", str(f))
    code, out, _ = run(capsys, "uninstall", "--settings", str(f))
    assert code == 0 and "removed %d subconscious hooks from %s" % (N_OURS, f) in out
    assert f.read_bytes() == original  # back to the very same file
    assert len(backups(f)) == 2
    code, out, _ = run(capsys, "uninstall", "--settings", str(f))
    assert code == 0 and "no subconscious hooks" in out and len(backups(f)) == 2


def test_uninstall_without_a_file_creates_none(tmp_path, capsys):
    f = tmp_path / "nowhere" / "settings.json"
    code, out, _ = run(capsys, "uninstall", "--settings", str(f))
    assert code == 0 and "does not exist" in out and not f.parent.exists()


@pytest.mark.parametrize("content, why", [
    ('{"hooks": {"Stop": [ ]}, // my notes\n}', "not valid JSON (line 1"),
    ('{"model": "opus",\n "hooks": {}\n', "not valid JSON (line 3"),
    ('{"model": "opus", "model": "sonnet"}', "'model' appears twice"),
    ('["not", "an", "object"]', "JSON list, not an object"),
    ('{"hooks": [{"matcher": "*"}]}', '"hooks" is a list'),
    ('{"hooks": {"Stop": {"command": "x"}}}', '"hooks.Stop" is a dict'),
    (b'{"model": "\xff"}', "not UTF-8"),
])
@pytest.mark.parametrize("verb", ["install", "uninstall"])
def test_a_file_that_does_not_parse_is_refused_and_left_alone(tmp_path, capsys, content, why, verb):
    f = tmp_path / "settings.json"
    raw = write(f, content, mode=0o600)
    before = f.stat().st_mtime_ns
    code, out, err = run(capsys, verb, "--settings", str(f))
    assert code == 2
    assert why in err and "Nothing was changed" in err, err
    assert out == ""
    assert f.read_bytes() == raw and f.stat().st_mtime_ns == before
    assert list(tmp_path.iterdir()) == [f]  # no backup, no temp file


def test_dry_run_shows_the_diff_and_writes_nothing(tmp_path, capsys):
    f = tmp_path / "settings.json"
    raw = write(f, OTHER_TOOLS)
    code, out, _ = run(capsys, "install", "--settings", str(f), "--dry-run")
    assert code == 0
    assert out.startswith("--- %s\n+++ %s (after)\n" % (f, f))
    assert '+            "timeout": 120' in out and "+            \"command\": \"s=$(command -v subconscious" in out
    assert "dry run" in out
    assert f.read_bytes() == raw and backups(f) == []
    run(capsys, "install", "--settings", str(f))
    code, out, _ = run(capsys, "uninstall", "--settings", str(f), "--dry-run")
    assert code == 0 and '-            "timeout": 120' in out and len(backups(f)) == 1


def test_default_target_is_the_user_settings(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert run(capsys, "install")[0] == 0
    f = tmp_path / "home" / ".claude" / "settings.json"
    assert len(handlers(json.loads(f.read_text()), ours=True)) == N_OURS
    assert stat.S_IMODE(f.stat().st_mode) == 0o600 and backups(f) == []  # new file: private, nothing to back up
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "cfg"))  # Claude Code's own override
    assert run(capsys, "install")[0] == 0
    assert len(handlers(json.loads((tmp_path / "cfg" / "settings.json").read_text()), ours=True)) == N_OURS


def test_project_settings(tmp_path, capsys):
    project = tmp_path / "proj"
    project.mkdir()
    code, out, _ = run(capsys, "install", "--project", str(project))
    f = project / ".claude" / "settings.json"
    assert code == 0 and str(f) in out
    assert len(handlers(json.loads(f.read_text()), ours=True)) == N_OURS


def test_a_symlinked_settings_file_stays_a_link(tmp_path, capsys):
    dotfiles = tmp_path / "dotfiles" / "claude-settings.json"
    raw = write(dotfiles, {"model": "opus"}, indent=4)
    link = tmp_path / "home" / ".claude" / "settings.json"
    link.parent.mkdir(parents=True)
    link.symlink_to(dotfiles)
    assert run(capsys, "install", "--settings", str(link))[0] == 0
    assert link.is_symlink() and os.readlink(link) == str(dotfiles)
    text = dotfiles.read_text()
    assert '\n    "model": "opus"' in text  # the file's own indentation kept
    assert len(handlers(json.loads(text), ours=True)) == N_OURS
    (backup,) = backups(link)
    assert backup.read_bytes() == raw and backup.parent == link.parent


def test_notes_when_the_plugin_is_enabled_too(tmp_path, capsys):
    f = tmp_path / "settings.json"
    write(f, {"enabledPlugins": {"subconscious@subconscious": True, "other@x": True}})
    code, out, _ = run(capsys, "install", "--settings", str(f))
    assert code == 0
    assert "subconscious@subconscious is enabled in %s: with both, every hook runs twice" % f in out
    assert "claude plugin disable subconscious@subconscious" in out


def test_the_packaged_copy_of_hooks_json_is_the_plugins(tmp_path):
    # a wheel has no hooks/ dir: install falls back to subconscious/data/hooks.json, which must not drift
    assert (REPO / "subconscious" / "data" / "hooks.json").read_bytes() == (REPO / "hooks" / "hooks.json").read_bytes()


def test_hooks_file_with_plugin_root_is_spelled_out(tmp_path, capsys):
    plugin = tmp_path / "plugin"
    (plugin / "hooks").mkdir(parents=True)
    (plugin / "hooks" / "hooks.json").write_text(json.dumps({"hooks": {"Stop": [{"hooks": [
        {"type": "command", "command": "${CLAUDE_PLUGIN_ROOT}/bin/subconscious hook stop", "timeout": 9}]}]}}))
    f = tmp_path / "settings.json"
    code, _, err = run(capsys, "install", "--settings", str(f), "--hooks-file", str(plugin / "hooks" / "hooks.json"))
    assert code == 0, err
    assert json.loads(f.read_text())["hooks"]["Stop"][0]["hooks"][0]["command"] == f"{plugin}/bin/subconscious hook stop"
