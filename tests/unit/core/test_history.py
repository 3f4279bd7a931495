"""The history store on its own: what a channel keeps (heads, not messages), its limits, loads
and resets, and the order it gives messages of several channels. Pure logic: no hub, no loop."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pushserver.core.history import COMPACT_AFTER, LARGE, ChannelInfo, Histories
from pushserver.core.messages import Message
from pushserver.core.positions import born, unstarted

GENERATION = unstarted("9c1f02ab")


def message(n: int, channel: str = "news", epoch: str = "e1", ts: float = 1000.0) -> Message:
    return Message(channel, epoch, n, ts + n, b'"m%d"' % n)


def varied(n: int) -> Message:
    """Message `n` at time `2n` (as `message(n, ts=n)`); every third one's head longer than
    `LARGE`, kept apart."""
    data = b'"%s"' % (b"x" * (LARGE if n % 3 == 0 else n % 7))
    return Message("news", "e1", n, float(2 * n), data)


def ids(histories: Histories, name: str = "news") -> list[int]:
    kept = histories[name]
    return [m.id for m in kept.messages(0, kept.last_id)]


def test_a_kept_message_is_its_envelope_head_and_comes_back_the_same():
    histories = Histories(10, 1e10, GENERATION)
    sent = message(1)
    histories.append(sent)
    (back,) = histories["news"].messages(0, 1)
    assert histories["news"].buffer.heads == sent.head  # type: ignore[union-attr]
    assert back.head == sent.head  # stored once, as its bytes: read back as a copy
    assert (back.channel, back.epoch, back.id, back.ts, back.seq) == ("news", "e1", 1, 1001, 1)
    assert back.position == sent.position and back.body(b"c") == sent.body(b"c")


def test_a_channel_with_nothing_buffered_keeps_no_containers():
    histories = Histories(10, 5.0, GENERATION)
    kept = histories.load("quiet", unstarted("9c1f02ab", "n1"), 0)
    assert kept.buffer is None and kept.buffered == 0 and kept.first == 1
    histories.append(message(1, "quiet", "9c1f02ab1n1"))
    assert kept.buffered == 1
    kept.expire(5.0, now=2000.0)
    assert kept.buffer is None and kept.last_id == 1 and kept.first == 2


def test_the_first_message_gives_an_unstarted_channel_its_epoch_and_born():
    histories = Histories(10, 1e10, GENERATION)
    tagged = unstarted("9c1f02ab", "n2")
    kept = histories.load("news", tagged, 0)
    assert kept.unstarted and kept.born == tagged
    histories.append(message(1, epoch="9c1f02ab7n2"))
    assert (kept.epoch, kept.born, kept.unstarted) == ("9c1f02ab7n2", tagged, False)
    assert kept.born == born(GENERATION, kept.epoch)


def test_the_size_keeps_the_newest_and_the_buffer_compacts_as_it_goes():
    histories = Histories(5, 1e10, GENERATION)
    for n in range(1, 200):
        histories.append(message(n))
        buffer = histories["news"].buffer
        assert buffer is not None
        assert len(buffer.index) <= 3 * max(2 * 5, COMPACT_AFTER + 5)  # dropped in bulk
        assert len(buffer.heads) == sum(len(m.head) for m in histories["news"].messages(0, n))
    assert ids(histories) == [195, 196, 197, 198, 199]
    assert histories["news"].first == 195


def test_a_full_history_drops_by_size_and_by_age_and_counts_what_it_holds():
    histories = Histories(3, 10.0, GENERATION)
    for n in range(1, 5):
        histories.append(message(n))  # ts 1001 .. 1004: the fourth pushes the first out
    assert ids(histories) == [2, 3, 4]
    heads = [len(message(n).head) for n in (2, 3, 4)]
    assert (histories.tally.bytes, histories.tally.messages) == (sum(heads), 3)
    histories.append(message(5, ts=1015.0))  # full, and the others older than the TTL
    assert ids(histories) == [5]
    assert (histories.tally.bytes, histories.tally.messages) == (len(message(5).head), 1)


def test_a_message_older_than_the_ttl_goes_when_the_next_comes():
    histories = Histories(10, 2.5, GENERATION)
    for n in range(1, 6):
        histories.append(message(n))  # ts 1001 .. 1005
    assert ids(histories) == [3, 4, 5]


def test_arrival_order_runs_across_channels():
    histories = Histories(10, 1e10, GENERATION)
    for m in [message(1, "a"), message(1, "b"), message(2, "a")]:
        histories.append(m)
    seqs = {(m.channel, m.id): m.seq for name in "ab" for m in histories[name].messages(0, 9)}
    assert seqs == {("a", 1): 1, ("b", 1): 2, ("a", 2): 3}


def test_a_load_keeps_the_consecutive_run_that_ends_at_the_last_id():
    histories = Histories(10, 1e10, GENERATION)
    histories.load("news", "e1", 7, [message(n) for n in (1, 2, 4, 5, 6, 7, 8)])
    assert ids(histories) == [4, 5, 6, 7]  # 8 is past the last id; 3 is missing
    histories.load("news", "e1", 9, [message(n) for n in (5, 6, 7)])
    assert ids(histories) == []  # nothing that reaches the last id: nothing buffered
    assert histories["news"].last_id == 9


def test_a_reset_moves_the_same_object_so_whoever_holds_it_sees_the_move():
    histories = Histories(10, 1e10, GENERATION)
    kept = histories.load("news", "e1", 3, [message(n) for n in (1, 2, 3)])
    histories.reset("news", "e2", 2, [message(n, epoch="e2") for n in (1, 2)])
    assert histories["news"] is kept
    assert (kept.epoch, kept.last_id, ids(histories)) == ("e2", 2, [1, 2])
    assert kept.born == born(GENERATION, "e2")


def test_info_counts_what_has_not_expired():
    histories = Histories(10, 60.0, GENERATION)
    assert histories.info("news") is None
    histories.load("news", "e1", 4, [message(n, ts=0.0) for n in range(1, 5)])
    assert histories.info("news") == ChannelInfo("e1", 4, 0)  # ts 1..4: long expired


@settings(max_examples=100, deadline=None)
@given(
    st.integers(1, 40),
    st.lists(st.one_of(st.just("add"), st.integers(0, 50)), max_size=120),
)
def test_what_is_buffered_is_always_the_newest_ids_within_size_and_age(size, steps):
    """Appends and expiries in any order: the buffer holds exactly the ids a list would."""
    histories = Histories(size, 1e10, GENERATION)
    histories.load("news", "e1", 0)
    model: list[tuple[int, float]] = []
    last = 0
    for step in steps:
        if step == "add":
            last += 1
            histories.append(varied(last))
            model = [*model, (last, last + float(last))][-size:]
        else:
            histories["news"].expire(ttl=1.0, now=float(2 * step))
            model = [(n, ts) for n, ts in model if ts >= 2 * step - 1.0]
        assert ids(histories) == [n for n, _ in model]
        assert histories["news"].buffered == len(model)
        assert histories["news"].first == (model[0][0] if model else last + 1)
        heads = [m.head for m in histories["news"].messages(0, last)]
        assert heads == [varied(n).head for n, _ in model]
        tally = histories.tally
        assert (tally.bytes, tally.messages) == (sum(map(len, heads)), len(model))


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 30), st.integers(0, 60), st.data())
def test_any_range_of_messages_is_what_was_appended(size, appended, data):
    """Heads short and long (kept apart), after appends that dropped the oldest and compacted
    the index: every range read gives each message's head, time and arrival order as kept."""
    histories = Histories(size, 1e10, GENERATION)
    histories.load("news", "e1", 0)
    kept = [varied(n) for n in range(1, appended + 1)]
    for message in kept:
        histories.append(message)
    after = data.draw(st.integers(-1, appended + 1))
    upto = data.draw(st.integers(-1, appended + 1))
    got = histories["news"].messages(after, upto)
    want = [m for m in kept[-size:] if after < m.id <= upto] if appended else []
    assert [(m.id, m.head, m.ts, m.seq) for m in got] == [(m.id, m.head, m.ts, m.seq) for m in want]


