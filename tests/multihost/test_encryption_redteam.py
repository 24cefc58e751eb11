"""Issue 29, red team: what a holder of a retired key (the lost laptop, still syncing) can do to a home
whose key was rotated, through the shared setting and the block cache. Machines as in
test_encryption_every_copy: ``subconscious key`` as a real process, the cache read and written as the
hooks do."""

from __future__ import annotations

import json

from subconscious.state.seal import envelope_key_id, open_envelope, seal
from subconscious.state.store.core import Store

from .test_encryption_every_copy import PLANTED, SECRETS, Machine, home, set_as  # noqa: F401

BIG = 2**53  # the highest version an envelope may carry: newer than anything a machine has seen


def _rotated(tmp, letta):
    alpha = Machine(tmp, "alpha", letta)
    assert alpha.key("init").returncode == 0
    k1 = alpha.status()["keyId"]
    k1_key = alpha.ring()[k1]  # the lost laptop holds it
    alpha.cache("s1", SECRETS)
    assert alpha.key("rotate").returncode == 0
    k2 = alpha.status()["keyId"]
    assert k2 != k1 and k1 in alpha.ring()  # rotated without --drop-old: the old key is still here
    return alpha, k1, k1_key, k2


def _plant(tmp, alpha, key, sid="s1"):
    evil = Store(alpha.home, "mallory", tmp / "m" / "locks", tmp / "m" / "clocks")
    evil.update_session(sid, lambda cur: cur.evolve(last_block_values={
        "guidance": seal(key, PLANTED, session_id=sid, label="guidance", version=BIG)}))


def test_a_rotation_marker_put_back_by_the_lost_laptop_does_not_make_its_key_readable_again(home):
    tmp, letta = home
    alpha, k1, k1_key, k2 = _rotated(tmp, letta)
    # the laptop writes the setting as it was during the rotation: the current key, "rotating from" its own
    set_as(Machine(tmp, "mallory", letta), {"enabled": True, "keyId": k2, "generation": 2, "kdf": None,
                                           "rotation": {"from": k1, "host": "alpha", "started": "x"}})
    _plant(tmp, alpha, k1_key)
    assert PLANTED not in alpha.cached("s1").values()  # the retired key opens nothing shown to Claude


def test_key_init_or_rotate_never_turns_a_value_under_a_retired_key_into_an_authentic_one(home):
    tmp, letta = home
    for verb in ("init", "rotate"):
        (tmp / verb / "Sync" / "letta").mkdir(parents=True)
        alpha, k1, k1_key, k2 = _rotated(tmp / verb, tmp / verb / "Sync" / "letta")
        _plant(tmp / verb, alpha, k1_key)
        assert alpha.cached("s1") == {}  # refused: a retired key
        old_key = [f for f in alpha.status()["findings"] if f["kind"] == "old-key"]
        assert old_key and "not shown" in old_key[0]["message"] and "still opens" not in old_key[0]["message"]
        # doctor calls it old-key and says to run `key init`; init (or rotate) re-seals the home
        r = alpha.key(verb)
        assert r.returncode == 0, r.stderr
        assert PLANTED not in alpha.cached("s1").values(), verb
        stored = alpha.store().session("s1").last_block_values or {}
        for label, value in stored.items():  # nothing under the current key carries the planted text
            if envelope_key_id(value) in alpha.ring():
                assert open_envelope(alpha.ring(), value, session_id="s1", label=label) != PLANTED, verb


