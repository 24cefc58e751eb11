"""Attacks on `subconscious install`: a settings file that would be written back as something Claude Code
(Node's JSON.parse) cannot read, and a project whose settings file is a symbolic link to somewhere else."""
from __future__ import annotations

import json
import os

import pytest

from subconscious import cli
from subconscious.local.settingsfile import SettingsError, parse_settings, render


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _json_parse_like_node(text: str):
    """Strict JSON as JSON.parse reads it: no NaN / Infinity / -Infinity."""
    def refuse(name):
        raise ValueError(name)
    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("number", ["1e400", "-1e400", "1E+999", "123456789e9999"])
@pytest.mark.parametrize("verb", ["install", "uninstall"])
def test_an_out_of_range_number_is_never_written_back_as_infinity(tmp_path, capsys, number, verb):
    f = tmp_path / "settings.json"
    raw = ('{"model": "opus", "cleanupPeriodDays": %s, "hooks": {"Stop": [{"hooks": [{"type": "command", '
           '"command": "subconscious hook stop"}]}]}}\n' % number).encode()
    f.write_bytes(raw)
    code, out, err = run(capsys, verb, "--settings", str(f))
    assert code == 2 and number in err and "Infinity" in err and "Nothing was changed" in err
    assert f.read_bytes() == raw and list(tmp_path.glob("settings.json.bak-*")) == []
    _json_parse_like_node(f.read_text())  # still what Claude Code can read


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_non_json_constants_are_refused(tmp_path, capsys, literal):
    f = tmp_path / "settings.json"
    raw = ('{"x": %s}' % literal).encode()
    f.write_bytes(raw)
    code, _, err = run(capsys, "install", "--settings", str(f))
    assert code == 2 and literal in err and f.read_bytes() == raw


def test_render_never_writes_a_non_finite_number():
    with pytest.raises(SettingsError):
        render({"x": float("inf")})
    with pytest.raises(SettingsError):
        parse_settings('{"x": 1e400}')
    assert parse_settings('{"x": 1.5e300, "y": 12345678901234567890123}') == {"x": 1.5e300,
                                                                              "y": 12345678901234567890123}


def _project_with_link(tmp_path, link_target):
    project = tmp_path / "cloned-project"
    (project / ".claude").mkdir(parents=True)
    (project / ".claude" / "settings.json").symlink_to(link_target)
    return project


def test_project_settings_linked_outside_the_project_are_refused(tmp_path, capsys):
    victim = tmp_path / "home" / ".bashrc.json"  # any file of the user's, outside the project
    victim.parent.mkdir()
    victim.write_text('{"note": "mine"}\n')
    before = victim.read_bytes()
    project = _project_with_link(tmp_path, victim)
    code, out, err = run(capsys, "install", "--project", str(project))
    assert code == 2 and str(victim) in err and "outside" in err and "--settings" in err
    assert victim.read_bytes() == before and list(victim.parent.iterdir()) == [victim]
    assert list((project / ".claude").iterdir()) == [project / ".claude" / "settings.json"]  # no backup either


def test_a_dangling_project_link_does_not_create_a_file_elsewhere(tmp_path, capsys):
    victim = tmp_path / "elsewhere" / "new.json"
    victim.parent.mkdir()
    project = _project_with_link(tmp_path, victim)
    code, _, err = run(capsys, "install", "--project", str(project))
    assert code == 2 and not victim.exists()


def test_a_linked_claude_dir_leading_outside_the_project_is_refused(tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    project = tmp_path / "proj"
    project.mkdir()
    (project / ".claude").symlink_to(elsewhere, target_is_directory=True)
    code, _, err = run(capsys, "install", "--project", str(project))
    assert code == 2 and not (elsewhere / "settings.json").exists()


def test_a_link_inside_the_project_is_followed(tmp_path, capsys):
    project = tmp_path / "proj"
    (project / "config").mkdir(parents=True)
    shared = project / "config" / "claude.json"
    shared.write_text("{}\n")
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").symlink_to(shared)
    code, out, _ = run(capsys, "install", "--project", str(project))
    assert code == 0 and "symbolic link to %s" % shared in out
    assert "subconscious hook" in shared.read_text() and os.path.islink(project / ".claude" / "settings.json")


def test_a_user_settings_link_is_followed_and_said(tmp_path, capsys):
    dotfiles = tmp_path / "dotfiles" / "claude.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text("{}\n")
    link = tmp_path / "settings.json"
    link.symlink_to(dotfiles)
    code, out, _ = run(capsys, "install", "--settings", str(link))
    assert code == 0 and "symbolic link to %s" % dotfiles in out and "subconscious hook" in dotfiles.read_text()
