"""``subconscious key`` as a user runs it (real processes): init, export, import, passphrase, rotate,
status, disable, and every subcommand's --help."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from subconscious.injection.blockcache import load_blocks, store_blocks
from subconscious.privacy.keys import KeyRing, Policy
from subconscious.state.seal import envelope_key_id
from subconscious.state.store.core import Store

ROOT = Path(__file__).resolve().parents[2]
SUBCOMMANDS = ["init", "export", "import", "rotate", "status", "disable", "follow"]
PASSPHRASE = "correct horse battery staple"
BLOCKS = {"guidance": "SECRET-guidance for the merger", "pending_items": "SECRET-call the lawyer"}


class Machine:
    """One simulated machine: its own host id and machine-local state dir, the shared home."""

    def __init__(self, tmp: Path, host: str, letta_home: Path):
        self.host, self.tmp = host, tmp
        self.local = tmp / f"local-{host}"
        self.letta_home = letta_home
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "SUBCONSCIOUS_"))}
        self.env.update(HOME=str(tmp / "user"), LETTA_HOME=str(letta_home), SUBCONSCIOUS_HOST=host,
                        SUBCONSCIOUS_STATE_DIR=str(self.local), PYTHONPATH=str(ROOT))

    @property
    def home(self) -> Path:
        return self.letta_home / ".letta" / "claude"

    def key(self, *args: str, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "subconscious", "key", *args], capture_output=True,
                              text=True, input=stdin if stdin is not None else "", env={**self.env, **env},
                              cwd=self.tmp, timeout=120)

    def store(self) -> Store:
        return Store(self.home, self.host, self.local / "locks", self.local / "clocks")

    def ring(self) -> KeyRing:
        return KeyRing.load(self.local / "keys")

    def status(self) -> dict:
        r = self.key("status", "--json")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)


@pytest.fixture
def machines(tmp_path):
    letta_home = tmp_path / "Dropbox" / "letta"
    letta_home.mkdir(parents=True)
    return Machine(tmp_path, "alpha", letta_home), Machine(tmp_path, "beta", letta_home)


def all_bytes(*dirs: Path) -> bytes:
    return b"".join(p.read_bytes() for d in dirs for p in sorted(d.rglob("*")) if p.is_file())


def test_every_subcommand_has_help(machines):
    a, _ = machines
    top = a.key("--help")
    assert top.returncode == 0 and all(c in top.stdout for c in SUBCOMMANDS)
    for c in SUBCOMMANDS:
        r = a.key(c, "--help")
        assert r.returncode == 0 and f"usage: subconscious key {c}" in r.stdout, r.stderr
    assert a.key().returncode == 2


def test_init_export_import_between_two_machines(machines):
    a, b = machines
    store_blocks(a.store(), None, "s1", BLOCKS)  # cached before encryption was turned on
    r = a.key("init")
    assert r.returncode == 0, r.stderr
    st = a.status()
    kid = st["keyId"]
    assert st["enabled"] and st["hasCurrentKey"] and st["values"] == {"plain": 0, kid: 2}
    assert load_blocks(a.store(), a.ring(), "s1") == BLOCKS
    # the other machine knows encryption is on, but has no key: it says how to get it
    r = b.key("init")
    assert r.returncode == 1 and kid in r.stderr and "key import" in r.stderr
    assert b.status()["hasCurrentKey"] is False
    exported = a.key("export")
    assert exported.returncode == 0 and exported.stdout.strip().startswith("subconscious-key-1:" + kid)
    assert "anyone who has it" in exported.stderr
    # import from stdin (a pipe), and from the environment
    r = b.key("import", stdin=exported.stdout)
    assert r.returncode == 0 and kid in r.stdout, r.stderr
    assert load_blocks(b.store(), b.ring(), "s1") == BLOCKS
    c = Machine(a.tmp, "gamma", a.letta_home)
    assert c.key("import", SUBCONSCIOUS_KEY=exported.stdout.strip()).returncode == 0
    assert c.status()["hasCurrentKey"]
    # a mangled line is refused and nothing is added
    d = Machine(a.tmp, "delta", a.letta_home)
    r = d.key("import", stdin=exported.stdout.strip()[:-2] + "\n")
    assert r.returncode == 1 and "copy the whole line" in r.stderr and len(d.ring()) == 0
    # the key itself is only on the machines, never in the home
    line = exported.stdout.strip()
    assert line.split(":")[2].encode() not in all_bytes(a.letta_home)
    assert b"SECRET" not in all_bytes(a.letta_home)
    for m in (a, b):
        for p in (m.local / "keys").iterdir():
            assert stat.S_IMODE(p.stat().st_mode) == 0o600


def test_a_passphrase_on_two_machines_yields_one_key(machines):
    a, b = machines
    r = a.key("init", "--passphrase", "--scrypt-n", "1024", SUBCONSCIOUS_PASSPHRASE=PASSPHRASE)
    assert r.returncode == 0, r.stderr
    kid = a.status()["keyId"]
    assert a.status()["passphrase"] is True
    store_blocks(a.store(), a.ring(), "s1", BLOCKS)
    # a wrong passphrase is refused, and adds nothing
    r = b.key("init", "--passphrase", stdin="correct horse battery stable\n")
    assert r.returncode == 1 and "does not give" in r.stderr and len(b.ring()) == 0
    # the right one (typed into a pipe) gives the same key: no file was copied
    r = b.key("init", "--passphrase", stdin=PASSPHRASE + "\n")
    assert r.returncode == 0, r.stderr
    assert list(b.ring()) == [kid] and b.ring().info[kid].source == "passphrase"
    assert load_blocks(b.store(), b.ring(), "s1") == BLOCKS
    # the passphrase is nowhere in the home, the key rings or the logs
    blob = all_bytes(a.letta_home, a.local, b.local)
    assert PASSPHRASE.encode() not in blob and b"SECRET" not in all_bytes(a.letta_home)
    home_setting = a.store().setting("encryption")
    assert home_setting["kdf"]["name"] == "scrypt" and home_setting["keyId"] == kid


def test_rotate_then_drop_old_keys_and_the_other_machine_needs_the_new_key(machines):
    a, b = machines
    assert a.key("init").returncode == 0
    old = a.status()["keyId"]
    assert b.key("import", stdin=a.key("export").stdout).returncode == 0
    for i in range(4):
        store_blocks(a.store(), a.ring(), f"s{i}", dict(BLOCKS, guidance=f"SECRET-{i}"))
    r = a.key("rotate")
    assert r.returncode == 0 and "rotation done" in r.stdout, r.stderr
    st = a.status()
    new = st["keyId"]
    assert new != old and st["rotation"] is None and st["values"] == {"plain": 0, new: 8}
    assert {k["id"] for k in st["keys"]} == {old, new}  # the old key is kept unless asked
    for i in range(4):
        assert load_blocks(a.store(), {new: a.ring()[new]}, f"s{i}")["guidance"] == f"SECRET-{i}"
    # beta holds only the old key: not cached there, and it writes nothing in plain text
    assert load_blocks(b.store(), b.ring(), "s0") == {}
    out = store_blocks(b.store(), b.ring(), "s0", BLOCKS)
    assert out.mode == "withheld" and b"SECRET" not in all_bytes(a.letta_home)
    assert {f["kind"] for f in b.status()["findings"]} == {"missing-active-key", "unknown-key"}
    # rotating again, dropping keys no longer in use
    r = a.key("rotate", "--drop-old")
    assert r.returncode == 0, r.stderr
    assert [k["id"] for k in a.status()["keys"]] == [a.status()["keyId"]]


def test_rotation_resumes_after_an_interruption(machines):
    a, _ = machines
    assert a.key("init").returncode == 0
    old = a.status()["keyId"]
    for i in range(5):
        store_blocks(a.store(), a.ring(), f"s{i}", {"guidance": f"SECRET-{i}"})
    # an interrupted rotation, as `key rotate` leaves it: new key in the ring and the setting, half re-sealed
    from subconscious.injection.blockcache import reseal_all
    from subconscious.privacy.keys import write_policy
    from subconscious.state.seal import Key

    new = Key.generate()
    ring = a.ring()
    ring.add(new, source="generated")
    from subconscious.privacy.keys import confirm, load_pin, save_pin

    keys, home = a.ring().directory, a.store().home  # `key rotate` confirms the key it made before naming it
    save_pin(keys, home, confirm(load_pin(keys, home), new.id))
    write_policy(a.store(), Policy(True, new.id, rotation={"from": old, "host": "alpha", "started": "t"},
                                   generation=2))  # one more than `key init`'s, as `key rotate` writes it

    def stop(sid):
        if sid == "s2":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        reseal_all(a.store(), ring, new, after_each=stop)
    assert a.status()["values"] == {"plain": 0, old: 2, new.id: 3}
    assert any(f["kind"] == "rotation-unfinished" for f in a.status()["findings"])
    r = a.key("rotate")  # resumes: no third key
    assert r.returncode == 0 and "resuming the rotation" in r.stdout, r.stderr
    st = a.status()
    assert st["keyId"] == new.id and st["values"] == {"plain": 0, new.id: 5} and st["rotation"] is None
    assert len(st["keys"]) == 2


def test_disable_stores_plain_text_again(machines):
    a, b = machines
    assert a.key("init").returncode == 0
    store_blocks(a.store(), a.ring(), "s1", BLOCKS)
    r = a.key("disable")
    assert r.returncode == 0, r.stderr
    assert a.status()["enabled"] is False and a.store().session("s1").last_block_values == BLOCKS
    assert load_blocks(b.store(), None, "s1") == BLOCKS


def test_keys_are_refused_inside_letta_home(tmp_path):
    letta_home = tmp_path / "sync"
    m = Machine(tmp_path, "alpha", letta_home)
    m.env["SUBCONSCIOUS_STATE_DIR"] = str(letta_home / "state")
    m.local = letta_home / "state"
    r = m.key("init")
    assert r.returncode == 1 and "synced" in r.stderr
    assert not (letta_home / "state" / "keys").exists()
    assert m.store().setting("encryption") is None  # nothing turned on


def test_status_and_export_write_nothing(machines):
    a, _ = machines
    assert a.key("status").returncode == 0
    assert a.key("export").returncode == 1
    assert not a.home.exists() or not any(a.home.iterdir())


def test_sealed_envelopes_name_the_key(machines):
    a, _ = machines
    assert a.key("init").returncode == 0
    store_blocks(a.store(), a.ring(), "s1", BLOCKS)
    kid = a.status()["keyId"]
    raw = json.loads(a.store().session_path("s1").read_text())["lastBlockValues"]
    assert {envelope_key_id(v) for v in raw.values()} == {kid}


def test_an_old_key_named_as_the_next_generation_waits_for_key_follow(machines):
    """Red team finding: beta holds an old key (imported to open backups) that never was the home's key on
    beta; a writer of the folder who has it names it as a newer generation. beta keeps sealing under the key
    it pinned and says why, until `key follow` here confirms it; a key beta never held is followed at once."""
    from subconscious.privacy.keys import write_policy
    from subconscious.state.seal import Key

    a, b = machines
    assert a.key("init").returncode == 0
    assert b.key("import", stdin=a.key("export").stdout).returncode == 0
    pinned = a.status()["keyId"]
    old = Key.generate()
    from subconscious.privacy.keys import export_key

    assert b.key("import", stdin=export_key(old)).returncode == 0  # "to open old backups"
    mallory = Store(a.home, "mallory", a.tmp / "m" / "locks", a.tmp / "m" / "clocks")
    write_policy(mallory, Policy(True, old.id, generation=5))
    store_blocks(b.store(), b.ring(), "s1", BLOCKS)
    assert envelope_key_id(b.store().session("s1").last_block_values["guidance"]) == pinned
    st = b.status()
    assert st["keyId"] == pinned and "key follow" in (st.get("pinned") or ""), st
    r = b.key("follow")
    assert r.returncode == 0 and old.id in r.stdout, r.stderr
    assert b.status()["keyId"] == old.id and not b.status().get("pinned")
    assert b.key("follow").returncode == 1  # nothing left to confirm: one line, no traceback
    assert "Traceback" not in b.key("follow").stderr
