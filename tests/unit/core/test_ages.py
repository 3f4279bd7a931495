"""The fan-out's ages, counted by bucket in the hub as each one-channel fan-out is written."""

from __future__ import annotations

from pushserver.broker.memory import MemoryBroker
from pushserver.core.ages import FANOUT_AGE_BOUNDS, Ages
from pushserver.core.hub import Hub

from .test_hub import stream

PUBLISHED = 1024.0
"""The publish time the broker is made to see: from it, the bounds among the ages below are
exact floats."""


class Clocks:
    """The broker's clock and the fan-out's, passed to each: the broker stamps messages at
    `PUBLISHED`; the fan-out writes them `age` later."""

    def __init__(self) -> None:
        self.age = 0.0

    def published(self) -> float:
        return PUBLISHED

    def written(self) -> float:
        return PUBLISHED + self.age


def test_cumulative_counts_end_with_everything_at_inf():
    ages = Ages((0.1, 1.0))
    ages.counts[:] = [2, 0, 3]
    assert list(ages.cumulative()) == [(0.1, 2.0), (1.0, 2.0), (float("inf"), 5.0)]
    assert all(type(seen) is float for _, seen in ages.cumulative())


async def test_each_fan_out_counts_its_first_message_age_in_the_bucket_at_or_above_it():
    """A bound itself is in its own bucket (Prometheus' `le`); an age past every bound is in
    `+Inf`'s; a fan-out of several messages counts once, by its first message."""
    clocks = Clocks()
    broker = MemoryBroker(10, 300, 3600, clock=clocks.published)
    hub = Hub(broker, max_buffer_bytes=1000, clock=clocks.written)
    async with broker.running(hub):
        await stream(hub, ["a"])
        ages = hub.stats.fanout_ages
        assert ages.bounds == FANOUT_AGE_BOUNDS
        seen = [0.0003, 0.5, 0.07, 0.5, 3.0, 7.0, 5.0]
        for age in seen:
            clocks.age = age
            await hub.publish([("a", b"1")])
        clocks.age = 0.25
        await hub.publish([("a", b"2"), ("a", b"3")])
        await hub.publish([("nobody", b"4")])  # no one held: no fan-out, no age
    expected = dict.fromkeys((*FANOUT_AGE_BOUNDS, float("inf")), 0)
    for bound in (0.0005, 0.5, 0.1, 0.5, 5.0, float("inf"), 5.0, 0.25):
        expected[bound] += 1
    assert ages.counts == list(expected.values())
    total = 0.0
    for age in (*seen, 0.25):
        total += (PUBLISHED + age) - PUBLISHED  # as the fan-out sums them, in their order
    assert ages.total == total
