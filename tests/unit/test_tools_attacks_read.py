"""Issue 11, written as attacks on the read-side tools (Read, Grep, Glob): a hostile agent (a prompt
injection in a cloned repository) tries to get something the confinement should hide. Each test failed on
the code before the fix (figures in the commit message and docs/agent-tools.md); all must pass now.

- a directory swapped for a symbolic link while Grep/Glob walk the project;
- project directories that are too wide (home's parent, /tmp, ~/.config…) or that move with Claude Code's
  current directory (a parent .gitignore not applied from proj/sub);
- credential names missing from the list, or written with another case or trailing dots/spaces;
- Grep's count / files-with-matches / content modes as an oracle on redacted text.
"""
from __future__ import annotations

import os
import string
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from subconscious.agent_tools import confine, readers
from subconscious.agent_tools.confine import Refused, Root, ToolError
from subconscious.agent_tools.limits import DEFAULT_LIMITS
from subconscious.agent_tools.registry import finish_text

ENV = {"HOME": "/nonexistent-home"}
CALLS = 480


def call(fn, root: Root, **args) -> str:
    """One tool call as the agent gets it: the text, or the error message; redacted like every result."""
    try:
        text = fn(root, args, DEFAULT_LIMITS, time.monotonic() + 30)
    except ToolError as e:
        text = "Error: " + str(e)
    return finish_text(text, DEFAULT_LIMITS)


def _root(path: Path, env=ENV, **kw) -> Root:
    try:
        return Root(str(path), env, **kw)
    except TypeError:  # the code before the fix had no keyword options
        return Root(str(path), env)


# ---------------------------------------------------------------------- the walk race

@pytest.fixture
def swap_world(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "outside_marker.txt").write_text("OUTSIDE_MARKER_7f3a\n")
    proj = tmp_path / "proj"
    proj.mkdir()
    for i in range(50):  # files walked before sub/: the swap has time to happen in between
        (proj / f"a{i:03d}.txt").write_text("filler line\n" * 20)
    (proj / "sub").mkdir()
    (proj / "sub" / "inside.txt").write_text("INSIDE\n")
    return proj, outside


def _race(proj: Path, outside: Path, fn, args: dict, calls: int) -> tuple[int, int]:
    """(calls whose result showed the outside marker, swaps done) while a thread swaps proj/sub for a link
    to ``outside`` and back, in a loop."""
    sub, parked = proj / "sub", proj / "parked"
    stop = threading.Event()
    swaps = [0]

    def swapper():
        while not stop.is_set():
            os.rename(sub, parked)
            os.symlink(outside, sub)
            time.sleep(0.0005)
            os.unlink(sub)
            os.rename(parked, sub)
            swaps[0] += 1
            time.sleep(0.0005)

    t = threading.Thread(target=swapper, daemon=True)
    root = _root(proj)
    hits = 0
    t.start()
    try:
        for _ in range(calls):
            if "outside_marker" in call(fn, root, **args).lower():
                hits += 1
    finally:
        stop.set()
        t.join(5)
    assert sub.is_dir() and not sub.is_symlink()
    return hits, swaps[0]


@pytest.mark.parametrize("tool", ["Grep", "Glob"])
def test_searches_never_follow_a_directory_swapped_for_a_link(swap_world, tool):
    proj, outside = swap_world
    fn, args = {"Grep": (readers.grep, {"pattern": "OUTSIDE_MARK[E]R|INSID[E]"}),
                "Glob": (readers.glob, {"pattern": "**/*"})}[tool]
    hits, swaps = _race(proj, outside, fn, args, CALLS)
    print(f"{tool}: outside marker in {hits}/{CALLS} calls ({swaps} swaps)")
    assert swaps > 20
    assert hits == 0, f"{tool} returned the outside file in {hits} of {CALLS} calls"


