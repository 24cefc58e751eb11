"""Two machines share one home; one holds the encryption key, the other does not.

Each machine is simulated with its own ``SUBCONSCIOUS_HOST`` and ``SUBCONSCIOUS_STATE_DIR``; every step
runs in a real process: the ``subconscious key`` CLI, and a hook-like process (this module run with
``python -m``) that reads the session's block cache and saves the new values as a prompt hook does.
The home is shared as one directory (think NFS), through real git clones, and through a real
Syncthing pair. The machine without the key keeps working (nothing cached there), never writes plain
text, and never replaces the other machine's ciphertext.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
V1 = {"guidance": "SECRET-alpha: the user is preparing the ACME acquisition",
      "user_preferences": "SECRET-alpha: prefers small commits"}
V2 = {"guidance": "SECRET-beta: something else entirely", "user_preferences": "SECRET-beta: tabs"}
PASSPHRASE = "purple elephants juggle quietly at dawn"


# --------------------------------------------------------------------------- the hook-like process


def hook_main(argv: list[str]) -> int:
    """``python -m tests.multihost.test_encryption_hosts prompt|read SESSION`` (values on stdin)."""
    import logging
    from dataclasses import asdict

    from subconscious.local import log as slog
    from subconscious.injection.blockcache import load_blocks, store_blocks
    from subconscious.privacy.keys import KeyRing
    from subconscious.local.runtime import runtime

    action, sid = argv
    rt = runtime()
    slog.setup(rt.local.logs, debug=True)
    logger = logging.getLogger("subconscious.hook")
    store, ring = rt.store(), KeyRing.load(rt.local.keys)
    cached = load_blocks(store, ring, sid)
    logger.debug("session %s: %d cached block values readable here", sid, len(cached))
    out: dict = {"cached": cached}
    if action == "prompt":
        outcome = store_blocks(store, ring, sid, json.loads(sys.stdin.read()))
        logger.debug("session %s: saved block cache: %s", sid, outcome)
        out["outcome"] = asdict(outcome)
    print(json.dumps(out))
    return 0


# --------------------------------------------------------------------------- machines


class Machine:
    def __init__(self, tmp: Path, host: str, letta_home: Path):
        self.host, self.tmp, self.letta_home = host, tmp, letta_home
        self.local = tmp / f"local-{host}"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_"))}
        self.env.update(HOME=str(tmp / "user"), LETTA_HOME=str(letta_home), SUBCONSCIOUS_HOST=host,
                        SUBCONSCIOUS_STATE_DIR=str(self.local), PYTHONPATH=str(ROOT))

    @property
    def home(self) -> Path:
        return self.letta_home / ".letta" / "claude"

    def session_file(self, sid: str) -> Path:
        return self.home / f"session-{sid}.json"

    def key(self, *args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess:
        r = subprocess.run([sys.executable, "-m", "subconscious", "key", *args], capture_output=True, text=True,
                           input=stdin, env={**self.env, **env}, cwd=ROOT, timeout=300)
        return r

    def spawn_key(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "subconscious", "key", *args], env=self.env, cwd=ROOT,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def hook(self, action: str, sid: str, values: dict | None = None) -> dict:
        r = subprocess.run([sys.executable, "-m", "tests.multihost.test_encryption_hosts", action, sid],
                           input=json.dumps(values or {}), capture_output=True, text=True, env=self.env, cwd=ROOT,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    def prompt(self, sid: str, values: dict) -> dict:
        return self.hook("prompt", sid, values)

    def status(self) -> dict:
        r = self.key("status", "--json")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    def key_secret(self) -> list[bytes]:
        out = []
        for p in (self.local / "keys").glob("*.key"):
            out.append(json.loads(p.read_text())["secret"].encode())
        return out


def tree_bytes(*dirs: Path) -> bytes:
    return b"".join(p.read_bytes() for d in dirs if d.exists() for p in sorted(d.rglob("*"))
                    if p.is_file() and ".git" not in p.relative_to(d).parts[:1])


def assert_nothing_leaks(home_dirs: list[Path], machines: list[Machine]) -> None:
    """No block value in the homes or in any log; no key in the homes or logs."""
    homes = tree_bytes(*home_dirs)
    logs = tree_bytes(*(m.local / "logs" for m in machines))
    for blob in (homes, logs):
        for text in (*V1.values(), *V2.values()):
            assert text.encode() not in blob
        assert b"SECRET" not in blob and b"ACME" not in blob
        for m in machines:
            for secret in m.key_secret():
                assert secret not in blob
        assert PASSPHRASE.encode() not in blob


def assert_private(*dirs: Path) -> None:
    for d in dirs:
        for p in [d, *d.rglob("*")]:
            if ".git" in p.parts:
                continue
            mode = stat.S_IMODE(p.stat().st_mode)
            assert mode == (0o700 if p.is_dir() else 0o600), f"{p} has mode {mode:o}"


# --------------------------------------------------------------------------- one shared directory


def test_a_host_without_the_key_keeps_working_and_never_overwrites_ciphertext(tmp_path):
    letta_home = tmp_path / "shared"
    letta_home.mkdir()
    alpha, beta = Machine(tmp_path, "alpha", letta_home), Machine(tmp_path, "beta", letta_home)

    assert alpha.key("init").returncode == 0
    r = alpha.prompt("s1", V1)
    assert r["cached"] == {} and r["outcome"]["mode"] == "sealed"
    sealed = alpha.session_file("s1").read_bytes()

    # beta has no key: the cache is "not cached" there, and its write leaves alpha's ciphertext alone
    r = beta.prompt("s1", V2)
    assert r["cached"] == {} and r["outcome"]["mode"] == "withheld"
    assert alpha.session_file("s1").read_bytes() == sealed
    r = beta.prompt("s2", V2)  # a session started on beta
    assert r["cached"] == {} and r["outcome"]["mode"] == "withheld"
    assert json.loads(beta.session_file("s2").read_text())["lastBlockValues"] == {}
    assert beta.hook("read", "s2")["cached"] == {}
    assert_nothing_leaks([letta_home], [alpha, beta])

    # alpha still reads its cache; an unchanged prompt rewrites nothing
    r = alpha.prompt("s1", V1)
    assert r["cached"] == V1 and r["outcome"]["sealed"] == 0 and r["outcome"]["kept"] == 2
    assert alpha.session_file("s1").read_bytes() == sealed
    assert alpha.prompt("s2", V2)["outcome"]["mode"] == "sealed"

    # doctor's view from beta names the key it lacks, and where
    kinds = {f["kind"]: f for f in beta.status()["findings"]}
    assert set(kinds) == {"missing-active-key", "unknown-key"}
    assert kinds["unknown-key"]["key_id"] == alpha.status()["keyId"]
    assert {Path(p).name for p in kinds["unknown-key"]["paths"]} == {"session-s1.json", "session-s2.json"}

    # beta gets the key: it reads alpha's cache
    assert beta.key("import", stdin=alpha.key("export").stdout).returncode == 0
    assert beta.prompt("s1", V1)["cached"] == V1
    assert beta.status()["findings"] == []
    assert_nothing_leaks([letta_home], [alpha, beta])
    assert_private(alpha.home, alpha.local / "keys", beta.local / "keys")


def test_rotation_killed_midway_resumes_and_the_other_host_keeps_working(tmp_path):
    letta_home = tmp_path / "shared"
    letta_home.mkdir()
    alpha, beta = Machine(tmp_path, "alpha", letta_home), Machine(tmp_path, "beta", letta_home)
    assert alpha.key("init").returncode == 0
    old = alpha.status()["keyId"]
    assert beta.key("import", stdin=alpha.key("export").stdout).returncode == 0  # beta: old key only

    # many cached sessions, written in-process (quicker than a process each)
    from subconscious.injection.blockcache import load_blocks, store_blocks
    from subconscious.privacy.keys import KeyRing, Policy
    from subconscious.state.store.core import Store

    store = Store(alpha.home, "alpha", alpha.local / "locks", alpha.local / "clocks")
    ring = KeyRing.load(alpha.local / "keys")
    sids = [f"s{i:03d}" for i in range(300)]
    for sid in sids:
        store_blocks(store, ring, sid, {"guidance": f"SECRET-{sid}"}, policy=Policy(True, old))

    proc = alpha.spawn_key("rotate")
    deadline = time.monotonic() + 120
    new = None
    while time.monotonic() < deadline and proc.poll() is None:
        setting = store.setting("encryption") or {}
        if setting.get("keyId") not in (None, old):
            new = setting["keyId"]
            if any(new in alpha.session_file(s).read_text() for s in sids[:40]):
                break
        time.sleep(0.005)
    assert proc.poll() is None, "the rotation finished before it could be interrupted: " + proc.communicate()[0]
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert new is not None

    # every file is whole; some values are under the new key, some still under the old one
    kids = {}
    ring = KeyRing.load(alpha.local / "keys")
    for sid in sids:
        json.loads(alpha.session_file(sid).read_text())  # the view parses
        # the session as a reader sees it (view and host versions): a kill between this host's version and
        # the view's leaves the view one write behind, which the merge makes good
        kids[sid] = store.session(sid).last_block_values["guidance"]["kid"]
        assert load_blocks(store, ring, sid) == {"guidance": f"SECRET-{sid}"}  # both keys kept for reading
    assert set(kids.values()) == {old, new}
    assert alpha.status()["rotation"]["from"] == old

    # meanwhile beta (old key only) keeps working: reads what is still under the old key, writes nothing
    done = next(s for s in sids if kids[s] == new)
    todo = next(s for s in sids if kids[s] == old)
    before = {s: beta.session_file(s).read_bytes() for s in (done, todo)}
    assert beta.prompt(done, {"guidance": "SECRET-beta"})["cached"] == {}
    r = beta.prompt(todo, {"guidance": "SECRET-beta"})
    assert r["cached"] == {"guidance": f"SECRET-{todo}"} and r["outcome"]["mode"] == "withheld"
    assert {s: beta.session_file(s).read_bytes() for s in (done, todo)} == before

    r = alpha.key("rotate")
    assert r.returncode == 0 and "resuming the rotation" in r.stdout, r.stderr
    st = alpha.status()
    assert st["keyId"] == new and st["rotation"] is None and st["values"] == {"plain": 0, new: 300}
    only_new = {new: KeyRing.load(alpha.local / "keys")[new]}
    assert all(load_blocks(store, only_new, s) == {"guidance": f"SECRET-{s}"} for s in sids)
    assert_nothing_leaks([letta_home], [alpha, beta])


# --------------------------------------------------------------------------- real git clones


def test_two_git_clones_with_and_without_the_key(git_world):
    base = git_world.base
    a, b = git_world.clone("alpha"), git_world.clone("beta")
    a.write(".gitignore", (ROOT / "sync" / "gitignore").read_text())
    a.commit("ignore rules")
    a.push()
    assert b.pull().ok
    alpha, beta = Machine(base, "alpha", a.path), Machine(base, "beta", b.path)

    assert alpha.key("init", "--passphrase", "--scrypt-n", "1024", SUBCONSCIOUS_PASSPHRASE=PASSPHRASE).returncode == 0
    assert alpha.prompt("s1", V1)["outcome"]["mode"] == "sealed"
    a.commit("alpha: encryption on, session s1")
    a.push()

    r = b.pull()
    assert r.ok, r.output
    sealed = beta.session_file("s1").read_bytes()
    assert beta.prompt("s1", V2)["cached"] == {}
    assert beta.session_file("s1").read_bytes() == sealed
    assert beta.prompt("s2", V2)["outcome"]["mode"] == "withheld"
    b.commit("beta: session s2")
    assert b.push().ok

    r = a.pull()
    assert r.ok and not r.conflicted, r.output
    assert alpha.prompt("s1", V1)["cached"] == V1

    # the same passphrase on beta gives the same key, from the salt in the home: no file copied
    r = beta.key("init", "--passphrase", stdin=PASSPHRASE + "\n")
    assert r.returncode == 0, r.stderr
    assert beta.status()["keyId"] == alpha.status()["keyId"] and beta.status()["hasCurrentKey"]
    assert beta.prompt("s1", V1)["cached"] == V1
    assert beta.prompt("s2", V2)["outcome"]["mode"] == "sealed"  # now beta caches its own session too
    b.commit("beta: sealed")
    assert b.push().ok

    # nothing secret ever reached the remote's history
    history = git_world.run(["log", "--all", "-p", "--format=%H"], cwd=git_world.remote).stdout.encode()
    for text in (*V1.values(), *V2.values()):
        assert text.encode() not in history
    assert b"SECRET" not in history and PASSPHRASE.encode() not in history
    for m in (alpha, beta):
        for secret in m.key_secret():
            assert secret not in history
    assert_nothing_leaks([a.path, b.path], [alpha, beta])


# --------------------------------------------------------------------------- real Syncthing


@pytest.mark.syncthing
def test_a_syncthing_pair_with_and_without_the_key(syncthing_pair, tmp_path):
    pair = syncthing_pair
    alpha, beta = Machine(tmp_path, "alpha", pair.a_dir), Machine(tmp_path, "beta", pair.b_dir)
    assert alpha.key("init").returncode == 0
    assert alpha.prompt("s1", V1)["outcome"]["mode"] == "sealed"
    sealed = alpha.session_file("s1").read_bytes()
    pair.scan("A")
    pair.wait_file("B", ".letta/claude/session-s1.json", sealed)
    pair.wait_for(lambda: beta.status()["enabled"], "the setting reached B")

    assert beta.prompt("s1", V2)["cached"] == {}
    assert beta.prompt("s2", V2)["outcome"]["mode"] == "withheld"
    pair.scan("B")
    pair.wait_file("A", ".letta/claude/session-s2.json")
    pair.wait_in_sync()
    assert alpha.session_file("s1").read_bytes() == sealed
    assert beta.session_file("s1").read_bytes() == sealed
    assert alpha.prompt("s1", V1)["cached"] == V1
    assert not list(pair.a_dir.rglob("*sync-conflict*")) and not list(pair.b_dir.rglob("*sync-conflict*"))
    assert_nothing_leaks([pair.a_dir, pair.b_dir], [alpha, beta])


if __name__ == "__main__":
    sys.exit(hook_main(sys.argv[1:]))
