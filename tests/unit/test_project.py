"""One project across machines: the identity of a session's project does not depend on where the repository
is checked out, never carries credentials, and is what the start message and every update say."""

from __future__ import annotations

import subprocess
from pathlib import Path

from hypothesis import given, strategies as st

from subconscious.local.project import identify, normalize_remote, parse_git_config
from subconscious.delivery.transcript import build_update, session_start_message

label = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{0,15}", fullmatch=True)
host = st.builds(lambda a, b: f"{a}.{b}".lower(), label, st.sampled_from(["com", "org", "io", "example"]))
secret = st.from_regex(r"[A-Za-z0-9_~%!$&'()*+,;=.-]{6,40}", fullmatch=True).filter(lambda s: "@" not in s)


@given(host, label, label, label, secret, st.booleans(), st.booleans(), st.integers(1, 65535))
def test_every_form_of_one_remote_names_one_project_without_credentials(h, owner, repo, user, password, dotgit,
                                                                       slash, port):
    tail = repo + (".git" if dotgit else "") + ("/" if slash else "")
    forms = [
        f"git@{h}:{owner}/{tail}",
        f"https://{h}/{owner}/{tail}",
        f"https://{user}:{password}@{h.upper()}/{owner}/{tail}",
        f"https://{password}@{h}:{port}/{owner}/{tail}",
        f"ssh://git@{h}:{port}/{owner}/{tail}",
        f"git://{h}/{owner}/{tail}",
    ]
    ids = {normalize_remote(f) for f in forms}
    assert ids == {f"{h}/{owner}/{repo}"}
    for f in forms:
        out = normalize_remote(f)
        assert password not in out.replace(f"{h}/{owner}/{repo}", "") and "@" not in out and ":" not in out


@given(st.text(max_size=80))
def test_any_text_is_a_remote_or_none_never_an_error_never_a_credential(url):
    out = normalize_remote(url)
    assert out is None or ("@" not in out.split("/", 1)[0] and len(out) <= 200)


def test_local_paths_say_nothing_shared():
    for url in ("/srv/git/app.git", "../app", "file:///srv/app.git", "C:\\src\\app", "C:/src/app", ""):
        assert normalize_remote(url) is None, url


def test_git_config_remotes_with_quotes_comments_and_sections():
    text = '[core]\n\turl = no\n[remote "origin"]\n\turl = "git@h.io:o/r.git" ; a comment\n' \
           '[remote "fork"] url = https://h.io/me/r\n[remote "origin"]\n\turl = second-ignored\n'
    assert parse_git_config(text) == {"origin": "git@h.io:o/r.git", "fork": "https://h.io/me/r"}


def _git(*args, cwd):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={"GIT_CONFIG_NOSYSTEM": "1", "HOME": str(cwd), "PATH": "/usr/bin:/bin"})


def _clone_at(path: Path, remote: str, branch: str = "main") -> Path:
    path.mkdir(parents=True)
    _git("init", "-q", "-b", branch, cwd=path)
    _git("remote", "add", "origin", remote, cwd=path)
    (path / "src").mkdir()
    return path


def test_two_machines_checkouts_at_different_paths_are_one_project(tmp_path):
    laptop = _clone_at(tmp_path / "home/me/src/app", "git@github.com:Acme/App.git")
    desktop = _clone_at(tmp_path / "Users/me/work/acme-app", "https://ci-bot:ghp_secret123@github.com/Acme/App",
                        branch="feature/x")
    a = identify(laptop / "src", env={}, machine="laptop")
    b = identify(desktop, env={}, machine="desktop")
    assert a.id == b.id == "github.com/Acme/App" and a.name == "App"
    assert (a.branch, b.branch) == ("main", "feature/x")
    assert "ghp_secret123" not in repr(b)


def test_worktree_reads_the_common_config_and_its_own_branch(tmp_path):
    repo = _clone_at(tmp_path / "repo", "git@gitlab.example:grp/proj.git")
    (repo / "f").write_text("x")
    _git("add", "f", cwd=repo)
    _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x", cwd=repo)
    _git("worktree", "add", "-q", "-b", "hotfix", str(tmp_path / "wt"), cwd=repo)
    p = identify(tmp_path / "wt", env={})
    assert (p.id, p.branch, p.source) == ("gitlab.example/grp/proj", "hotfix", "remote")


def test_without_a_remote_the_repository_root_names_it_and_the_env_overrides(tmp_path):
    root = tmp_path / "notes"
    (root / "deep/er").mkdir(parents=True)
    _git("init", "-q", "-b", "main", cwd=root)
    assert identify(root / "deep/er", env={}).id == "notes"
    assert identify(tmp_path / "notes", env={"SUBCONSCIOUS_PROJECT": " team/notes "}).id == "team/notes"
    plain = tmp_path / "plain"
    plain.mkdir()
    p = identify(plain, env={})
    assert (p.id, p.branch, p.source) == ("plain", None, "directory")


def test_start_message_and_updates_carry_the_identity(tmp_path):
    repo = _clone_at(tmp_path / "x/app", "git@github.com:Acme/App.git")
    project = identify(repo, env={}, machine="laptop")
    start = session_start_message(project=project, path=str(repo), session_id="s1", timestamp="t",
                                  sdk_tools_mode="off")
    assert "<project>App</project>" in start and "<project_id>github.com/Acme/App</project_id>" in start
    assert "<branch>main</branch>" in start and "<machine>laptop</machine>" in start
    line = '{"type":"user","uuid":"u1","message":{"role":"user","content":"hello"}}'
    update = build_update([line], -1, "s1", project=project.attrs())
    assert '<project id="github.com/Acme/App" name="App" branch="main" machine="laptop"/>' in update.payload
    # the delivery key does not depend on it: a retry from another code path matches the first attempt
    assert update.key == build_update([line], -1, "s1").key