@pytest.mark.parametrize("upto", [0, 3, 5, 9])
def test_messages_stop_at_what_was_fanned_out(upto):
    histories = Histories(10, 1e10, GENERATION)
    histories.load("news", "e1", 5, [message(n) for n in range(1, 6)])
    assert [m.id for m in histories["news"].messages(1, upto)] == list(range(2, min(upto, 5) + 1))


def test_the_tally_counts_what_every_channel_buffers_as_channels_come_and_go():
    histories = Histories(3, 1e10, GENERATION)
    for n in range(1, 6):
        histories.append(message(n, "a"))
        histories.append(message(n, "b"))
    per_channel = sum(len(message(n, "a").head) for n in (3, 4, 5))
    assert (histories.tally.bytes, histories.tally.messages) == (2 * per_channel, 6)
    del histories["a"]
    assert (histories.tally.bytes, histories.tally.messages) == (per_channel, 3)
    histories.load("b", "e2", 0)  # replaced: what the old one buffered no longer counts
    assert (histories.tally.bytes, histories.tally.messages) == (0, 0)
    histories.append(message(1, "c", "e1"))
    histories.reset("c", "e2", 0, [])
    assert histories.pop("c") is not None and histories.pop("c", None) is None
    assert (histories.tally.bytes, histories.tally.messages) == (0, 0)


def test_a_long_head_is_kept_as_it_came_and_shared_by_every_backlog():
    histories = Histories(2, 1e10, GENERATION)
    long = Message("news", "e1", 1, 1001.0, b'"%s"' % (b"x" * LARGE))
    histories.append(long)
    histories.append(message(2))
    (first, second), again = histories["news"].messages(0, 2), histories["news"].messages(0, 1)
    assert first.head is long.head and again[0].head is long.head
    assert second.head == message(2).head
    histories.append(message(3))  # the long one leaves
    assert histories["news"].buffer.large == {}  # type: ignore[union-attr]
    assert histories.tally.bytes == len(message(2).head) + len(message(3).head)
