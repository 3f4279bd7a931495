"""Epochs within one generation of the memory broker: a cursor taken before a channel's first
message resumes without a gap on that channel's first epoch after it, and with an `epoch` gap
when an earlier epoch of the channel was dropped since. The hub and the memory broker, no server.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pushserver.broker import memory
from pushserver.broker.memory import MemoryBroker
from pushserver.core.hub import Hub
from pushserver.core.messages import Gap
from pushserver.core.positions import EPOCH_RE, Position, born, epoch_tag, unstarted


def make_hub() -> Hub:
    return Hub(MemoryBroker(10, 300, 3600), max_buffer_bytes=1000)


@pytest.fixture
async def hub() -> AsyncIterator[Hub]:
    hub = make_hub()
    async with hub.broker.running(hub):
        yield hub


async def head(hub: Hub, name: str) -> Position:
    """What `GET /lp/{name}?timeout=0` hands out, the subscription released after it."""
    channels = await hub.open([name], {})
    _, at = hub.backlog(channels, {}, 0)
    hub.release(channels)
    return at.positions()[name]


async def start(hub: Hub, name: str, count: int = 1) -> None:
    await hub.publish([(name, b"%d" % n) for n in range(count)])


async def drop(hub: Hub, name: str) -> None:
    """The channel's history expires and the engine's idle sweep drops it: its epoch ends."""
    hub.broker.history[name].clear()
    await hub.broker.sweep(idle_after=0)  # type: ignore[attr-defined]
    assert name not in hub.broker.history


async def resume(hub: Hub, name: str, position: Position) -> list:
    """What a subscriber resuming at `position` gets first: messages as ids, gaps as tuples."""
    channels = await hub.open([name], {name: position})
    events, _ = hub.backlog(channels, {name: position}, 0)
    hub.release(channels)
    return [(e.reason, e.first, e.last) if isinstance(e, Gap) else e.id for e in events]


async def test_a_cursor_from_before_the_first_epoch_misses_nothing(hub):
    before = await head(hub, "news")
    await start(hub, "news", 2)
    assert await resume(hub, "news", before) == [1, 2]


async def test_a_cursor_from_before_a_dropped_epoch_gets_an_epoch_gap(hub):
    """The reproduction: 3 messages in a first epoch, dropped once their history expired, then
    2 in a second epoch. The cursor from before the first epoch must not pass for one taken
    before the second: it is told that history was lost, then gets what the new epoch has."""
    before = await head(hub, "news")
    await start(hub, "news", 3)
    await drop(hub, "news")
    between = await head(hub, "news")
    await start(hub, "news", 2)
    assert await resume(hub, "news", before) == [("epoch", 1, 0), 1, 2]
    assert await resume(hub, "news", between) == [1, 2]  # taken after the drop: nothing missed


async def test_every_dropped_epoch_changes_the_unstarted_epoch_once(hub):
    positions = [await head(hub, "news")]
    for _ in range(3):
        await start(hub, "news")
        await drop(hub, "news")
        positions.append(await head(hub, "news"))
        assert await head(hub, "news") == positions[-1]  # stable until the next epoch ends
    assert len({p.epoch for p in positions}) == 4
    await start(hub, "news")
    assert [await resume(hub, "news", p) for p in positions] == [[("epoch", 1, 0), 1]] * 3 + [[1]]


async def test_other_channels_ending_leave_a_channels_unstarted_epoch_alone(hub):
    before = await head(hub, "news")
    for n in range(50):
        await start(hub, f"other{n}")
        await drop(hub, f"other{n}")
    assert await head(hub, "news") == before
    await start(hub, "news")
    assert await resume(hub, "news", before) == [1]


async def test_a_forgotten_channel_gets_an_unstarted_epoch_it_never_had():
    """Past `NAMES_KEPT` channels, the one whose epoch ended longest ago is forgotten; its slot's
    count goes up, so its unstarted epoch (and its slot-mates') changes instead of going back
    to one handed out before."""
    with mock.patch.object(memory, "NAMES_KEPT", 1), mock.patch.object(memory, "SLOTS", 1):
        hub = make_hub()
        async with hub.broker.running(hub):
            first = await head(hub, "news")
            await start(hub, "news")
            await drop(hub, "news")
            second = await head(hub, "news")
            await start(hub, "other")
            await drop(hub, "other")  # "news" is forgotten
            third = await head(hub, "news")
            assert len({first.epoch, second.epoch, third.epoch}) == 3
            await start(hub, "news")
            assert await resume(hub, "news", first) == [("epoch", 1, 0), 1]
            assert await resume(hub, "news", second) == [("epoch", 1, 0), 1]
            assert await resume(hub, "news", third) == [1]
            assert len(hub.broker._ended) == 1  # type: ignore[attr-defined]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abc"), st.booleans()), max_size=30))
def test_an_unstarted_epoch_never_comes_back_after_an_epoch_of_its_channel_ended(steps):
    """Whatever channels start and end (two names kept, two slots): every unstarted epoch a
    channel hands out after one of its epochs ended differs from all it handed out before."""

    async def run() -> None:
        hub = make_hub()
        async with hub.broker.running(hub):
            await steps_of(hub)

    async def steps_of(hub: Hub) -> None:
        before: dict[str, set[str]] = {name: set() for name in "abc"}
        now: dict[str, set[str]] = {name: set() for name in "abc"}
        for name, ends in steps:
            epoch = (await head(hub, name)).epoch
            assert epoch not in before[name]
            now[name].add(epoch)
            if ends:
                await start(hub, name)
                await drop(hub, name)
                before[name] |= now[name]
                now[name] = set()

    with mock.patch.object(memory, "NAMES_KEPT", 2), mock.patch.object(memory, "SLOTS", 2):
        asyncio.run(run())


def test_an_epoch_names_the_unstarted_epoch_it_began_after():
    generation = unstarted("9c1f02ab")
    assert generation == "u9c1f02ab"
    assert born(generation, "9c1f02ab1") == generation
    assert born(generation, "9c1f02ab1" + epoch_tag(2, 0)) == "u9c1f02abg2"
    assert born(generation, "u9c1f02ab" + epoch_tag(0, 10)) == "u9c1f02abna"
    assert epoch_tag(0, 0) == "" and epoch_tag(1, 1) == "g1n1"
    tag = epoch_tag(2**32 - 1, 2**40)  # counts far past real ones, in a Redis epoch and marker
    assert EPOCH_RE.fullmatch("f" * 10 + tag) and EPOCH_RE.fullmatch(unstarted("f" * 10, tag))
