"""The block cache (subconscious.injection.blockcache) on a real store: sealed when the home says so, never
churned, never downgraded to plain text, and "not cached" when it cannot be opened."""

from __future__ import annotations

import json
import logging
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from subconscious.injection.blockcache import (
    encryption_findings,
    load_blocks,
    open_blocks,
    reseal_all,
    seal_blocks,
    store_blocks,
)
from subconscious.privacy.keys import Policy, write_policy
from subconscious.state.seal import Key, envelope_key_id, is_envelope
from subconscious.state.store.core import Store
from tests.harness.sizes import examples

K1, K2 = Key(bytes([1]) * 32), Key(bytes([2]) * 32)
ON1, ON2, OFF = Policy(True, K1.id), Policy(True, K2.id), Policy(False)
BLOCKS = {"guidance": "SECRET-guidance: the user is planning the ACME merger",
          "user_preferences": "SECRET-prefs: prefers tabs, hates emojis"}


def make_store(tmp_path: Path, host: str = "alpha", home: Path | None = None) -> Store:
    local = tmp_path / f"local-{host}"
    return Store(home or tmp_path / "home", host, local / "locks", local / "clocks")


def home_bytes(home: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(home.rglob("*")) if p.is_file())


def assert_no_plaintext(home: Path, values=BLOCKS) -> None:
    blob = home_bytes(home)
    for v in values.values():
        for part in v.split():
            if part.startswith("SECRET"):
                assert part.encode() not in blob
    assert b"ACME" not in blob and b"emojis" not in blob
    for key in (K1, K2):
        assert key.secret.hex().encode() not in blob


# --------------------------------------------------------------------------- pure rules

block_maps = st.dictionaries(st.text(max_size=12), st.text(max_size=60), max_size=6)


@settings(max_examples=examples(150))
@given(block_maps, block_maps)
def test_sealed_maps_round_trip_and_unchanged_values_keep_their_envelopes(first, second):
    ring = {K1.id: K1}
    stored, out = seal_blocks(None, first, ring, ON1, "s1")
    assert out.mode == "sealed" and out.sealed == len(first)
    assert all(is_envelope(v) and envelope_key_id(v) == K1.id for v in stored.values())
    assert open_blocks(stored, ring, "s1") == first
    again, out = seal_blocks(stored, first, ring, ON1, "s1")
    assert again == stored and out.sealed == 0 and out.kept == len(first)  # no churn
    after, out = seal_blocks(stored, second, ring, ON1, "s1")
    assert open_blocks(after, ring, "s1") == second
    for label, text in second.items():  # only changed values got a new envelope
        assert (after[label] is stored.get(label)) == (first.get(label) == text)


@settings(max_examples=examples(100))
@given(block_maps, block_maps)
def test_a_host_without_the_key_never_writes_plain_text_and_keeps_what_is_there(first, second):
    stored, _ = seal_blocks(None, first, {K1.id: K1}, ON1, "s1")
    # OFF with sealed values present: the setting has not reached this host yet
    for policy in (ON1, Policy(True, damaged=True)) + ((OFF,) if stored else ()):
        after, out = seal_blocks(stored, second, {}, policy, "s1")
        assert after == stored and out.mode == "withheld" and out.withheld == len(second)
        assert open_blocks(after, {}, "s1") == {}  # not cached here


@settings(max_examples=examples(100))
@given(block_maps)
def test_plain_text_when_off_and_nothing_is_sealed(values):
    stored, out = seal_blocks({"old": "x"}, values, {K1.id: K1}, OFF, "s1")
    assert stored == values and out.mode == "plain"
    assert open_blocks(stored, None, "s1") == values


def test_sealed_values_stay_sealed_when_this_host_thinks_encryption_is_off():
    stored, _ = seal_blocks(None, BLOCKS, {K1.id: K1}, ON1, "s1")
    after, out = seal_blocks(stored, dict(BLOCKS, guidance="new"), {K1.id: K1}, OFF, "s1")
    assert out.mode == "sealed" and out.key_id == K1.id and all(map(is_envelope, after.values()))
    assert open_blocks(after, {K1.id: K1}, "s1") == dict(BLOCKS, guidance="new")


def test_block_values_must_be_text():
    with pytest.raises(TypeError):
        seal_blocks(None, {"guidance": 3}, {}, OFF, "s1")  # type: ignore[dict-item]


# --------------------------------------------------------------------------- on the store


def test_plain_text_by_default(tmp_path):
    store = make_store(tmp_path)
    out = store_blocks(store, None, "s1", BLOCKS)
    assert out.mode == "plain"
    assert json.loads(store.session_path("s1").read_text())["lastBlockValues"] == BLOCKS
    assert load_blocks(store, None, "s1") == BLOCKS and load_blocks(store, None, "nope") == {}