def test_a_machine_without_the_new_key_is_not_pulled_back_to_the_old_one(home):
    tmp, letta = home
    alpha, beta = Machine(tmp, "alpha", letta), Machine(tmp, "beta", letta)
    assert alpha.key("init").returncode == 0
    k1 = alpha.status()["keyId"]
    assert beta.key("import", stdin=alpha.key("export").stdout).returncode == 0
    beta.cache("s1", {"guidance": "x"})  # beta pins k1
    assert alpha.key("rotate").returncode == 0  # the laptop with k1 was lost: k2 is not on beta yet
    k2 = alpha.status()["keyId"]
    assert beta.cache("s2", SECRETS).mode == "withheld"  # beta follows k2, which it lacks: nothing cached
    # the laptop puts its own key back as the home's, with a "newer" generation
    set_as(Machine(tmp, "mallory", letta), {"enabled": True, "keyId": k1, "generation": 7, "kdf": None,
                                           "rotation": None})
    beta.cache("s3", SECRETS)
    stored = beta.store().session("s3")
    for value in ((stored.last_block_values or {}) if stored else {}).values():
        assert envelope_key_id(value) != k1, "beta sealed new text under the lost laptop's key"
    assert beta.status()["keyId"] == k2 and beta.status()["pinned"]


def test_a_costly_scrypt_setting_from_the_folder_is_refused_not_run(home):
    tmp, letta = home
    alpha, beta = Machine(tmp, "alpha", letta), Machine(tmp, "beta", letta)
    phrase = "correct horse battery staple"
    assert alpha.key("init", "--passphrase", SUBCONSCIOUS_PASSPHRASE=phrase).returncode == 0
    hostile = alpha.store().setting("encryption")
    hostile["kdf"].update(n=2**22, r=32, p=16)  # 16 GiB and minutes of work, for whoever joins next
    set_as(Machine(tmp, "mallory", letta), hostile)
    assert "cannot be read" in json.dumps(alpha.doctor())  # a damaged setting: alpha keeps its pinned key
    r = beta.key("init", "--passphrase", SUBCONSCIOUS_PASSPHRASE=phrase)  # no traceback (Machine.key checks)
    assert "maxmem" not in r.stderr
    # and this machine's own choice of a cost it cannot compute is a message, not a traceback
    r = Machine(tmp, "gamma", tmp / "other").key("init", "--passphrase", "--scrypt-n", str(2**22),
                                                 SUBCONSCIOUS_PASSPHRASE=phrase)
    assert r.returncode == 1 and "scrypt parameters" in r.stderr, r.stderr


def test_an_archive_exported_into_the_home_before_key_init_is_found_and_named(home):
    import subprocess
    import sys

    tmp, letta = home
    alpha, beta = Machine(tmp, "alpha", letta), Machine(tmp, "beta", letta)
    beta.cache("s1", SECRETS)  # plain: encryption is off
    (beta.home / "backups").mkdir(exist_ok=True)
    out = beta.home / "backups" / "before-encryption.tar.gz"  # a backup kept in the synced folder
    r = subprocess.run([sys.executable, "-m", "subconscious", "export", str(out)], capture_output=True,
                       text=True, env=beta.env, cwd=tmp, timeout=120)
    assert r.returncode == 0 and out.exists(), r.stderr
    r = alpha.key("init")
    assert r.returncode == 0
    assert "before-encryption.tar.gz" in r.stderr and "export again" in r.stderr  # named, with a fix
    st = alpha.status()
    assert str(out) in st["onDisk"]["unreadableFiles"]  # "clean" does not mean clean while it is there
    kinds = {f["kind"]: f for f in alpha.doctor()["findings"]}
    assert "unreadable-cache" in kinds and str(out) in json.dumps(kinds["unreadable-cache"]), kinds
    out.unlink()
    assert alpha.status()["onDisk"]["unreadableFiles"] == []


def test_a_value_at_the_highest_version_does_not_stop_the_cache_from_being_written():
    from subconscious.injection.blockcache import open_blocks, seal_blocks
    from subconscious.privacy.keys import Policy
    from subconscious.state.seal import Key

    key = Key.generate()
    ring, policy = {key.id: key}, Policy(True, key.id)
    top = seal(key, "old", session_id="s1", label="guidance", version=BIG)  # sealed by a holder of the key
    stored, outcome = seal_blocks({"guidance": top}, {"guidance": "new"}, ring, policy, "s1", seen={"guidance": BIG})
    assert outcome.mode == "sealed"
    assert open_blocks(stored, ring, "s1", policy, seen={"guidance": BIG}) == {"guidance": "new"}


