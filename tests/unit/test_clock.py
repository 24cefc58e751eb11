from hypothesis import given, strategies as st

from subconscious.state.clock import ZERO, Stamp, tick

stamps = st.builds(Stamp, st.integers(0, 10**13), st.integers(0, 10**4))


@given(stamps, st.integers(0, 10**13), stamps)
def test_tick_is_after_previous_and_everything_seen(previous, now, seen):
    new = tick(previous, now, seen)
    assert new > previous and new > seen


@given(st.lists(st.integers(0, 10**6), min_size=1, max_size=50))
def test_monotonic_when_the_wall_clock_steps_back(walls):
    stamp, issued = ZERO, []
    for now in walls:
        stamp = tick(stamp, now)
        issued.append(stamp)
    assert issued == sorted(issued) and len(set(issued)) == len(issued)


@given(stamps, st.integers(0, 10**13))
def test_wall_clock_ahead_resets_counter(previous, now):
    new = tick(previous, now)
    if now > previous.wall:
        assert new == Stamp(now, 0)


def test_a_host_behind_orders_its_later_edit_after_what_it_read():
    ahead = tick(ZERO, 5_000_000)  # host A, clock 5000 s
    behind = tick(ZERO, 1_000_000, seen=ahead)  # host B, wall clock far behind, has read A's write
    assert behind > ahead


@given(stamps)
def test_encoding_round_trips(stamp):
    assert Stamp.decode(stamp.encode()) == stamp


@given(st.text(max_size=20))
def test_decoding_rejects_garbage_with_value_error(text):
    try:
        Stamp.decode(text)
    except ValueError:
        pass
