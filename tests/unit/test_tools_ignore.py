"""Ignore rules: examples from gitignore(5), and a property test against the real git: for random trees
and random .gitignore files, the files our tools may see are exactly the files git does not ignore."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from subconscious.agent_tools.confine import Root, Target
from subconscious.agent_tools.ignore import RuleSet, glob_regex, parse_line, parse_lines
from tests.harness.sizes import examples


def rules(text: str, sub: dict[str, str] | None = None) -> RuleSet:
    by_dir = {"": parse_lines(text.split("\n"))}
    for d, t in (sub or {}).items():
        by_dir[d] = parse_lines(t.split("\n"), d)
    return RuleSet((), by_dir)


@pytest.mark.parametrize("text,path,is_dir,expected", [
    ("*.log", "a.log", False, True),
    ("*.log", "deep/er/a.log", False, True),
    ("*.log", "a.log.txt", False, False),
    ("/build", "build", True, True),
    ("/build", "src/build", True, False),
    ("build/", "build", False, False),           # directory-only pattern, a file of that name stays
    ("build/", "src/build", True, True),
    ("build/", "src/build/x.o", False, True),     # inside an ignored directory
    ("doc/frotz", "doc/frotz", False, True),
    ("doc/frotz", "a/doc/frotz", False, False),   # a middle slash anchors
    ("**/foo", "x/y/foo", False, True),
    ("**/foo/bar", "foo/bar", False, True),
    ("abc/**", "abc/x/y", False, True),
    ("abc/**", "abc", True, False),
    ("a/**/b", "a/b", False, True),
    ("a/**/b", "a/x/y/b", False, True),
    ("*.txt\n!keep.txt", "keep.txt", False, False),
    ("*.txt\n!keep.txt", "other.txt", False, True),
    ("dir/\n!dir/keep.txt", "dir/keep.txt", False, True),   # cannot re-include inside an ignored dir
    ("dir/*\n!dir/keep.txt", "dir/keep.txt", False, False),
    ("\\#hash", "#hash", False, True),
    ("# comment", "# comment", False, False),
    ("\\!bang", "!bang", False, True),
    ("trail   ", "trail", False, True),
    ("trail\\ ", "trail ", False, True),
    ("[ab].c", "a.c", False, True),
    ("[!ab].c", "a.c", False, False),
    ("[!ab].c", "z.c", False, True),
    ("?.c", "/.c", False, False),
    ("a?c", "a/c", False, False),                 # ? never matches a slash
    ("a*c", "a/c", False, False),
])
def test_gitignore_examples(text, path, is_dir, expected):
    assert rules(text).ignored(path, is_dir) is expected


def test_a_nested_gitignore_applies_below_its_directory_and_wins_over_the_root():
    r = rules("*.gen", {"pkg": "!keep.gen\n/local.txt"})
    assert r.ignored("x.gen", False) and r.ignored("pkg/x.gen", False)
    assert not r.ignored("pkg/keep.gen", False)
    assert r.ignored("pkg/local.txt", False) and not r.ignored("local.txt", False)
    assert not r.ignored("pkg/sub/local.txt", False)


def test_lines_that_mean_nothing():
    for line in ("", "   ", "#x", "!", "/", "\\"):
        p = parse_line(line)
        assert p is None or not p.regex.match("x")


def test_glob_regex_keeps_stars_within_a_directory():
    import re
    rx = re.compile("^(?:%s)$" % glob_regex("src/*.py"))
    assert rx.match("src/a.py") and not rx.match("src/x/a.py")
    rx = re.compile("^(?:%s)$" % glob_regex("**/*.py"))
    assert rx.match("a.py") and rx.match("x/y/a.py") and not rx.match("a.pyc")


# ---------------------------------------------------------------- against git

GIT = shutil.which("git")
SEGS = ["a", "b", "c.py", "d.txt", "e"]
PATTERN_PIECES = ["a", "b", "e", "*", "?", "c.py", "*.py", "d.*", "[ab]", "[!a]", "**", "c*", "*.txt"]


def _git_env(home: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(HOME=home, XDG_CONFIG_HOME=os.path.join(home, ".config"), GIT_CONFIG_NOSYSTEM="1")
    return env


@st.composite
def trees(draw):
    paths = draw(st.lists(st.lists(st.sampled_from(SEGS), min_size=1, max_size=3).map("/".join),
                          min_size=1, max_size=8, unique=True))
    files: list[str] = []
    for p in sorted(paths, key=len):  # a file may not also be a directory above another file
        if any(p.startswith(f + "/") or f.startswith(p + "/") for f in files):
            continue
        files.append(p)
    return files


@st.composite
def patterns(draw):
    n = draw(st.integers(1, 3))
    body = "/".join(draw(st.sampled_from(PATTERN_PIECES)) for _ in range(n))
    lead = draw(st.sampled_from(["", "", "/", "**/"]))
    trail = draw(st.sampled_from(["", "", "/", "/**"]))
    neg = draw(st.sampled_from(["", "", "", "!"]))
    return neg + lead + body + trail


def _visible_by_git(top: str, env: dict) -> set[str]:
    out = subprocess.run([GIT, "ls-files", "--others", "--exclude-standard", "-z"], cwd=top, env=env,
                         capture_output=True, check=True).stdout.decode()
    return {p for p in out.split("\0") if p}


def _visible_by_us(top: str, env: dict) -> set[str]:
    root = Root(top, env)
    start = Target(root.path, "", True, True)
    return {rel for rel, _, _ in root.walk(start, deadline=time.monotonic() + 30, max_entries=10_000, stats={})}


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees(), st.lists(patterns(), min_size=1, max_size=4), st.lists(patterns(), max_size=2),
       st.sampled_from(["", "a", "b"]), st.lists(patterns(), max_size=2))
def test_visible_files_are_the_ones_git_does_not_ignore(files, root_rules, sub_rules, sub_dir, info_rules):
    assert GIT, "git is needed for this test (apt-get install git)"
    with tempfile.TemporaryDirectory() as tmp:
        top, home = os.path.join(tmp, "p"), os.path.join(tmp, "home")
        os.makedirs(top)
        os.makedirs(os.path.join(home, ".config", "git"))
        env = _git_env(home)
        subprocess.run([GIT, "init", "-q", top], env=env, check=True)
        for f in files:
            path = os.path.join(top, *f.split("/"))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as fh:
                fh.write("x")
        with open(os.path.join(top, ".gitignore"), "w") as fh:
            fh.write("\n".join(root_rules) + "\n")
        if sub_rules and sub_dir and os.path.isdir(os.path.join(top, sub_dir)):
            with open(os.path.join(top, sub_dir, ".gitignore"), "w") as fh:
                fh.write("\n".join(sub_rules) + "\n")
        with open(os.path.join(top, ".git", "info", "exclude"), "a") as fh:
            fh.write("\n".join(info_rules) + "\n")
        with open(os.path.join(home, ".config", "git", "ignore"), "w") as fh:
            fh.write("*.zzz\n")
        assert _visible_by_us(top, env) == _visible_by_git(top, env), (files, root_rules, sub_dir, sub_rules, info_rules)


def test_the_global_excludes_file_is_read(tmp_path):
    home = tmp_path / "home"
    (home / ".config" / "git").mkdir(parents=True)
    (home / ".config" / "git" / "ignore").write_text("*.secretish\n")
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "a.secretish").write_text("x")
    (tmp_path / "p" / "b.txt").write_text("x")
    env = {"HOME": str(home)}
    assert _visible_by_us(str(tmp_path / "p"), env) == {"b.txt"}
