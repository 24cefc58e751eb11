"""LETTA_SDK_TOOLS=full: Write and Edit stay inside the project (no .git, ignored or credential files, no
link out), and Bash runs only in the bubblewrap sandbox: project writable, home hidden, no network."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess

import pytest

from subconscious.letta.messages import ToolCallRequest
from subconscious.agent_tools.limits import Limits
from subconscious.agent_tools.registry import ToolContext, client_tools, execute


def ensure_bwrap() -> str:
    """bubblewrap is a real part of full mode: install it (Debian, as root) or fail with what to do."""
    found = shutil.which("bwrap")
    if found:
        return found
    if os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        if subprocess.run(["apt-get", "install", "-y", "-q", "bubblewrap"], env=env, capture_output=True).returncode:
            subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True)
            subprocess.run(["apt-get", "install", "-y", "-q", "bubblewrap"], env=env, capture_output=True)
        found = shutil.which("bwrap")
    if not found:
        pytest.fail("bwrap (bubblewrap) is needed for the Bash sandbox tests: apt-get install bubblewrap")
    return found


def run(proj, name: str, limits: Limits = Limits(), **args):
    r = ToolCallRequest("call_x", name, args, json.dumps(args))
    return execute(r, ToolContext.for_session("full", str(proj), limits)).result


@pytest.fixture
def proj(tmp_path):
    p = tmp_path / "proj"
    (p / "src").mkdir(parents=True)
    (p / "src" / "a.py").write_text("x = 1\nx = 1\ny = 2\n")
    (p / ".git").mkdir()
    (p / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (p / ".gitignore").write_text("*.log\n")
    (tmp_path / "outside").mkdir()
    os.symlink(tmp_path / "outside", p / "out")
    return p


def test_write_creates_and_overwrites_inside_the_project(proj):
    r = run(proj, "Write", file_path="new/dir/b.txt", content="hello\n")
    assert r.status == "success" and "Created new/dir/b.txt" in r.output
    assert (proj / "new" / "dir" / "b.txt").read_text() == "hello\n"
    os.chmod(proj / "src" / "a.py", 0o640)
    r = run(proj, "Write", file_path="src/a.py", content="z = 3\n")
    assert r.status == "success" and "Overwrote" in r.output
    assert (proj / "src" / "a.py").read_text() == "z = 3\n"
    assert (proj / "src" / "a.py").stat().st_mode & 0o777 == 0o640
    assert not [p for p in proj.rglob("*.tmp")]


@pytest.mark.parametrize("path", ["../escape.txt", "out/escape.txt", ".git/HEAD", "debug.log", ".env", "/tmp/x.txt"])
def test_write_refuses_what_the_tools_may_not_touch(proj, path):
    r = run(proj, "Write", file_path=path, content="pwned")
    assert r.status == "error"
    assert not (proj.parent / "escape.txt").exists() and not (proj.parent / "outside" / "escape.txt").exists()
    assert (proj / ".git" / "HEAD").read_text().startswith("ref:")
    assert not (proj / "debug.log").exists() and not (proj / ".env").exists()


def test_write_caps_the_content(proj):
    r = run(proj, "Write", Limits(max_write_bytes=10), file_path="big.txt", content="x" * 11)
    assert r.status == "error" and "limit" in r.output and not (proj / "big.txt").exists()


def test_edit_replaces_exact_text(proj):
    r = run(proj, "Edit", file_path="src/a.py", old_string="x = 1", new_string="x = 10")
    assert r.status == "error" and "occurs 2 times" in r.output
    r = run(proj, "Edit", file_path="src/a.py", old_string="y = 2", new_string="y = 20")
    assert r.status == "success" and (proj / "src" / "a.py").read_text() == "x = 1\nx = 1\ny = 20\n"
    r = run(proj, "Edit", file_path="src/a.py", old_string="x = 1", new_string="x = 0", replace_all=True)
    assert r.status == "success" and (proj / "src" / "a.py").read_text() == "x = 0\nx = 0\ny = 20\n"
    r = run(proj, "Edit", file_path="src/a.py", old_string="nope", new_string="x")
    assert r.status == "error" and "not found" in r.output
    r = run(proj, "Edit", file_path="missing.py", old_string="a", new_string="b")
    assert r.status == "error" and "no such file" in r.output


def test_bash_is_offered_only_with_its_sandbox():
    ensure_bwrap()
    assert "Bash" in [t.name for t in client_tools("full")]


def test_bash_runs_in_the_project_and_can_write_only_there(proj, tmp_path):
    ensure_bwrap()
    home = os.path.expanduser("~")
    marker_home = os.path.join(home, f".subconscious-test-{os.getpid()}")
    r = run(proj, "Bash", command=f"pwd; echo made > made.txt; echo x > {tmp_path}/outside/escape.txt; "
                                  f"echo x > {marker_home}; ls {home} | wc -l; cat .git/HEAD; echo x >> .git/HEAD; "
                                  "echo API_KEY=sk-abcdefghijklmnopqrstuvwx")
    assert r.status == "success", r.output
    assert r.output.splitlines()[0] == str(proj)
    assert (proj / "made.txt").read_text() == "made\n"
    assert not (tmp_path / "outside" / "escape.txt").exists()
    assert not os.path.exists(marker_home)
    assert "ref: refs/heads/main" in r.output and (proj / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n"
    assert "sk-abcdefghijklmnopqrstuvwx" not in r.output and "[REDACTED]" in r.output
    assert "exit status" in r.output


def test_bash_has_no_network_and_a_clean_environment(proj, monkeypatch):
    ensure_bwrap()
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    monkeypatch.setenv("LETTA_API_KEY", "sk-let-should-not-leak-123456")
    try:
        probe = f"import socket; socket.create_connection(('127.0.0.1', {port}), 2); print('CONNECTED')"
        r = run(proj, "Bash", command=f'env; python3 -c "{probe}" 2>/dev/null || echo NO_NET')
    finally:
        srv.close()
    assert r.status == "success" and "NO_NET" in r.output and "CONNECTED" not in r.output
    assert "should-not-leak" not in r.output and "LETTA_API_KEY" not in r.output


def test_bash_is_killed_at_the_call_timeout(proj):
    ensure_bwrap()
    r = run(proj, "Bash", Limits(call_timeout=1.0), command="sleep 30; echo late > late.txt")
    assert r.status == "error" and "killed" in r.output
    assert not (proj / "late.txt").exists()
