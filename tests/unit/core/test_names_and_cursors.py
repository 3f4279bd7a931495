"""Property tests for the two strings clients hand back: channel lists and cursors.

Whatever a client sends, parsing either succeeds or raises InvalidInput (a 400); a cursor the
server formats always parses back to the same positions.
"""

from __future__ import annotations

import string

from hypothesis import example, given, settings
from hypothesis import strategies as st

from pushserver.core.errors import InvalidInput
from pushserver.core.names import parse_channels
from pushserver.core.positions import Cursor, Position

CHANNEL_ALPHABET = string.ascii_letters + string.digits + "_.:@-"
channels = st.text(CHANNEL_ALPHABET, min_size=1, max_size=128)
epochs = st.text(string.ascii_letters + string.digits, min_size=1, max_size=32).filter(
    lambda epoch: not epoch.startswith("u")  # unstarted epochs take id 0 only (tested apart)
)
ids = st.integers(min_value=0, max_value=10**18 - 1)
positions = st.dictionaries(channels, st.builds(Position, epochs, ids), min_size=0, max_size=64)
hostile = st.one_of(
    st.text(),
    st.text(CHANNEL_ALPHABET + ",:%/\x00 ", max_size=300),
    st.binary().map(lambda b: b.decode("latin-1")),
)

SETTINGS = settings(max_examples=150, deadline=None)


@SETTINGS
@given(positions)
def test_cursor_round_trips(pos):
    text = str(Cursor.of(pos))
    assert Cursor.parse(text).positions() == Cursor.read(text) == pos
    assert Cursor.parse(text) == Cursor.of(pos) and Cursor.parse(text).encode() == text.encode()


@SETTINGS
@given(st.lists(channels, min_size=1, max_size=64, unique=True))
def test_channel_list_round_trips(names):
    assert parse_channels(",".join(names), 64) == tuple(names)


@SETTINGS
@given(positions, st.lists(channels, max_size=8))
def test_positions_of_a_subscription_keep_only_its_channels_in_its_order(pos, names):
    kept = Cursor.read(str(Cursor.of(pos)), names)
    assert set(kept) <= set(names)
    assert all(kept[c] == pos[c] for c in kept)
    assert list(kept) == [c for c in dict.fromkeys(names) if c in pos]


def test_a_cursor_advances_one_channel_and_keeps_the_others_in_place():
    cursor = Cursor.parse("a:E1:3,b:u1:0,c:E2:9")
    assert cursor.advance("b", "b:E3:1") == b"a:E1:3,b:E3:1,c:E2:9"
    assert str(cursor) == "a:E1:3,b:E3:1,c:E2:9"
    assert cursor.positions() == {
        "a": Position("E1", 3),
        "b": Position("E3", 1),
        "c": Position("E2", 9),
    }
    assert str(Cursor()) == "" and Cursor.parse("") == {}


def _only_bad_request(parse, text):
    try:
        parse(text)
    except InvalidInput as exc:
        assert exc.code in ("bad_cursor", "bad_channel", "too_many_channels")
        assert len(exc.message) < 400


@SETTINGS
@given(hostile)
@example("news:abc:1,news:abc:2")
@example("a:b:" + "9" * 19)
@example("::")
@example(",")
def test_any_cursor_text_parses_or_is_a_400(text):
    _only_bad_request(Cursor.parse, text)


@SETTINGS
@given(hostile)
@example("")
@example(",".join(["a"] * 65))
@example("a" * 129)
def test_any_channel_text_parses_or_is_a_400(text):
    _only_bad_request(lambda t: parse_channels(t, 64), text)


def test_a_repeated_channel_counts_once_after_the_limit_is_checked():
    assert parse_channels("a,b,a", 3) == ("a", "b")
    try:
        parse_channels("a,a,a", 2)
    except InvalidInput as exc:
        assert exc.code == "too_many_channels"
    else:
        raise AssertionError("three names, repeats or not, are over a limit of two")


def test_an_unstarted_epoch_takes_no_id():
    """`u...` means "before the first message": an id in it is an edited cursor."""
    assert Cursor.parse("news:u9c1f02ab:0").positions() == {"news": Position("u9c1f02ab", 0)}
    assert Cursor.parse("news:u9c1f02ab:00") == {"news": "news:u9c1f02ab:0"}
    try:
        Cursor.parse("news:u9c1f02ab:3")
    except InvalidInput as exc:
        assert exc.code == "bad_cursor"
    else:
        raise AssertionError("an id in an unstarted epoch is a 400")