def test_walk_handles_cannot_be_opened_after_the_walk_moved_on(tmp_path):
    """A handle kept past its directory must not open a name in whatever directory now has that fd."""
    (tmp_path / "p" / "d").mkdir(parents=True)
    (tmp_path / "p" / "a.txt").write_text("a\n")
    (tmp_path / "p" / "d" / "b.txt").write_text("b\n")
    root = _root(tmp_path / "p")
    start = root.resolve(".")
    items = list(root.walk(start, deadline=time.monotonic() + 30, max_entries=100, stats={}))
    assert [rel for rel, _, _ in items] == ["a.txt", "d/b.txt"]
    for _, handle, _ in items:
        if not isinstance(handle, str):
            with pytest.raises(Refused):
                root.open_walked(handle)


# ---------------------------------------------------------------------- roots that are too wide

@pytest.fixture
def home(tmp_path):
    """A fake user home inside tmp_path/users, with the files a too-wide root would show."""
    h = tmp_path / "users" / "alice"
    (h / ".config" / "gh").mkdir(parents=True)
    (h / ".config" / "gh" / "hosts.yml").write_text("oauth: GH_CONFIG_MARKER\n")
    (h / ".local" / "share").mkdir(parents=True)
    (h / "Library").mkdir()
    (h / ".bash_history").write_text("echo BASH_HISTORY_MARKER\n")
    (h / "proj").mkdir()
    (h / "proj" / "main.py").write_text("print('hi')\n")
    (h / ".config" / "nvim" / ".git").mkdir(parents=True)
    (h / ".config" / "nvim" / "init.lua").write_text("-- nvim\n")
    return h


def _wide_roots(h: Path) -> dict[str, tuple[str, dict]]:
    env = {"HOME": str(h)}
    return {
        "users (above home)": (str(h.parent), env),
        "tmp_path (above home)": (str(h.parent.parent), env),
        "/tmp": ("/tmp", env),
        "/var/tmp": ("/var/tmp", env),
        "~/.config": (str(h / ".config"), env),
        "~/.config/gh": (str(h / ".config" / "gh"), env),
        "~/.local": (str(h / ".local"), env),
        "~/Library": (str(h / "Library"), env),
        "%APPDATA%": (str(h / ".local" / "share"), {**env, "APPDATA": str(h / ".local" / "share")}),
        "home": (str(h), env),
        "/": ("/", env),
    }


@pytest.mark.parametrize("where", ["users", "home"])
def test_a_git_repository_above_home_or_at_home_is_no_project_either(home, where):
    top = home.parent if where == "users" else home  # /home kept in git, or a dotfiles repo in ~
    (top / ".git").mkdir()
    with pytest.raises(ToolError):
        Root(str(top), {"HOME": str(home)})
    assert confine.project_root(str(home / "proj"), {"HOME": str(home)}) == str((home / "proj").resolve())


@pytest.mark.parametrize("which", ["users (above home)", "tmp_path (above home)", "/tmp", "/var/tmp", "~/.config",
                                   "~/.config/gh", "~/.local", "~/Library", "%APPDATA%", "home", "/"])
def test_no_tools_in_a_root_that_is_too_wide(home, which):
    path, env = _wide_roots(home)[which]
    if not os.path.isdir(path):
        pytest.skip(f"{path} does not exist here")
    with pytest.raises(ToolError) as e:
        Root(path, env)
    assert "not a project" in str(e.value) or "directory" in str(e.value)


def test_bash_history_is_not_shown_from_above_home(home):
    env = {"HOME": str(home)}
    try:
        root = Root(str(home.parent), env)
    except ToolError:
        return  # refused: nothing shown
    out = call(readers.read, root, file_path="alice/.bash_history") + call(readers.grep, root, pattern="MARK[E]R")
    assert "BASH_HISTORY_MARKER" not in out and "GH_CONFIG_MARKER" not in out


def test_projects_still_work(home, tmp_path):
    env = {"HOME": str(home)}
    assert Root(str(home / "proj"), env).path == str((home / "proj").resolve())
    assert Root(str(home / ".config" / "nvim"), env)  # a git working tree of its own inside ~/.config
    (tmp_path / "elsewhere").mkdir()
    assert Root(str(tmp_path / "elsewhere"), env)  # a directory inside /tmp is fine; /tmp itself is not
    assert confine.root_refusal(str(home / "proj"), env) is None


# ---------------------------------------------------------------------- roots that move

