"""The Python client's publish retries: the answer to a publish is lost (the connection is cut
after the server published), the client tries again with the same idempotency key, and the
message is delivered once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import aiohttp
from pushclient import NetworkError, PushClient
from pushclient.backoff import Backoff

from pushserver.launcher import ServerProcess

from ...tcpproxy import TcpProxy
from ...wire import Subscriber, publish, take, wait_for_subscribers


def _cut_first(n: int) -> Callable[[], int | None]:
    """The first `n` connections are cut before any byte of the answer; the rest pass."""
    budgets = iter([0] * n)
    return lambda: next(budgets, None)


async def test_publish_answers_lost_are_retried_and_delivered_once(
    server_factory: Callable[..., ServerProcess],
) -> None:
    server = server_factory()
    fast = Backoff(initial=0.01, maximum=0.05)
    async with (
        aiohttp.ClientSession() as s,
        TcpProxy(server.port, cut_after=_cut_first(3)) as single,
        TcpProxy(server.port, cut_after=_cut_first(1)) as batch,
        PushClient(single.url, backoff=fast) as one_client,
        PushClient(batch.url, backoff=fast) as batch_client,
    ):
        sub = Subscriber(s, server.url, "stream", "retry")
        await sub.connect()
        await wait_for_subscribers(s, server.url, "retry", 1)
        reader = asyncio.create_task(take(sub, 4))
        one = await one_client.publish("retry", "one")
        many = await batch_client.publish_many([("retry", "two"), {"channel": "retry", "data": 3}])
        await publish(s, server.url, "retry", "last")
        events = await reader
        assert [e["data"] for e in events] == ["one", "two", 3, "last"]
        assert [e["id"] for e in events] == [1, 2, 3, 4]
        assert (one.id, [r.id for r in many]) == (1, [2, 3])
        assert (single.cuts, batch.cuts) == (3, 1)
        await sub.close()


async def test_publish_without_retries_reports_the_lost_answer(
    server_factory: Callable[..., ServerProcess],
) -> None:
    server = server_factory()
    async with (
        TcpProxy(server.port, cut_after=_cut_first(1)) as proxy,
        PushClient(proxy.url, publish_retries=0) as client,
    ):
        try:
            await client.publish("lost", "x")
        except NetworkError:
            pass
        else:
            raise AssertionError("a cut answer must raise NetworkError")
        assert (await client.channel("lost"))["last_id"] == 1  # published all the same