def test_a_file_name_from_the_folder_cannot_turn_a_printed_fix_into_another_command(home):
    import subprocess

    tmp, letta = home
    alpha = Machine(tmp, "alpha", letta)
    assert alpha.key("init").returncode == 0
    name = "session-q'; touch PWNED; echo '\x1b]0;title\x07.json"  # named by whoever writes the folder
    (alpha.home / name).write_text('{"sessionId": "q", "lastBlockValues": {"guidance": "x"')  # not JSON
    r = alpha.key("init")
    assert r.returncode == 0 and "\x1b" not in r.stderr and "\x07" not in r.stderr  # no terminal control
    fix = next(line for line in r.stderr.splitlines() if "touch PWNED" in line).split("fix: ", 1)[1]
    command = fix.split(": ", 1)[1] if fix.startswith("check it") else fix
    (tmp / "run").mkdir()
    subprocess.run(["sh", "-c", command], cwd=tmp / "run", capture_output=True, timeout=30)
    assert not (tmp / "run" / "PWNED").exists(), command  # the user pasting the fix runs only the fix
    assert not (alpha.home / name).exists()  # and it does what it says


def test_a_format_1_value_from_a_machine_not_yet_upgraded_is_named_as_such(home, caplog):
    """The upgrade path: an older subconscious seals format 1 (no version), which reads as version 0 here.
    After this machine saw a versioned value it cannot tell that from a put-back copy, so it is not used;
    the log must say how to stop it (upgrade every machine), not only "put back from an old copy"."""
    import base64
    import logging
    import os

    from subconscious.state.seal import associated_data

    tmp, letta = home
    alpha = Machine(tmp, "alpha", letta)
    assert alpha.key("init").returncode == 0
    alpha.cache("s1", {"guidance": "v-new"})
    assert alpha.cached("s1") == {"guidance": "v-new"}  # seen: version 1
    key = next(iter(alpha.ring().values()))
    nonce = os.urandom(12)
    ct = key.cipher().encrypt(nonce, b"v-old-host", associated_data(1, "A256GCM", key.id, "s1", "guidance"))
    b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()  # noqa: E731
    old = {"sealed": 1, "alg": "A256GCM", "kid": key.id, "nonce": b64(nonce), "ct": b64(ct)}
    other = Store(alpha.home, "oldhost", tmp / "o" / "locks", tmp / "o" / "clocks")
    other.update_session("s1", lambda cur: cur.evolve(last_block_values={"guidance": old}))
    with caplog.at_level(logging.WARNING, logger="subconscious.injection.blockcache"):
        assert alpha.cached("s1") == {}
    assert "upgrade subconscious" in caplog.text and "v-old-host" not in caplog.text
    alpha.cache("s1", {"guidance": "v-old-host"})  # the next write seals it again, versioned, and it is read
    assert alpha.cached("s1") == {"guidance": "v-old-host"}


def test_a_generation_at_the_top_from_the_folder_is_not_followed(home):
    """A setting naming a key nobody has at generation 2**53 - 1: followed, it would be pinned on every
    machine, and the next `key init` (generation + 1) would write a setting nobody can read."""
    from subconscious.state.seal import Key

    tmp, letta = home
    alpha = Machine(tmp, "alpha", letta)
    assert alpha.key("init").returncode == 0
    k1 = alpha.status()["keyId"]
    set_as(Machine(tmp, "mallory", letta), {"enabled": True, "keyId": Key.generate().id, "generation": 2**53 - 1,
                                           "kdf": None, "rotation": None})
    assert alpha.cache("s1", SECRETS).mode == "sealed"  # still under the pinned key
    assert envelope_key_id(alpha.store().session("s1").last_block_values["guidance"]) == k1
    assert alpha.status()["pinned"]
    r = alpha.key("init")  # puts the home's setting back, readable
    assert r.returncode == 0 and not alpha.status()["pinned"] and alpha.status()["keyId"] == k1, r.stderr
