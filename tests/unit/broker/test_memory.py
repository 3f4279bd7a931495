"""The memory engine on its own contract: it keeps its histories, answers a publish and a
subscribe at once, and drops a channel only once nothing is lost by it. A recording sink
stands in for the hub; no server."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator

import pytest

from pushserver.broker.memory import MemoryBroker
from pushserver.core.broker import ChannelInfo, Item
from pushserver.core.messages import Message


class Sink:
    """Records what the engine reports; `held` is the audience it is told of."""

    def __init__(self, broker: MemoryBroker) -> None:
        self.broker = broker
        self.appended: list[tuple[str, int]] = []
        self.held: dict[str, int] = {}

    def append(self, message: Message) -> None:
        kept = self.broker.history[message.channel]
        assert kept.last_id == message.id and kept.epoch == message.epoch  # kept first
        self.appended.append((message.channel, message.id))

    def jump(self, name: str) -> None:
        raise AssertionError("the memory engine is the truth: it never jumps")

    def audience(self, name: str) -> int:
        return self.held.get(name, 0)


@pytest.fixture
async def engine() -> AsyncIterator[tuple[MemoryBroker, Sink]]:
    broker = MemoryBroker(3, 300, 3600)
    sink = Sink(broker)
    async with broker.running(sink):
        yield broker, sink


async def test_a_publish_is_answered_at_once_kept_then_reported_in_order(engine):
    broker, sink = engine
    out = broker.publish([Item("a", b"1"), Item("b", b"2"), Item("a", b"3")])
    assert isinstance(out, list)
    assert [(m.channel, m.id) for m in out] == [("a", 1), ("b", 1), ("a", 2)]
    assert sink.appended == [("a", 1), ("b", 1), ("a", 2)]
    assert out[0].epoch == out[2].epoch != out[1].epoch  # an epoch per channel
    assert broker.history["a"].born == broker.history["b"].born == broker.history.unstarted


async def test_a_repeated_key_returns_the_first_message_and_publishes_nothing(engine):
    broker, sink = engine
    [first] = broker.publish([Item("a", b"1", "k")])
    [again] = broker.publish([Item("a", b"1", "k")])
    assert (again.epoch, again.id, again.ts) == (first.epoch, first.id, first.ts)
    assert sink.appended == [("a", 1)] and broker.history["a"].last_id == 1


async def test_a_subscribe_needs_no_wait_and_an_unsubscribe_leaves_nothing_unpublished(engine):
    broker, sink = engine
    assert broker.subscribe(["quiet", "news"], {}) is None
    assert broker.history["quiet"].unstarted and broker.history["quiet"].last_id == 0
    broker.publish([Item("news", b"1")])
    sink.held["quiet"] = 1  # someone else still holds "quiet"
    broker.unsubscribe(["quiet", "news"])
    assert "quiet" in broker.history
    sink.held.clear()
    broker.unsubscribe(["quiet", "news"])
    assert "quiet" not in broker.history  # never published to: nothing is lost
    assert broker.history["news"].last_id == 1  # published to: kept for resuming


async def test_info_counts_what_is_buffered_within_the_size(engine):
    broker, _ = engine
    assert await broker.info("news") is None
    broker.publish([Item("news", b"%d" % n) for n in range(5)])
    info = await broker.info("news")
    assert info == ChannelInfo(broker.history["news"].epoch, 5, 3)


async def test_the_sweep_drops_only_expired_channels_nobody_holds_or_left_lately(engine):
    broker, sink = engine
    broker.publish([Item(name, b"1") for name in ("expired", "held", "left", "fresh")])
    for name in ("expired", "held", "left"):
        broker.history[name].clear()  # as if its history had expired
    sink.held["held"] = 1
    broker.unsubscribe(["left"])  # its last subscriber left just now
    assert await broker.sweep() == 1
    assert set(broker.history) == {"held", "left", "fresh"}
    assert await broker.sweep(idle_after=0) == 1  # "left" is idle long enough now
    assert set(broker.history) == {"held", "fresh"}


async def test_a_dropped_channel_starts_a_new_epoch_its_cursor_can_tell_apart(engine):
    broker, _ = engine
    [first] = broker.publish([Item("news", b"1")])
    broker.history["news"].clear()
    await broker.sweep()
    assert "news" not in broker.history
    assert broker.subscribe(["news"], {}) is None
    unstarted = broker.history["news"].epoch
    assert unstarted != broker.history.unstarted  # tagged: one epoch of it ended
    [second] = broker.publish([Item("news", b"2")])
    assert second.id == 1 and second.epoch != first.epoch
    assert broker.history["news"].born == unstarted


async def test_the_sweep_gives_back_the_room_of_the_channels_it_dropped(engine):
    broker, _ = engine
    names = [f"c{i}" for i in range(50_000)]
    broker.publish([Item(name, b"1") for name in names])
    full = sys.getsizeof(broker.history)
    for name in names[:-10]:
        broker.history[name].clear()  # as if its history had expired
    assert await broker.sweep() == len(names) - 10
    assert sorted(broker.history) == sorted(names[-10:])
    assert sys.getsizeof(broker.history) * 100 < full
    assert broker.history.tally.messages == 10  # what the ten kept still counted
