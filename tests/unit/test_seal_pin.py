"""Issue 29: the machine-local pin (``keys.effective_policy``): whatever a writer of the synced folder puts in
the shared setting, a machine that pinned encryption never follows it off or back to an older key."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from subconscious.privacy.keys import Pin, Policy, effective_policy, load_pin, pin_path, save_pin
from subconscious.state.seal import Key
from tests.harness.sizes import examples

KEYS = [Key.generate() for _ in range(4)]
RING = {k.id: k for k in KEYS[:3]}  # the fourth is nobody's here


def shared_settings():
    on = st.builds(lambda k, g, rot: Policy(True, KEYS[k].id, generation=g,
                                            rotation={"from": KEYS[rot].id} if rot is not None else None),
                   st.integers(0, 3), st.integers(1, 6), st.none() | st.integers(0, 3))
    return st.one_of(on, st.just(Policy(False)), st.just(Policy(True, damaged=True)))


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(shared_settings(), min_size=1, max_size=12))
def test_a_pinned_machine_never_goes_off_or_back(writes):
    pin = Pin(True, KEYS[0].id, 1)
    for shared in writes:
        policy, new = effective_policy(shared, pin, RING)
        assert policy.enabled  # never turned off from the folder
        assert policy.key_id not in pin.retired
        assert policy.generation >= pin.generation
        for kid in pin.retired:  # a retired key is never read again here, not even as "rotating from"
            assert not policy.reads_with(kid)
        if policy.key_id != pin.key_id:  # followed forward only: a newer generation
            assert policy.generation > pin.generation and policy.key_id == shared.key_id
        if new is not None:
            assert new.generation >= pin.generation and new.enabled
            assert pin.key_id in new.retired or new.key_id == pin.key_id
            pin = new


def test_what_is_followed_and_what_is_not():
    k1, k2 = KEYS[0].id, KEYS[1].id
    pin = Pin(True, k1, 1)
    off, _ = effective_policy(Policy(False), pin, RING)
    assert off.enabled and off.key_id == k1 and "key disable" in off.pinned
    forward, new = effective_policy(Policy(True, k2, generation=2), pin, RING)
    assert forward.key_id == k2 and forward.pinned is None and new.key_id == k2 and k1 in new.retired
    back, _ = effective_policy(Policy(True, k1, generation=9), new, RING)
    assert back.key_id == k2 and back.pinned  # the retired key is never current again
    nobody, keep = effective_policy(Policy(True, KEYS[3].id, generation=3), new, RING)
    # followed (nothing cached: no key here yet) and pinned: the key it replaces is retired here, so the
    # holder of that key cannot set it back while this machine waits for the new one
    assert nobody.key_id == KEYS[3].id and keep.key_id == KEYS[3].id and k2 in keep.retired
    assert effective_policy(Policy(True, k2, generation=9), keep, RING)[0].key_id == KEYS[3].id
    # a rotation marker naming a retired key as "from" does not make that key readable again
    marker, _ = effective_policy(Policy(True, k2, generation=2, rotation={"from": k1}), new, RING)
    assert marker.key_id == k2 and not marker.reads_with(k1)
    # after `key disable` here: the shared setting is followed again
    assert effective_policy(Policy(False), Pin(False, None, 2, (k1,)), RING)[0].enabled is False


def test_the_pin_file_is_private_and_a_damaged_one_trusts_no_key(tmp_path):
    keys, home = tmp_path / "local" / "keys", tmp_path / "home"
    path = save_pin(keys, home, Pin(True, KEYS[0].id, 3, (KEYS[1].id,)))
    assert path == pin_path(keys, home) and not path.is_relative_to(home)
    assert oct(path.stat().st_mode & 0o777) == "0o600" and oct(path.parent.stat().st_mode & 0o777) == "0o700"
    assert load_pin(keys, home) == Pin(True, KEYS[0].id, 3, (KEYS[1].id,), str(home.resolve()))
    path.write_text("{not json")
    damaged = load_pin(keys, home)
    policy, _ = effective_policy(Policy(False), damaged, RING)
    assert policy.enabled and policy.key_id is None and "damaged" in policy.pinned