def test_sealed_when_on_and_nothing_rewritten_when_unchanged(tmp_path):
    store = make_store(tmp_path)
    write_policy(store, ON1)
    out = store_blocks(store, {K1.id: K1}, "s1", BLOCKS)
    assert (out.mode, out.sealed) == ("sealed", 2)
    path = store.session_path("s1")
    before, mtime = path.read_bytes(), path.stat().st_mtime_ns
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_blocks(store, {K1.id: K1}, "s1") == BLOCKS
    assert_no_plaintext(store.home)
    for _ in range(3):  # hooks run on every prompt and tool call: no write, no churn for a sync engine
        out = store_blocks(store, {K1.id: K1}, "s1", dict(BLOCKS))
        assert (out.sealed, out.kept) == (0, 2)
    assert path.read_bytes() == before and path.stat().st_mtime_ns == mtime
    # one block changes: only its envelope changes
    store_blocks(store, {K1.id: K1}, "s1", dict(BLOCKS, guidance="SECRET-new guidance"))
    old, new = (json.loads(b)["lastBlockValues"] for b in (before, path.read_bytes()))
    assert old["user_preferences"] == new["user_preferences"] and old["guidance"] != new["guidance"]
    assert load_blocks(store, {K1.id: K1}, "s1")["guidance"] == "SECRET-new guidance"
    assert_no_plaintext(store.home, {"g": "SECRET-new guidance"})


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def test_a_host_without_the_key_sees_not_cached_and_keeps_the_ciphertext(tmp_path):
    alpha = make_store(tmp_path, "alpha")
    write_policy(alpha, ON1)
    store_blocks(alpha, {K1.id: K1}, "s1", BLOCKS)
    sealed = alpha.session_path("s1").read_bytes()
    beta = make_store(tmp_path, "beta")  # same home, no key
    assert load_blocks(beta, {}, "s1") == {}
    logger, handler = logging.getLogger("subconscious.injection.blockcache"), _Records()
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.DEBUG)  # not `logger.level =`: that keeps isEnabledFor's cache from an earlier test
    try:
        out = store_blocks(beta, {}, "s1", dict(BLOCKS, guidance="SECRET-beta saw this"))
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    logged = "\n".join(handler.lines)
    assert out.mode == "withheld" and out.key_id == K1.id
    assert json.loads(beta.session_path("s1").read_bytes())["lastBlockValues"] == json.loads(sealed)["lastBlockValues"]
    assert load_blocks(alpha, {K1.id: K1}, "s1") == BLOCKS
    assert K1.id in logged and "SECRET" not in logged
    # a new session on the keyless host: nothing cached, nothing in plain text
    store_blocks(beta, None, "s2", BLOCKS)
    assert beta.session(s := "s2").last_block_values == {} and load_blocks(beta, None, s) == {}
    assert_no_plaintext(alpha.home)


def test_tampered_and_moved_values_count_as_not_cached(tmp_path):
    store = make_store(tmp_path)
    write_policy(store, ON1)
    ring = {K1.id: K1}
    store_blocks(store, ring, "s1", BLOCKS)
    data = json.loads(store.session_path("s1").read_text())
    # tamper with one value
    ct = data["lastBlockValues"]["guidance"]["ct"]
    data["lastBlockValues"]["guidance"]["ct"] = ("A" if ct[0] != "A" else "B") + ct[1:]
    store.session_path("s1").write_text(json.dumps(data))
    assert load_blocks(store, ring, "s1") == {"user_preferences": BLOCKS["user_preferences"]}
    # swap the two labels: neither opens
    lbv = data["lastBlockValues"]
    data["lastBlockValues"] = {"guidance": lbv["user_preferences"], "user_preferences": lbv["guidance"]}
    store.session_path("s1").write_text(json.dumps(data))
    assert load_blocks(store, ring, "s1") == {}
    # copy the whole cache into another session's file
    store_blocks(store, ring, "s1", BLOCKS)
    moved = json.loads(store.session_path("s1").read_text())
    moved["sessionId"] = "s2"
    store.session_path("s2").write_text(json.dumps(moved))
    assert load_blocks(store, ring, "s2") == {}
    findings = encryption_findings(store, ring)
    assert [f["kind"] for f in findings] == ["damaged-envelope"]
    assert findings[0]["path"].endswith("session-s2.json") and findings[0]["severity"] == "error"
    # the next write replaces what does not open
    store_blocks(store, ring, "s2", BLOCKS)
    assert load_blocks(store, ring, "s2") == BLOCKS