@pytest.fixture
def repo(tmp_path):
    """proj is a git working tree whose top .gitignore hides sub/secrets.yml; the session runs in proj/sub."""
    proj = tmp_path / "proj"
    (proj / ".git" / "info").mkdir(parents=True)
    (proj / ".gitignore").write_text("sub/secrets.yml\n")
    (proj / "sub").mkdir()
    (proj / "sub" / "secrets.yml").write_text("SUB_SECRET_MARKER\n")
    (proj / "sub" / "code.py").write_text("print('SUB_CODE')\n")
    (proj / "top.py").write_text("print('TOP')\n")
    return proj


def test_parent_gitignore_applies_when_the_session_runs_in_a_subdirectory(repo):
    root = _root(repo / "sub")  # a root recorded before the fix, or one whose git toplevel is refused
    out = (call(readers.grep, root, pattern="MARK[E]R|SUB_COD[E]") + call(readers.glob, root, pattern="**/*")
           + call(readers.read, root, file_path="secrets.yml"))
    assert "SUB_CODE" in out
    assert "SUB_SECRET_MARKER" not in out
    assert "secrets.yml" not in call(readers.glob, root, pattern="**/*")


def test_the_session_root_is_the_git_top_level_above_the_start_directory(repo):
    pick = getattr(confine, "project_root", lambda p, env=None: os.path.realpath(p))  # before: the cwd itself
    chosen = pick(str(repo / "sub"), ENV)
    assert chosen == str(repo.resolve())
    root = _root(Path(chosen))
    assert "SUB_SECRET_MARKER" not in call(readers.grep, root, pattern="MARK[E]R")
    assert "sub/code.py" in call(readers.glob, root, pattern="**/*.py")


def test_the_worker_uses_the_root_recorded_at_session_start_not_the_stop_cwd(repo, tmp_path, monkeypatch):
    from subconscious.local import sessions as localsession
    from subconscious.delivery import worker

    seen = []
    monkeypatch.setattr(worker, "_send", lambda client, conv, text, rt, cwd: seen.append(cwd))
    sessions = tmp_path / "sessions"
    local = localsession.LocalSession("s-11")
    local.cwd = str(repo / "sub")  # where Claude Code was at the last Stop
    local.project_root = str(repo)  # what SessionStart recorded
    local.pending_start = "<claude_code_session_start/>"
    empty = SimpleNamespace(list_messages=lambda *a, **k: [], iter_messages=lambda *a, **k: iter(()),
                            iter_messages_newest_first=lambda *a, **k: iter(()))
    worker._deliver_start(empty, "conv", local, sessions, rt=None)  # a conversation with nothing in it yet
    assert seen == [str(repo)]


def test_session_start_records_one_root_and_keeps_it(repo, tmp_path, monkeypatch, caplog):
    from subconscious.local import sessions as localsession
    from subconscious.hooks.events import session_start

    monkeypatch.setattr(session_start, "resolve", lambda ctx, client: ("agent-1", "Sub"))
    monkeypatch.setattr(session_start, "conversation_for", lambda ctx, client, agent: "conv-1")
    monkeypatch.delenv("CLAUDE_PROJECT_DIR", raising=False)

    class Client:
        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

    store = SimpleNamespace(update_session=lambda sid, fn: fn(None), setting=lambda key: None,
                            session=lambda sid: None, retired_conversation=lambda sid: None)
    ctx = SimpleNamespace(client=lambda timeout=None: Client(), remaining=lambda t: t, session_id="s-12",
                          store=store, sessions_dir=tmp_path / "sessions",
                          settings=SimpleNamespace(project=None, sdk_tools="read-only", base_url="http://127.0.0.1:9",
                                                   api_key=None, agent_id=None, model=None, context_window=None),
                          rt=SimpleNamespace(host=SimpleNamespace(name="m"),
                                             local=SimpleNamespace(root=tmp_path / "local")))
    session_start.begin(ctx, SimpleNamespace(cwd=str(repo / "sub"), data={}, name="SessionStart"))
    first = localsession.load(tmp_path / "sessions", "s-12")
    assert getattr(first, "project_root", None) == str(repo.resolve())
    assert f"<path>{repo.resolve()}</path>" in first.pending_start
    # a later SessionStart (resume, compact) from elsewhere keeps the session's root
    session_start.begin(ctx, SimpleNamespace(cwd=str(repo.parent), data={}, name="SessionStart"))
    assert localsession.load(tmp_path / "sessions", "s-12").project_root == str(repo.resolve())
    # a session that starts in the home directory: recorded, refused, and the agent is told why
    monkeypatch.setenv("HOME", str(tmp_path))
    caplog.set_level("WARNING", logger="subconscious")
    ctx.session_id = "s-13"
    session_start.begin(ctx, SimpleNamespace(cwd=str(tmp_path), data={}, name="SessionStart"))
    text = localsession.load(tmp_path / "sessions", "s-13").pending_start
    assert "You have no tools on the user's machine in this session" in text and "home directory" in text
    assert "no tools for session s-13" in caplog.text


