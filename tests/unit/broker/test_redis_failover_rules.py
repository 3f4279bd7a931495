"""The rules that keep a Redis failover from handing an id out twice: when a promoted replica
may be trusted to hold everything anyone saw, and when a read proves Redis lost ids."""

from __future__ import annotations

from typing import Any, cast

import pytest

from pushserver.broker.redis.engine import covers_every_replica
from pushserver.broker.redis.scripts import rolled_back
from pushserver.broker.redis.single import RedisBroker
from pushserver.config import Settings


def test_a_promoted_replica_is_trusted_only_when_every_publish_waited_for_every_replica() -> None:
    assert covers_every_replica(1, 1)
    assert covers_every_replica(2, 2)
    assert covers_every_replica(2, 1)  # fewer replicas now than WAIT asks: publishes refused
    assert covers_every_replica(1, 0)
    assert not covers_every_replica(1, 2)  # the replica that answered may not be promoted
    assert not covers_every_replica(0, 0)  # no WAIT: nothing says any replica holds anything
    assert not covers_every_replica(0, 1)


def test_a_read_in_the_same_epoch_below_what_was_seen_before_asking_is_a_rollback() -> None:
    assert rolled_back(("e1", 16), b"e1", 14)
    assert rolled_back(("e1", 1), b"e1", 0)


def test_a_read_at_or_past_the_position_or_in_another_epoch_is_not() -> None:
    assert not rolled_back(("e1", 16), b"e1", 16)
    assert not rolled_back(("e1", 16), b"e1", 30)
    assert not rolled_back(("e1", 16), b"e2", 3)  # a new epoch: a jump, announced as one
    assert not rolled_back(("e1", 16), None, 0)  # no keys: the unstarted epoch, a jump too


def test_a_first_read_or_one_from_the_start_of_an_epoch_proves_nothing() -> None:
    assert not rolled_back(("", -1), b"e1", 0)  # a first read: the last N, nothing seen yet
    assert not rolled_back(("e1", 0), b"e1", 0)


class Primary:
    """A shard as `Engine.observe` reads it: its lineage and how many replicas it reports."""

    def __init__(self, replicas: int) -> None:
        self.name = "redis"
        self.replicas = replicas

    async def replication(self) -> tuple[str, int]:
        return "0a1b2c3d", self.replicas


@pytest.mark.parametrize(
    ("wait", "reported", "trusted"),
    [(1, [1], "*"), (1, [1, 2], ""), (2, [1, 2, 1], "*"), (0, [1], "")],
)
async def test_the_trust_a_publish_carries_follows_every_replica_count_observed(
    wait: int, reported: list[int], trusted: str
) -> None:
    """Worked out once per count (`observe`), not per publish: it must still move with it."""
    engine = RedisBroker(Settings(redis="redis://127.0.0.1:1/0", redis_replicas=wait))
    assert engine.trusted() == ("*" if wait else "")  # before any primary is read
    for replicas in reported:
        await engine.observe(cast(Any, Primary(replicas)))
    assert engine.trusted() == engine.plan.trusted() == trusted
    await engine.stop()
