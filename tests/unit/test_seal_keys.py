"""Keys (subconscious.privacy.keys): machine-local key ring, passphrase derivation, export/import, the home setting."""

from __future__ import annotations

import os
import stat
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from subconscious.privacy.keys import (
    KeyRing,
    KeysError,
    Policy,
    ScryptParams,
    check_outside,
    derive_key,
    export_key,
    import_key,
    policy_of,
)
from subconscious.state.clock import Stamp
from subconscious.state.records import Setting
from subconscious.state.seal import Key, open_envelope, seal
from tests.harness.sizes import examples

FAST = dict(n=2**10, r=8, p=1)  # cheap scrypt for tests; the default cost is exercised once below


def test_the_same_passphrase_on_two_machines_gives_one_key(tmp_path):
    params = ScryptParams.new(**FAST)
    setting = Policy(True, None, params).to_json()  # what machine A stores in the home
    # machine B knows only the home setting (salt, cost) and the passphrase
    params_b = Policy.from_json(dict(setting, keyId="k" + "0" * 16)).kdf
    a = derive_key("correct horse battery staple", params)
    b = derive_key("correct horse battery staple", params_b)
    assert a == b and a.id == b.id
    ring_a, ring_b = KeyRing.load(tmp_path / "a"), KeyRing.load(tmp_path / "b")
    ring_a.add(a, source="passphrase")
    ring_b.add(b, source="passphrase")
    env = seal(a, "memory", session_id="s1", label="guidance")
    assert open_envelope(KeyRing.load(tmp_path / "b"), env, session_id="s1", label="guidance") == "memory"


def test_another_passphrase_or_salt_gives_another_key():
    params = ScryptParams.new(**FAST)
    base = derive_key("correct horse battery staple", params)
    assert derive_key("correct horse battery stapler", params).id != base.id
    assert derive_key("correct horse battery staple", ScryptParams.new(**FAST)).id != base.id


def test_passphrases_are_unicode_normalised():
    params = ScryptParams.new(**FAST)
    composed = "crème brûlée, très sûr"
    decomposed = unicodedata.normalize("NFD", composed)
    assert composed != decomposed
    assert derive_key(composed, params).id == derive_key(decomposed, params).id


def test_default_scrypt_cost_is_the_owasp_minimum():
    p = ScryptParams.new()
    assert (p.n, p.r, p.p) == (2**17, 8, 1) and len(p.salt) >= 16
    derive_key("x" * 12, p)  # it runs within hashlib's memory limit


@pytest.mark.parametrize("bad", [
    {"name": "argon2", "salt": "AAAAAAAAAAAAAAAAAAAAAA", "n": 1024, "r": 8, "p": 1},
    {"name": "scrypt", "salt": "AAAA", "n": 1024, "r": 8, "p": 1},
    {"name": "scrypt", "salt": "AAAAAAAAAAAAAAAAAAAAAA", "n": 1000, "r": 8, "p": 1},
    {"name": "scrypt", "salt": "AAAAAAAAAAAAAAAAAAAAAA", "n": 2**30, "r": 8, "p": 1},
    {"name": "scrypt", "salt": "AAAAAAAAAAAAAAAAAAAAAA", "n": 1024, "r": True, "p": 1},
])
def test_unusable_kdf_parameters_are_refused(bad):
    with pytest.raises(KeysError):
        ScryptParams.from_json(bad)


def test_empty_passphrase_is_refused():
    with pytest.raises(KeysError):
        derive_key("", ScryptParams.new(**FAST))


@settings(max_examples=examples(50))
@given(st.binary(min_size=32, max_size=32))
def test_export_import_round_trip(secret):
    key = Key(secret)
    line = export_key(key)
    assert import_key(line) == key and import_key(f"  {line}\n") == key
    assert "\n" not in line and key.id in line


def test_a_damaged_export_line_is_refused_with_a_reason():
    line = export_key(Key(bytes(32)))
    prefix, kid, secret = line.split(":")
    typo = secret[:5] + ("A" if secret[5] != "A" else "B") + secret[6:]
    for bad in ("", "hello", f"{prefix}:{kid}", f"{prefix}:{kid}:{secret[:-3]}", f"{prefix}:{kid}:{typo}",
                f"other:{kid}:{secret}"):
        with pytest.raises(KeysError):
            import_key(bad)


def test_key_files_are_private_and_reload(tmp_path):
    keys_dir = tmp_path / "local" / "keys"
    ring = KeyRing.load(keys_dir)
    assert len(ring) == 0 and not keys_dir.exists()
    key = Key.generate()
    path = ring.add(key, source="generated")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(keys_dir.stat().st_mode) == 0o700
    again = KeyRing.load(keys_dir)
    assert again[key.id] == key and again.info[key.id].source == "generated" and again.problems == []
    assert key.secret.hex() not in repr(again)
    assert again.remove(key.id) and not path.exists() and KeyRing.load(keys_dir).get(key.id) is None


def test_damaged_or_exposed_key_files_are_reported_not_changed(tmp_path):
    ring = KeyRing.load(tmp_path)
    good = Key.generate()
    path = ring.add(good, source="generated")
    (tmp_path / ("k" + "1" * 16 + ".key")).write_text("{not json")
    renamed = tmp_path / ("k" + "2" * 16 + ".key")
    renamed.write_text(path.read_text())  # a key file under another key's name
    os.chmod(path, 0o644)
    loaded = KeyRing.load(tmp_path)
    kinds = sorted(p["kind"] for p in loaded.problems)
    assert kinds == ["key-file-damaged", "key-file-damaged", "key-file-permissions"]
    assert loaded.get(good.id) == good  # still usable (doctor says to chmod)
    assert (tmp_path / ("k" + "1" * 16 + ".key")).read_text() == "{not json"
    assert all(good.secret.hex() not in p["message"] for p in loaded.problems)


def test_keys_are_never_kept_inside_letta_home(tmp_path):
    letta_home = tmp_path / "Dropbox"
    ring = KeyRing.load(letta_home / "local" / "keys")
    with pytest.raises(KeysError, match="synced"):
        ring.add(Key.generate(), source="generated", refuse_under=(letta_home,))
    assert not (letta_home / "local").exists()
    # through a symlink too
    (tmp_path / "link").symlink_to(letta_home, target_is_directory=True)
    letta_home.mkdir(exist_ok=True)
    with pytest.raises(KeysError):
        check_outside(tmp_path / "link" / "keys", letta_home)
    check_outside(tmp_path / "local" / "keys", letta_home)  # elsewhere: fine


def test_the_home_setting_round_trips_and_a_damaged_one_fails_closed():
    params = ScryptParams.new(**FAST)
    p = Policy(True, "k" + "a" * 16, params, {"from": "k" + "b" * 16, "host": "alpha", "started": "t"})
    assert Policy.from_json(p.to_json()) == p
    assert Policy.from_json(None) == Policy()  # never set: off
    assert Policy.from_json(Policy(False).to_json()) == Policy(False)
    for bad in ({"enabled": "yes"}, {"enabled": True}, {"enabled": True, "keyId": "../../x"}, [1],
                {"enabled": True, "keyId": "k" + "a" * 16, "kdf": {"name": "pbkdf2"}}):
        damaged = Policy.from_json(bad)
        assert damaged.enabled and damaged.damaged and damaged.key_id is None
    settings_map = {"encryption": Setting(p.to_json(), Stamp(1, 0), "alpha")}
    assert policy_of(settings_map) == p and policy_of({}) == Policy()
