
import pytest
from hypothesis import example, given, strategies as st

from subconscious.state.clock import MAX, MAX_COUNT, MAX_WALL, ZERO, Stamp, tick

from .strategies import any_stamps

stamps = st.builds(Stamp, st.integers(0, 10**13), st.integers(0, 10**4))
walls = st.one_of(st.integers(0, 10**13), st.integers(MAX_WALL - 3, MAX_WALL + 3))


@given(stamps, st.integers(0, 10**13), stamps)
def test_tick_is_after_previous_and_everything_seen(previous, now, seen):
    new = tick(previous, now, seen)
    assert new > previous and new > seen


@given(any_stamps, walls, any_stamps)
@example(Stamp(5, MAX_COUNT), 0, ZERO)  # the counter at its limit: carries into the wall
@example(ZERO, 0, Stamp(5, MAX_COUNT))
@example(Stamp(MAX_WALL, MAX_COUNT - 1), MAX_WALL, ZERO)
@example(ZERO, MAX_WALL + 10**6, ZERO)  # a wall clock beyond the text form
def test_every_stamp_tick_emits_decodes_and_is_after_what_it_read(previous, now, seen):
    """Whatever was read (any stamp the decoder accepts, counters and walls at their limits), the new
    stamp decodes back to itself and is strictly later; the one exception is reading :data:`MAX`."""
    new = tick(previous, now, seen)
    assert Stamp.decode(new.encode()) == new
    if max(previous, seen) == MAX:
        assert new == MAX  # saturated: documented in tick
    else:
        assert new > previous and new > seen


def test_the_counter_carries_into_the_wall_instead_of_growing_a_tenth_digit():
    assert tick(Stamp(5, MAX_COUNT), 0) == Stamp(6, 0)
    assert tick(ZERO, 3, seen=Stamp(5, MAX_COUNT)) == Stamp(6, 0)
    assert tick(Stamp(5, MAX_COUNT - 1), 0) == Stamp(5, MAX_COUNT)


def test_at_the_end_of_the_text_form_tick_saturates():
    assert tick(MAX, 0) == MAX and tick(ZERO, 0, seen=MAX) == MAX
    assert tick(Stamp(MAX_WALL, 7), MAX_WALL + 5) == Stamp(MAX_WALL, 8)


def test_a_stamp_far_in_the_future_is_read_and_written_after():
    far = Stamp.decode("9999999999999998:999999999")
    assert tick(ZERO, 1_764_489_541_123, far) == Stamp(9999999999999999, 0)


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


@given(any_stamps)
def test_encoding_round_trips(stamp):
    assert Stamp.decode(stamp.encode()) == stamp


_ASCII = set("0123456789")


def _valid(text: str) -> bool:
    """The text form, spelled out without regexes or str.isdigit()."""
    wall, sep, count = text.partition(":")
    return bool(sep) and 1 <= len(wall) <= 16 and 1 <= len(count) <= 9 and set(wall + count) <= _ASCII


near_stamps = st.one_of(
    st.text(max_size=20),
    st.text(st.sampled_from("0123456789:１２²٣߂𝟗 +-_\n"), max_size=30),
    st.builds(lambda w, c, s: f"{w}{s}{c}", st.integers(0, 10**17), st.integers(0, 10**10), st.sampled_from([":", "::", ""])),
)


@given(near_stamps)
@example("１２:3")  # fullwidth digits: str.isdigit() and int() both accept them
@example("²:1")  # superscript two: isdigit() accepts it (int() does not)
@example("٣:1")  # Arabic-Indic three
@example("1:1234567890")  # a ten-digit counter
@example("12345678901234567:0")  # a seventeen-digit wall
@example("1:0\n")
@example("1_0:0")
def test_decode_accepts_exactly_the_text_form(text):
    if _valid(text):
        wall, _, count = text.partition(":")
        assert Stamp.decode(text) == Stamp(int(wall), int(count))
    else:
        with pytest.raises(ValueError):
            Stamp.decode(text)


@pytest.mark.parametrize("text", ["１２:3", "²:1", "٣:1", "1:٣", "1:1234567890", "12345678901234567:0", "1:", ":1",
                                  "1", "", "+1:0", " 1:0", "1:0 ", "1:0\n", "1_0:0", "-1:0", "1:2:3", "1.0:0"])
def test_decode_refuses_what_is_not_the_text_form(text):
    with pytest.raises(ValueError):
        Stamp.decode(text)


@pytest.mark.parametrize("value", [None, 5, 5.0, b"1:0", ["1:0"]])
def test_decode_refuses_non_strings(value):
    with pytest.raises(ValueError):
        Stamp.decode(value)


def test_the_records_fast_path_and_the_decoder_share_one_definition():
    from subconscious.state import records

    for text in ["１２:3", "1:1234567890", "0:0", "9999999999999999:999999999", "1:0\n"]:
        try:
            Stamp.decode(text)
            ok = True
        except ValueError:
            ok = False
        assert bool(records._HLC_RE.fullmatch(text)) is ok
