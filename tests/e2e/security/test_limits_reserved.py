"""Connection limits hold under a burst of concurrent subscribes, with either broker.

The slot is reserved before the subscribe's first await (with Redis, waiting for the channel's
SUBSCRIBE confirmation), so requests arriving together cannot all pass the check before any of
them is counted; and it is given back exactly once, so the counts return to zero.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest

from pushserver.launcher import ServerProcess

from ...redis_fixture import RedisServer, redis_server_fixture  # noqa: F401

BURST = 300


async def _stats(session: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    async with session.get(f"{url}/stats") as r:
        return await r.json()


async def _burst(url: str, path: str) -> tuple[Counter[int], dict[str, Any], dict[str, Any]]:
    """BURST concurrent subscribes; their statuses, /stats while the winners are held, and
    /stats once everything is closed."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
        responses = await asyncio.gather(*(s.get(f"{url}/{path}/burst") for _ in range(BURST)))
        statuses = Counter(r.status for r in responses)
        held = await _stats(s, url)
        for r in responses:
            r.close()
    # The session's close closes the refused connections it kept alive, which the server counts
    # as idle; /stats is then asked over connections that close after each answer.
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as s:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        while (after := await _stats(s, url))["connections"]["total"] and loop.time() < deadline:
            await asyncio.sleep(0.05)
    return statuses, held, after


@pytest.fixture(params=["memory", "redis"])
def broker_args(request: pytest.FixtureRequest) -> tuple[str, ...]:
    if request.param == "memory":
        return ()
    redis: RedisServer = request.getfixturevalue("redis_server")
    return ("--redis", redis.url)


@pytest.mark.parametrize(
    ("flag", "limit", "status", "key"),
    [
        ("--max-connections-per-ip", 5, 429, "max_connections_per_ip"),
        ("--max-connections", 10, 503, "max_connections"),
    ],
)
@pytest.mark.parametrize("path", ["stream", "sse"])
async def test_burst_of_subscribes_holds_exactly_the_limit(
    server_factory: Callable[..., ServerProcess],
    broker_args: tuple[str, ...],
    path: str,
    flag: str,
    limit: int,
    status: int,
    key: str,
) -> None:
    srv = server_factory(*broker_args, flag, str(limit))
    statuses, held, after = await _burst(srv.url, path)
    assert statuses == {200: limit, status: BURST - limit}
    assert held["connections"][path] == limit  # (refused connections kept alive are heads)
    assert held["limits_hit"][key] == BURST - limit
    assert after["connections"]["total"] == 0