# ---------------------------------------------------------------------- credential names

MISSING = [".credentials.json", ".envrc", "id_rsa_github", "putty.ppk", "private.asc", "kubeconfig",
           ".vault-token", "terraform.tfvars", "prod.tfvars", "service-account.json", "my-app-service-account.json",
           "application_default_credentials.json"]
CASE = [".ENV", ".Env.Local", "ID_RSA", "Id_Ed25519", "CREDENTIALS", "Server.PEM", ".NETRC", "KubeConfig"]
WINDOWS = ["credentials.", "id_rsa ", ".netrc. ", "server.pem.", ".envrc::$DATA", ".e\u200cnv"]  # + HFS+ ignorables


@pytest.mark.parametrize("name", MISSING + CASE + WINDOWS)
def test_files_named_like_credentials_are_never_shown(tmp_path, name):
    proj = tmp_path / "p"
    proj.mkdir()
    (proj / name).write_text("CRED_FILE_MARKER\n")
    (proj / "ok.txt").write_text("fine\n")
    root = _root(proj)
    out = (call(readers.read, root, file_path=name) + call(readers.grep, root, pattern="CRED_FILE_MARK[E]R")
           + call(readers.glob, root, pattern="*"))
    assert "CRED_FILE_MARKER" not in out
    listed = call(readers.glob, root, pattern="*").split("\n")
    assert name not in listed and "ok.txt" in listed


@pytest.mark.parametrize("gitdir", [".GIT", ".Git", ".git.", ".git ", "GIT~1", ".g\u200cit"])
def test_git_internals_in_any_spelling_are_never_shown(tmp_path, gitdir):
    proj = tmp_path / "p"
    (proj / gitdir / "hooks").mkdir(parents=True)
    (proj / gitdir / "hooks" / "pre-commit").write_text("#!/bin/sh\necho GIT_HOOK_MARKER\n")
    root = _root(proj)
    out = (call(readers.read, root, file_path=f"{gitdir}/hooks/pre-commit")
           + call(readers.grep, root, pattern="GIT_HOOK_MARK[E]R") + call(readers.glob, root, pattern="**/*"))
    assert "GIT_HOOK_MARKER" not in out
    assert "hooks/pre-commit" not in call(readers.glob, root, pattern="**/*")


def test_ignore_rules_ignore_case_where_the_filesystem_does(tmp_path):
    proj = tmp_path / "p"
    proj.mkdir()
    (proj / ".gitignore").write_text("secrets.yml\nprivate/\n")
    (proj / "Secrets.YML").write_text("IGNORED_CASE_MARKER\n")
    (proj / "PRIVATE").mkdir()
    (proj / "PRIVATE" / "notes.txt").write_text("IGNORED_CASE_MARKER\n")
    root = _root(proj, lenient=True)  # what macOS and Windows get
    out = (call(readers.grep, root, pattern="IGNORED_CASE_MARK[E]R") + call(readers.read, root, file_path="Secrets.YML")
           + call(readers.read, root, file_path="PRIVATE/notes.txt"))
    assert "IGNORED_CASE_MARKER" not in out