def test_rotation_interrupted_midway_then_resumed(tmp_path):
    store = make_store(tmp_path)
    write_policy(store, ON1)
    ring = {K1.id: K1}
    values = {f"s{i}": {"guidance": f"SECRET-{i}", "prefs": "SECRET-same"} for i in range(6)}
    for sid, v in values.items():
        store_blocks(store, ring, sid, v)
    store_blocks(store, None, "plainold", {"guidance": "SECRET-plain"}, policy=OFF)  # from before encryption

    ring[K2.id] = K2
    write_policy(store, Policy(True, K2.id, rotation={"from": K1.id}))  # as `key rotate` writes it
    visited = []

    def crash_after_three(sid):
        visited.append(sid)
        if len(visited) == 3:
            raise KeyboardInterrupt  # the user pressed ^C, or the machine slept

    with pytest.raises(KeyboardInterrupt):
        reseal_all(store, ring, K2, after_each=crash_after_three)
    kids = {sid: {envelope_key_id(v) for v in store.session(sid).last_block_values.values()} for sid in values}
    assert {K1.id} in kids.values() and {K2.id} in kids.values()  # half done
    # meanwhile every value still reads (old key kept), and hooks write under the new key
    for sid, v in values.items():
        assert load_blocks(store, ring, sid) == v
    store_blocks(store, ring, "s5", dict(values["s5"], prefs="SECRET-changed"))
    values["s5"]["prefs"] = "SECRET-changed"

    report = reseal_all(store, ring, K2)  # resume
    assert report.done and report.unopened == {}
    for sid, v in values.items():
        assert {envelope_key_id(x) for x in store.session(sid).last_block_values.values()} == {K2.id}
        assert load_blocks(store, {K2.id: K2}, sid) == v  # the old key is no longer needed
    assert load_blocks(store, {K2.id: K2}, "plainold") == {"guidance": "SECRET-plain"}
    assert_no_plaintext(store.home, {"x": "SECRET-0 SECRET-same SECRET-plain SECRET-changed"})
    snapshot = home_bytes(store.home)
    assert reseal_all(store, ring, K2).changed == 0 and home_bytes(store.home) == snapshot  # idempotent


def test_reseal_leaves_values_under_unknown_keys_and_reports_them(tmp_path):
    store = make_store(tmp_path)
    store_blocks(store, {K1.id: K1}, "s1", BLOCKS, policy=ON1)
    report = reseal_all(store, {K2.id: K2}, K2)
    assert report.unopened == {K1.id: 2}
    assert {envelope_key_id(v) for v in store.session("s1").last_block_values.values()} == {K1.id}


def test_disable_turns_sealed_values_back_into_plain_text(tmp_path):
    store = make_store(tmp_path)
    store_blocks(store, {K1.id: K1}, "s1", BLOCKS, policy=ON1)
    reseal_all(store, {K1.id: K1}, None)
    assert store.session("s1").last_block_values == BLOCKS


def test_doctor_findings(tmp_path):
    alpha = make_store(tmp_path, "alpha")
    write_policy(alpha, ON2)
    store_blocks(alpha, {K1.id: K1}, "a1", BLOCKS, policy=ON1)  # under a key beta lacks
    store_blocks(alpha, {K1.id: K1}, "a2", BLOCKS, policy=ON1)
    store_blocks(alpha, None, "p1", BLOCKS, policy=OFF)  # plain text while on
    beta = make_store(tmp_path, "beta")
    findings = encryption_findings(beta, {})
    by_kind = {f["kind"]: f for f in findings}
    assert set(by_kind) == {"missing-active-key", "unknown-key", "plaintext-while-on"}
    unknown = by_kind["unknown-key"]
    assert unknown["key_id"] == K1.id and unknown["severity"] == "warning"
    # every copy on disk counts: the views and alpha's own versions (issue 29: not only the view)
    assert sorted(str(Path(p).relative_to(alpha.home)) for p in unknown["paths"]) == [
        "hosts/alpha/session-a1.json", "hosts/alpha/session-a2.json", "session-a1.json", "session-a2.json"]
    assert "8 cached block values in 4 files of the home" in unknown["message"]
    assert all(set(f) >= {"kind", "severity", "path", "message"} for f in findings)
    json.dumps(findings)  # plain data
    # a host with the old key only: the values are readable but under an old key
    kinds = {f["kind"] for f in encryption_findings(alpha, {K1.id: K1, K2.id: K2})}
    assert kinds == {"old-key", "plaintext-while-on"}
    write_policy(alpha, Policy(True, K2.id, rotation={"from": K1.id, "host": "alpha", "started": "t"}))
    assert "rotation-unfinished" in {f["kind"] for f in encryption_findings(alpha, {K2.id: K2})}
    blob = json.dumps(encryption_findings(beta, {}))
    assert "SECRET" not in blob


def test_doctor_flags_a_key_ring_inside_the_synced_home(tmp_path):
    from subconscious.privacy.keys import KeyRing

    store = make_store(tmp_path)
    ring = KeyRing.load(tmp_path / "home" / "keys")  # e.g. SUBCONSCIOUS_STATE_DIR under LETTA_HOME
    findings = encryption_findings(store, ring, policy=OFF, synced_dirs=(tmp_path / "home",))
    assert [(f["kind"], f["severity"]) for f in findings] == [("keys-in-synced-dir", "error")]
    assert encryption_findings(make_store(tmp_path), KeyRing.load(tmp_path / "local"), policy=OFF,
                               synced_dirs=(tmp_path / "home",)) == []

