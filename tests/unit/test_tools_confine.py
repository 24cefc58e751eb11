"""Confinement: no path the agent can write ever reaches outside the project, .git internals, ignored
files or credential files; links are checked after resolution and again when a file is opened."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from subconscious.agent_tools.confine import Refused, Root, Target, ToolError, is_secret_name, within
from tests.harness.sizes import examples

ENV = {"HOME": "/nonexistent-home"}


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict:
    """A project with links in and out, .git, an ignored dir, a credential file; a secret outside it."""
    base = tmp_path_factory.mktemp("world")
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("OUTSIDE_SECRET\n")
    proj = base / "proj"
    (proj / "src" / "pkg").mkdir(parents=True)
    (proj / "src" / "pkg" / "mod.py").write_text("print('hi')\n")
    (proj / "README.md").write_text("# readme\n")
    (proj / ".git").mkdir()
    (proj / ".git" / "config").write_text("[core]\n")
    (proj / "build").mkdir()
    (proj / "build" / "out.o").write_text("obj\n")
    (proj / ".gitignore").write_text("build/\n*.log\n")
    (proj / "app.log").write_text("log\n")
    (proj / ".env").write_text("TOKEN=abc\n")
    (proj / ".env.example").write_text("TOKEN=\n")
    (proj / ".aws").mkdir()
    (proj / ".aws" / "config").write_text("[default]\n")
    os.symlink(outside, proj / "out_dir")
    os.symlink(outside / "secret.txt", proj / "out_file")
    os.symlink("../../outside/secret.txt", proj / "src" / "rel_out")
    os.symlink("pkg/mod.py", proj / "src" / "in_link")
    os.symlink(".git", proj / "gitlink")
    os.symlink("build/out.o", proj / "to_ignored")
    os.mkfifo(proj / "pipe")
    return {"base": base, "proj": proj, "outside": outside, "root": Root(str(proj), ENV)}


PIECES = ["..", ".", "src", "pkg", "mod.py", "out_dir", "out_file", "rel_out", "in_link", "gitlink", ".git",
          "config", "secret.txt", "outside", "build", "to_ignored", "", "proj", "~"]


@st.composite
def agent_paths(draw):
    parts = draw(st.lists(st.sampled_from(PIECES), min_size=1, max_size=6))
    lead = draw(st.sampled_from(["", "", "/", "ABS_PROJ/", "ABS_BASE/", "ABS_OUT/"]))
    return lead, "/".join(parts)


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(agent_paths())
def test_no_resolved_path_ever_escapes_the_root(world, lead_and_path):
    lead, path = lead_and_path
    lead = {"ABS_PROJ/": str(world["proj"]) + "/", "ABS_BASE/": str(world["base"]) + "/",
            "ABS_OUT/": str(world["outside"]) + "/"}.get(lead, lead)
    root: Root = world["root"]
    try:
        t = root.resolve(lead + path)
    except ToolError:
        return  # refused (Refused is a ToolError): fine
    real = os.path.realpath(t.real)
    assert within(real, root.path)
    rel_parts = t.rel.split("/")
    assert ".git" not in rel_parts
    assert not root.rules.ignored(t.rel, t.is_dir)
    assert not (not t.is_dir and t.rel and is_secret_name(rel_parts[-1]))
    if t.exists and not t.is_dir:
        try:
            fd = root.open_file(t)
        except ToolError:
            return
        try:
            st_fd = os.fstat(fd)
            st_real = os.stat(real)
            assert (st_fd.st_dev, st_fd.st_ino) == (st_real.st_dev, st_real.st_ino)
            assert b"OUTSIDE_SECRET" not in os.read(fd, 4096)
        finally:
            os.close(fd)


@pytest.mark.parametrize("path,why", [
    ("../outside/secret.txt", "outside the project"),
    ("src/../../outside/secret.txt", "outside the project"),
    ("out_dir/secret.txt", "symbolic link"),
    ("out_file", "symbolic link"),
    ("src/rel_out", "symbolic link"),
    (".git/config", ".git"),
    ("gitlink/config", ".git"),
    ("build/out.o", "ignore rules"),
    ("to_ignored", "ignore rules"),
    ("app.log", "ignore rules"),
    (".env", "credentials"),
    (".aws/config", "hold credentials"),
    ("/etc/passwd", "outside the project"),
])
def test_refusals_say_why(world, path, why):
    with pytest.raises(Refused, match=why):
        world["root"].resolve(path)


def test_allowed_paths(world):
    root: Root = world["root"]
    assert root.resolve("src/in_link").rel == "src/pkg/mod.py"      # a link inside the project is fine
    assert root.resolve(str(world["proj"] / "README.md")).rel == "README.md"
    assert root.resolve(".env.example").rel == ".env.example"
    assert root.resolve("", default=".").rel == ""
    assert root.resolve("src/new_file.py").exists is False


def test_the_unresolved_project_path_works_too(world, tmp_path):
    alias = tmp_path / "alias"
    os.symlink(world["proj"], alias)  # e.g. /tmp -> /private/tmp on macOS
    root = Root(str(alias), ENV)
    assert root.resolve(str(alias / "README.md")).rel == "README.md"
    with pytest.raises(Refused):
        root.resolve(str(alias / ".." / "outside" / "secret.txt"))


def test_only_regular_files_are_opened(world):
    root: Root = world["root"]
    t = root.resolve("pipe")
    started = time.monotonic()
    with pytest.raises(Refused, match="regular"):
        root.open_file(t)
    assert time.monotonic() - started < 5  # a FIFO is refused, not waited on


def test_a_link_swapped_in_after_the_check_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text("OUTSIDE")
    proj = tmp_path / "p"
    (proj / "d").mkdir(parents=True)
    (proj / "d" / "f.txt").write_text("inside")
    root = Root(str(proj), ENV)
    t = root.resolve("d/f.txt")
    (proj / "d" / "f.txt").unlink()
    (proj / "d").rmdir()
    os.symlink(outside, proj / "d")  # the attacker's swap between check and open
    with pytest.raises(Refused):
        root.open_file(t)


def test_walk_sees_only_visible_regular_files(world):
    root: Root = world["root"]
    stats: dict = {}
    seen = [rel for rel, _, _ in root.walk(Target(root.path, "", True, True), deadline=time.monotonic() + 30,
                                           max_entries=10_000, stats=stats)]
    assert sorted(seen) == sorted([".env.example", ".gitignore", "README.md", "src/in_link", "src/pkg/mod.py"])
    assert "stopped" not in stats


def test_walk_stops_at_the_entry_cap(world):
    root: Root = world["root"]
    stats: dict = {}
    list(root.walk(Target(root.path, "", True, True), deadline=time.monotonic() + 30, max_entries=3, stats=stats))
    assert stats["stopped"] == "entries"


def test_a_missing_project_directory_is_a_tool_error(tmp_path):
    with pytest.raises(ToolError, match="does not exist"):
        Root(str(tmp_path / "gone"), ENV)


def test_the_home_or_root_directory_is_not_a_project(tmp_path):
    with pytest.raises(ToolError, match="not a project"):
        Root(str(tmp_path), {"HOME": str(tmp_path)})
    with pytest.raises(ToolError, match="not a project"):
        Root("/", ENV)


def test_secret_names():
    for name in (".env", ".env.local", "server.pem", "id_rsa", "id_ed25519", ".netrc", "prod.tfstate", "credentials"):
        assert is_secret_name(name), name
    for name in (".env.example", "id_rsa.pub", "env.py", "keys.py", "README.md"):
        assert not is_secret_name(name), name


def test_ignore_rules_are_reread_per_root(tmp_path):
    proj = tmp_path / "p"
    proj.mkdir()
    (proj / "x.tmp").write_text("x")
    assert Root(str(proj), ENV).resolve("x.tmp").rel == "x.tmp"
    Path(proj / ".gitignore").write_text("*.tmp\n")
    with pytest.raises(Refused):
        Root(str(proj), ENV).resolve("x.tmp")