def test_the_name_predicate_is_shared_and_case_insensitive():
    from subconscious.agent_tools import names

    assert names.is_secret_name("ID_RSA_work") and names.is_secret_name("Terraform.TFVARS")
    assert not names.is_secret_name("ID_RSA_work.pub") and not names.is_secret_name(".ENV.Example")
    assert names.is_git_name(".GIT.") and names.is_secret_dir(".SSH ")
    assert confine.is_secret_name is names.is_secret_name


# ---------------------------------------------------------------------- Grep as an oracle on redacted text

SECRET = "q7vx2m9kw4zt"


@pytest.fixture
def secret_root(tmp_path):
    proj = tmp_path / "p"
    proj.mkdir()
    (proj / "settings.py").write_text(f'DEBUG = True\npassword = "{SECRET}"\nNAME = "app"\n')
    # Grep cuts a matching line at 300 characters: the cut falls 10 characters into this key
    (proj / "long.py").write_text("x = '" + "y" * 281 + " sk-ant01ABCDEFGHIJKLMNOPQRSTUVWX'\n")
    return _root(proj)


@pytest.mark.parametrize("mode", ["count", "files_with_matches", "content"])
def test_grep_cannot_recover_a_redacted_value_character_by_character(secret_root, mode):
    known = 'password = "'
    for _ in range(len(SECRET)):
        for c in string.ascii_lowercase + string.digits:
            out = call(readers.grep, secret_root, pattern=re_escape(known + c), output_mode=mode)
            if not out.startswith("No matches"):
                known += c
                break
        else:
            break
    recovered = known[len('password = "'):]
    print(f"{mode}: recovered {len(recovered)}/{len(SECRET)} characters")
    assert recovered == "", f"Grep {mode} revealed {recovered!r} of the redacted value"


def test_grep_matches_what_redaction_shows(secret_root):
    """Grep behaves as if the secret were the marker: the marker matches, the value does not."""
    assert call(readers.grep, secret_root, pattern=r'password = "\[REDACTED\]"', output_mode="count") == "settings.py:1"
    assert call(readers.grep, secret_root, pattern=SECRET[:6], output_mode="count").startswith("No matches")


def test_grep_line_cut_never_leaves_part_of_a_secret(secret_root):
    out = call(readers.grep, secret_root, pattern="yyyy")
    assert "long.py:1:" in out
    assert "sk-ant01" not in out and "ABCDE" not in out


def re_escape(s: str) -> str:
    import re
    return re.escape(s)


def test_grep_line_numbers_stay_right_after_a_redacted_private_key(tmp_path):
    proj = tmp_path / "p"
    proj.mkdir()
    key = "-----BEGIN RSA PRIVATE KEY-----\n" + "MIIEowIBAAKCAQEAx1\n" * 5 + "-----END RSA PRIVATE KEY-----\n"
    (proj / "notes.txt").write_text("intro\n" + key + "AFTER_KEY here\n")
    root = _root(proj)
    assert call(readers.grep, root, pattern="AFTER_KEY") == "notes.txt:9:AFTER_KEY here"
    assert call(readers.grep, root, pattern="MIIE").startswith("No matches")


@pytest.mark.parametrize("state_dir", [".letta", ".LETTA", ".letta."])
def test_the_subconscious_own_state_in_the_project_is_never_shown(tmp_path, state_dir):
    """A home inside the project (LETTA_HOME unset): a shard is readable text that says which key
    encrypts the home and which agent serves it; the agent's tools must not see it."""
    proj = tmp_path / "p"
    (proj / state_dir / "claude" / "hosts").mkdir(parents=True)
    (proj / state_dir / "claude" / "hosts" / "h1.json").write_text('{"settings": "STATE_FILE_MARKER"}\n')
    (proj / "ok.txt").write_text("fine\n")
    root = _root(proj)
    out = (call(readers.read, root, file_path=f"{state_dir}/claude/hosts/h1.json")
           + call(readers.grep, root, pattern="STATE_FILE_MARK[E]R"))
    assert "STATE_FILE_MARKER" not in out
    assert "h1.json" not in call(readers.glob, root, pattern="**/*.json")
