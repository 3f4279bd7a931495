"""Channel.backlog (through the broker's `ChannelHistory.backlog`) and history expiry: what a
subscriber joining at a cursor gets first, and how history ages out. Pure logic: no hub, no
loop."""

from __future__ import annotations

import pytest

from pushserver.core.channel import Channel
from pushserver.core.errors import InvalidInput
from pushserver.core.history import Histories
from pushserver.core.messages import Gap, Message
from pushserver.core.positions import Position, unstarted
from pushserver.wire.framing import NDJSON, SSE

EPOCH = "e1"
TTL = 1e10
"""Long enough that nothing expires unless a test says so."""


def channel(
    sent: int, pending: int = 0, size: int = 3, ts: float = 1000.0
) -> Channel[object, object]:
    """A channel that published ids 1..sent+pending (one second apart from `ts`), fanned out
    the first `sent`; its history keeps the last `size`."""
    histories = Histories(size, TTL, unstarted("other"))
    ch: Channel[object, object] = Channel(histories.load("news", EPOCH, 0))
    for n in range(1, sent + pending + 1):
        message = Message("news", EPOCH, n, ts + n, b"%d" % n)
        histories.append(message)
        if n <= sent:
            ch.mark_sent(message)
    return ch


def ids(ch: Channel[object, object]) -> list[int]:
    return [m.id for m in ch.history.messages(0, ch.history.last_id)]


def shape(events: list) -> list:
    """Messages as their ids, gaps as (reason, from, to)."""
    return [(e.reason, e.first, e.last) if isinstance(e, Gap) else e.id for e in events]


@pytest.mark.parametrize(
    ("history", "ids"),
    [(0, []), (2, [4, 5]), (3, [3, 4, 5]), (4, [3, 4, 5]), (5, [3, 4, 5]), (10, [3, 4, 5])],
)
def test_no_cursor_gives_the_last_n_buffered(history, ids):
    assert shape(channel(sent=5).backlog(None, history)) == ids


@pytest.mark.parametrize("history", range(4, 11))
def test_asking_for_more_than_is_buffered_gives_everything_buffered(history):
    """4 of 10 buffered: any N from 4 to the history size gives all 4, never a tail of them."""
    assert shape(channel(sent=4, size=10).backlog(None, history)) == [1, 2, 3, 4]


@pytest.mark.parametrize(
    ("seen", "expected"),
    [
        (5, []),
        (4, [5]),
        (3, [4, 5]),  # at the oldest buffered id
        (2, [3, 4, 5]),  # just before it: nothing was lost
        (1, [("expired", 2, 2), 3, 4, 5]),
        (0, [("expired", 1, 2), 3, 4, 5]),
    ],
)
def test_same_epoch_resumes_after_the_cursor_with_a_gap_for_what_expired(seen, expected):
    assert shape(channel(sent=5).backlog(Position(EPOCH, seen), 0)) == expected


def test_a_gap_carries_the_position_just_before_what_is_still_buffered():
    (gap, *_) = channel(sent=5).backlog(Position(EPOCH, 0), 0)
    assert isinstance(gap, Gap)
    assert (gap.channel, gap.position) == ("news", "news:e1:2")


def test_other_epoch_is_an_epoch_gap_then_everything_buffered():
    events = channel(sent=5).backlog(Position("old", 9), 0)
    assert shape(events) == [("epoch", 1, 2), 3, 4, 5]
    assert events[0].position == "news:e1:2"


def test_other_epoch_with_nothing_buffered_is_an_empty_gap():
    """A fresh channel: the gap runs from 1 to 0 (`to < from`), nothing was missed but the
    client learns its history is gone."""
    events = channel(sent=0).backlog(Position("old", 4), 0)
    assert shape(events) == [("epoch", 1, 0)]
    assert events[0].position == "news:e1:0"


def test_other_epoch_after_a_reset_covers_every_id_up_to_the_new_last():
    ch = channel(sent=5)
    histories = Histories(3, TTL, unstarted("other"))
    histories["news"] = ch.history
    histories.reset("news", "e2", 7, [])
    ch.follow(ch.history)
    assert shape(ch.backlog(Position(EPOCH, 5), 0)) == [("epoch", 1, 7)]
    assert ch.sent_position == "news:e2:7"


