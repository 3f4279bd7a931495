"""The Sequencer on scripted sequences, without any broker: each message reaches the sink once,
in id order, and a history that moved on without this node becomes a jump."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pushserver.broker.ordering import Sequencer
from pushserver.core.history import ChannelHistory, Histories
from pushserver.core.messages import Message
from pushserver.core.positions import unstarted

Call = tuple[object, ...]


class Recorder:
    """A sink, and the histories a sequencer writes, that record what the sequencer does:
    first reads (`load`), messages handed on (`append`) and jumps, with what the history holds
    after each."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.history = RecordingHistories(self.calls)

    def append(self, message: Message) -> None:
        assert self.history[message.channel].last_id == message.id, "kept before it is told"
        self.calls.append(("append", message.epoch, message.id))

    def jump(self, name: str) -> None:
        kept = self.history[name]
        held = [m.id for m in kept.messages(0, kept.last_id)]
        self.calls.append(("jump", kept.epoch, kept.last_id, held))

    def audience(self, name: str) -> int:
        return 0


class RecordingHistories(Histories):
    def __init__(self, calls: list[Call]) -> None:
        super().__init__(100, 1e10, unstarted("g"))
        self.calls = calls

    def load(
        self, name: str, epoch: str, last_id: int, messages: Iterable[Message] = ()
    ) -> ChannelHistory:
        messages = list(messages)
        self.calls.append(("load", epoch, last_id, [m.id for m in messages]))
        return super().load(name, epoch, last_id, messages)


def msg(id_: int, epoch: str = "e1") -> Message:
    return Message("ch", epoch, id_, float(id_), b"%d" % id_)


def msgs(ids: range, epoch: str = "e1") -> list[Message]:
    return [msg(i, epoch) for i in ids]


def sequencer() -> tuple[Sequencer, Recorder]:
    sink = Recorder()
    return Sequencer("ch", sink.history, sink), sink


def loaded(last_id: int = 3, epoch: str = "e1") -> tuple[Sequencer, Recorder]:
    """A sequencer after its first read found `last_id` messages."""
    order, sink = sequencer()
    assert order.read_from() == ("", -1)
    order.done_reading()
    assert not order.apply(("", -1), epoch, last_id, msgs(range(1, last_id + 1), epoch))
    assert sink.calls == [("load", epoch, last_id, list(range(1, last_id + 1)))]
    sink.calls.clear()
    return order, sink


def read(order: Sequencer, epoch: str, last_id: int, messages: Sequence[Message]) -> bool:
    """One whole read: what it asked for is checked by the caller through `read_from`."""
    asked = order.read_from()
    order.done_reading()
    return order.apply(asked, epoch, last_id, messages)


def test_in_order_messages_are_appended_and_duplicates_dropped() -> None:
    order, sink = loaded()
    for message in [msg(4), msg(4), msg(3), msg(5), msg(1)]:
        assert not order.offer(message)
    assert sink.calls == [("append", "e1", 4), ("append", "e1", 5)]


def test_a_message_that_skips_ids_waits_for_a_read_of_the_missing_ones() -> None:
    order, sink = loaded()
    assert order.offer(msg(6))  # 4 and 5 are missing: read the history
    assert order.offer(msg(7))  # no read under way yet: it asks too
    assert sink.calls == []
    assert order.read_from() == ("e1", 3)
    order.done_reading()
    assert not order.apply(("e1", 3), "e1", 7, msgs(range(4, 8)))
    assert sink.calls == [("append", "e1", i) for i in range(4, 8)]


def test_notifications_arriving_during_a_read_are_applied_after_it_in_order() -> None:
    order, sink = loaded()
    assert order.read_from() == ("e1", 3)
    # The read is under way; notifications cross it, one of them already in its result.
    assert not order.offer(msg(5))
    assert not order.offer(msg(4))  # the next id: applied at once
    assert not order.offer(msg(6))
    order.done_reading()
    assert not order.apply(("e1", 3), "e1", 5, msgs(range(4, 6)))
    assert sink.calls == [("append", "e1", i) for i in (4, 5, 6)]


def test_a_read_that_does_not_close_the_hole_asks_for_another() -> None:
    order, sink = loaded()
    assert order.offer(msg(8))
    assert read(order, "e1", 5, msgs(range(4, 6)))  # 6 and 7 are not in it yet: read again
    assert sink.calls == [("append", "e1", 4), ("append", "e1", 5)]
    assert order.read_from() == ("e1", 5)
    order.done_reading()
    assert not order.apply(("e1", 5), "e1", 8, msgs(range(6, 9)))
    assert [c[2] for c in sink.calls] == [4, 5, 6, 7, 8]


