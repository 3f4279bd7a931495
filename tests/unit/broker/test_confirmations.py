"""Waiting for SUBSCRIBE confirmations (`following.Following._confirmed`): a link still
confirming what was asked before is busy, not gone. Losing it instead, when 192,000 channels
were subscribed at once, refused two thirds of the flood's polls with 503."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from unittest import mock

import pytest
from redis.exceptions import TimeoutError as RedisTimeoutError

from pushserver.broker.redis import following
from pushserver.config import Settings

TIMEOUT = 0.05


class Link:
    def __init__(self) -> None:
        self.confirmed = 0
        self.lost: list[BaseException] = []

    def lose(self, exc: BaseException) -> None:
        self.lost.append(exc)


class Shard:
    def __init__(self, link: Link) -> None:
        self.link = link


def records(link: Link, count: int) -> list[SimpleNamespace]:
    loop = asyncio.get_running_loop()
    shard = Shard(link)
    return [SimpleNamespace(confirmed=loop.create_future(), shard=shard) for _ in range(count)]


async def confirm_slowly(link: Link, others: int, mine: list[SimpleNamespace]) -> None:
    """Confirm `others` topics asked before, one every half timeout, then `mine`."""
    for _ in range(others):
        await asyncio.sleep(TIMEOUT / 2)
        link.confirmed += 1
    for rec in mine:
        link.confirmed += 1
        rec.confirmed.set_result(None)


async def test_a_link_confirming_others_first_is_waited_for_past_the_timeout() -> None:
    link = Link()
    engine = following.Following(Settings())
    mine = records(link, 3)
    with mock.patch.object(following, "CONFIRM_TIMEOUT", TIMEOUT):
        slow = asyncio.create_task(confirm_slowly(link, 8, mine))  # 4 timeouts long
        await engine._confirmed(mine)  # type: ignore[arg-type]
        await slow
    assert link.lost == []


async def test_a_link_that_confirms_nothing_for_the_timeout_is_lost() -> None:
    link = Link()
    engine = following.Following(Settings())
    mine = records(link, 2)
    with mock.patch.object(following, "CONFIRM_TIMEOUT", TIMEOUT), pytest.raises(RedisTimeoutError):
        await engine._confirmed(mine)  # type: ignore[arg-type]
    assert len(link.lost) == 1
    assert not any(rec.confirmed.done() for rec in mine)  # shared: left for the link's loss