@pytest.mark.parametrize("pending", [0, 1])
def test_a_cursor_past_the_last_id_is_bad_input(pending):
    ch = channel(sent=5, pending=pending)
    with pytest.raises(InvalidInput) as caught:
        ch.backlog(Position(EPOCH, 6 + pending), 0)
    assert caught.value.code == "bad_cursor"
    assert f"past the channel's last id {5 + pending}" in caught.value.message


def test_pending_messages_are_left_to_the_next_flush():
    ch = channel(sent=4, pending=2, size=10)
    assert shape(ch.backlog(None, 10)) == [1, 2, 3, 4]
    assert shape(ch.backlog(Position(EPOCH, 2), 0)) == [3, 4]
    assert ch.backlog(Position(EPOCH, 6), 0) == []  # a cursor from another node may be ahead
    assert ch.sent_position == "news:e1:4"


def test_expire_drops_only_what_is_older_than_the_ttl():
    ch = channel(sent=5, size=10)  # ts 1001 .. 1005
    ch.history.expire(ttl=2.5, now=1005.0)
    assert ids(ch) == [3, 4, 5]
    assert shape(ch.backlog(Position(EPOCH, 1), 0)) == [("expired", 2, 2), 3, 4, 5]


def test_expire_of_everything_leaves_no_buffer():
    ch = channel(sent=2, pending=2, size=10)
    ch.history.expire(ttl=1.0, now=5000.0)
    assert ids(ch) == [] and ch.history.buffer is None and ch.history.first == 5
    assert shape(ch.backlog(Position(EPOCH, 1), 0)) == [("expired", 2, 2)]


def test_subscriber_count_adds_every_kind_of_holder():
    ch = channel(sent=0)
    ch.streams[NDJSON] = dict.fromkeys("ab")
    ch.streams[SSE] = {"c": None}
    ch.waiters["w"] = None
    ch.multi.update(dict.fromkeys("mn"))
    assert ch.subscriber_count == 6


def test_held_is_any_holder_and_not_a_framing_emptied():
    """A framing's streams left empty (its last stream gone) hold no one; each kind of holder
    alone does."""
    ch = channel(sent=0)
    ch.streams[NDJSON] = {}
    assert not ch.held and ch.subscriber_count == 0
    ch.streams[SSE] = {"s": None}
    assert ch.held
    for kind in ("waiters", "multi"):
        ch = channel(sent=0)
        ch.streams[NDJSON] = {}
        getattr(ch, kind)["x"] = None
        assert ch.held and ch.subscriber_count == 1, kind


def test_an_unstarted_cursor_missed_nothing_only_of_its_generation():
    """A cursor taken before a channel's first message is `(unstarted(generation), 0)`. It
    missed nothing of an epoch that began in that generation (`born`); a cursor from another
    generation (the server restarted, Redis lost its data) gets an epoch gap."""
    ch = channel(sent=1)
    ch.history.born = unstarted("g1")
    assert shape(ch.backlog(Position(unstarted("g1"), 0), 0)) == [1]
    assert shape(ch.backlog(Position(unstarted("g0"), 0), 0)) == [("epoch", 1, 0), 1]
    assert shape(channel(sent=1).backlog(Position(unstarted("g1"), 0), 0)) == [("epoch", 1, 0), 1]


POSITIONS = [
    None,
    Position(EPOCH, 0),  # expired gap first
    Position(EPOCH, 5),  # just before the oldest buffered
    Position(EPOCH, 9),
    Position(EPOCH, 12),  # caught up
    Position("old", 3),  # epoch gap first
    Position(unstarted("other"), 0),  # joined before the first message: nothing missed
]


@pytest.mark.parametrize("position", POSITIONS)
@pytest.mark.parametrize("history", [0, 3, 7])
@pytest.mark.parametrize("pending", [0, 2])
def test_at_most_n_messages_are_the_first_n_of_the_whole_backlog(position, history, pending):
    """A long-poll reads no more than its answer's bound (plus one): the same gap, then the
    first `most` of the messages it would have read, for every kind of start."""
    ch = channel(sent=12 - pending, pending=pending, size=7)
    whole = shape(ch.backlog(position, history))
    gaps = [e for e in whole if isinstance(e, tuple)]
    messages = [e for e in whole if not isinstance(e, tuple)]
    for most in range(len(messages) + 2):
        assert shape(ch.backlog(position, history, most)) == gaps + messages[:most]


def test_at_most_none_still_refuses_a_cursor_past_the_last_id():
    """`probe` asks with `most=0` only to have the cursor checked."""
    with pytest.raises(InvalidInput):
        channel(sent=5).backlog(Position(EPOCH, 6), 0, 0)