def test_ids_no_longer_buffered_become_a_jump_to_what_is_left() -> None:
    order, sink = loaded()
    assert order.offer(msg(10))
    assert not read(order, "e1", 10, msgs(range(8, 11)))  # 4 to 7 expired
    assert sink.calls == [("jump", "e1", 10, [8, 9, 10])]
    assert not order.offer(msg(11))
    assert sink.calls[-1] == ("append", "e1", 11)


def test_an_epoch_change_jumps_and_retires_the_old_epoch() -> None:
    order, sink = loaded()
    assert order.offer(msg(1, "e2"))  # Redis lost the channel: a message of a new epoch
    assert not read(order, "e2", 2, msgs(range(1, 3), "e2"))
    assert sink.calls == [("jump", "e2", 2, [1, 2])]
    sink.calls.clear()
    assert not order.offer(msg(4, "e1"))  # late notification of the old epoch
    assert not read(order, "e1", 9, msgs(range(4, 10)))  # late read of the old epoch
    assert order.behind("e1", 9) is False
    assert not order.offer(msg(3, "e2"))
    assert sink.calls == [("append", "e2", 3)]


def test_retiring_an_epoch_of_one_channel_leaves_the_others_none_retired() -> None:
    order, _ = loaded()
    other, _ = loaded()
    assert order.retired is other.retired  # one shared empty set, not one per channel
    assert order.offer(msg(1, "e2"))
    read(order, "e2", 2, msgs(range(1, 3), "e2"))
    assert order.retired == {"e1"}
    assert other.retired == frozenset() and other.behind("e2", 1)


def test_a_late_reconnect_hands_over_the_whole_new_epoch() -> None:
    """The node was away while Redis restarted and another node published 1 to 3 in the new
    epoch: the read (which starts the new epoch from its beginning) is passed on whole."""
    order, sink = loaded(last_id=5)
    assert order.read_from() == ("e1", 5)
    order.done_reading()
    assert not order.apply(("e1", 5), "e2", 3, msgs(range(1, 4), "e2"))
    assert sink.calls == [("jump", "e2", 3, [1, 2, 3])]


def test_a_publishers_own_reply_never_asks_for_a_read() -> None:
    order, sink = loaded()
    assert not order.offer(msg(5), fetch=False)
    assert not order.queue
    assert not order.offer(msg(4), fetch=False)
    assert sink.calls == [("append", "e1", 4)]


def test_before_the_first_read_messages_wait_for_it() -> None:
    order, sink = sequencer()
    assert not order.offer(msg(3))  # nothing to read from yet: the first read is under way
    assert order.read_from() == ("", -1)
    order.done_reading()
    assert not order.apply(("", -1), "e1", 2, msgs(range(1, 3)))
    assert sink.calls == [("load", "e1", 2, [1, 2]), ("append", "e1", 3)]


def test_a_cursor_from_another_node_ahead_of_this_one_is_behind() -> None:
    order, _ = loaded()
    assert order.behind("e1", 4)
    assert not order.behind("e1", 3)
    assert order.behind("e9", 1)  # an epoch this node has not seen yet


def test_the_first_message_of_an_unstarted_channel_needs_no_read() -> None:
    order, sink = loaded(0, unstarted("g"))
    assert order.offer(msg(1, "e1")) is False  # applied at once, in the order it came
    assert order.offer(msg(2, "e1")) is False
    assert sink.calls == [("append", "e1", 1), ("append", "e1", 2)]
    assert order.epoch == "e1"


def test_a_read_from_before_the_first_message_does_not_undo_it() -> None:
    """Two subscribers' first reads cross the channel's first publish: the later read still
    shows the channel unstarted. It is stale, not a new epoch, so the channel stays in the
    epoch of its first message (a jump back retired that epoch: every message after it was
    dropped here, and cursors sent back to the unstarted epoch had it all delivered again)."""
    order, sink = loaded(0, unstarted("g"))
    assert order.read_from() == (unstarted("g"), 0)  # issued before message 1 was published
    assert not order.offer(msg(1, "e1"))
    order.done_reading()
    assert not order.apply((unstarted("g"), 0), unstarted("g"), 0, [])
    assert not order.offer(msg(2, "e1"))
    assert sink.calls == [("append", "e1", 1), ("append", "e1", 2)]
    assert not order.behind(unstarted("g"), 0)


def test_a_first_read_from_before_the_first_message_answered_last_is_stale() -> None:
    """The same crossing, with both reads issued before anything was applied: the one issued
    after the first publish is answered first and loads the channel; the other is stale."""
    order, sink = sequencer()
    before = order.read_from()  # issued before message 1 was published
    after = order.read_from()
    order.done_reading()
    order.done_reading()
    assert not order.apply(after, "e1", 1, msgs(range(1, 2)))
    assert not order.apply(before, unstarted("g"), 0, [])
    assert not order.offer(msg(2, "e1"))
    assert sink.calls == [("load", "e1", 1, [1]), ("append", "e1", 2)]
