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
    # k2 is held here already: not a new key, so followed only once confirmed here (`key follow`, `key rotate`)
    held, none = effective_policy(Policy(True, k2, generation=2), pin, RING)
    assert held.key_id == k1 and none is None and "key follow" in held.pinned
    forward, new = effective_policy(Policy(True, k2, generation=2), Pin(True, k1, 1, confirmed=k2), RING)
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


def test_an_old_key_held_here_is_never_followed_as_a_newer_generation():
    """Red team finding: this machine pinned k2 at generation 2 and holds the old k1 (imported after the rotation,
    to open old backups); the pin never saw k1 as the home's key. A writer of the folder who has k1 names it
    as generation 3: it is refused (and said), not followed and sealed under."""
    k1, k2 = KEYS[0].id, KEYS[1].id
    pin = Pin(True, k2, 2)
    for rotation in (None, {"from": k2}):
        policy, new = effective_policy(Policy(True, k1, generation=3, rotation=rotation), pin, RING)
        assert policy.key_id == k2 and new is None and not policy.reads_with(k1)
        assert "held already" in policy.pinned and "key follow" in policy.pinned
    # a key nobody here holds (the next rotation's) is still followed at once
    policy, new = effective_policy(Policy(True, KEYS[3].id, generation=3), pin, RING)
    assert policy.key_id == KEYS[3].id and new.key_id == KEYS[3].id and k2 in new.retired
    # confirmed here, it is followed; the pin it moves to forgets the confirmation
    policy, new = effective_policy(Policy(True, k1, generation=3), Pin(True, k2, 2, confirmed=k1), RING)
    assert policy.key_id == k1 and new.key_id == k1 and new.confirmed is None and k2 in new.retired


def test_a_machine_that_first_pins_a_rotated_home_learns_its_old_keys_from_the_setting():
    """A new machine (or one offline all along) pins generation 2, whose setting lists k1 as rotated away: k1
    named as generation 3 later is refused even though this machine does not hold k1 (so importing k1 to open
    old backups afterwards cannot make it the home's key here)."""
    k1, k2 = KEYS[0].id, KEYS[1].id
    policy, pin = effective_policy(Policy(True, k2, generation=2, retired=(k1,)), None, RING)
    assert policy.key_id == k2 and pin is not None and k1 in pin.retired
    back, none = effective_policy(Policy(True, k1, generation=3), pin, {k2: RING[k2]})
    assert back.key_id == k2 and none is None and back.pinned
    assert Policy.from_json(Policy(True, k2, generation=2, retired=(k1, k2)).to_json()).retired == (k1,)


def test_a_key_followed_before_it_was_held_is_used_only_once_confirmed():
    """Red team finding: the folder names the user's old key as generation 5 *before* the user imports it (to
    open backups): followed then (nothing held, nothing sealed) and awaited; once imported it is not used
    until the user confirms it here."""
    k2, old = KEYS[1].id, KEYS[3].id
    pin = Pin(True, k2, 2)
    policy, new = effective_policy(Policy(True, old, generation=5), pin, {k2: RING[k2]})
    assert policy.key_id == old and new.awaiting == old and k2 in new.retired
    ring = {k2: RING[k2], old: KEYS[3]}  # imported afterwards
    policy, none = effective_policy(Policy(True, old, generation=5), new, ring)
    assert policy.key_id == old and policy.pinned and "key follow" in policy.pinned and none is None
    policy, done = effective_policy(Policy(True, old, generation=5), Pin(**{**new.__dict__, "confirmed": old}), ring)
    assert policy.key_id == old and not policy.pinned and done.awaiting is None and done.confirmed is None


def test_a_generation_far_ahead_is_not_followed():
    k1, k2 = KEYS[0].id, KEYS[3].id
    policy, new = effective_policy(Policy(True, k2, generation=2**31 - 2), Pin(True, k1, 3), RING)
    assert policy.key_id == k1 and new is None and "jumps" in policy.pinned


def test_a_confirmation_survives_the_pin_file(tmp_path):
    k1, k2 = KEYS[0].id, KEYS[1].id
    save_pin(tmp_path / "keys", tmp_path / "home", Pin(True, k2, 2, confirmed=k1))
    assert load_pin(tmp_path / "keys", tmp_path / "home").confirmed == k1
    save_pin(tmp_path / "keys", tmp_path / "home", Pin(True, k2, 2, confirmed="not a key id"))
    assert load_pin(tmp_path / "keys", tmp_path / "home").confirmed is None


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
