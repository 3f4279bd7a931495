"""Chaos on the Redis engine: one publisher and subscribers on all four transports, every
connection through a cutting proxy, while Redis restarts, Redis freezes for 10 s, a worker of
`--workers 2` is SIGKILLed, or a node is SIGTERMed and its clients move to the other node.

The check, for every subscriber: every message answered 201 is delivered exactly once, in
order, or is covered by a gap and truly gone from Redis; no message is delivered twice. The
clients are `pushclient`'s (cursor resume, idempotent publish retries). Each scenario is
bounded (about a minute at most) and talks to loopback only.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
import pytest
from pushclient import TRANSPORT_NAMES, Backoff, Gap, Message, PushClient, PushError

from pushserver.launcher import ServerProcess

from ...redis_fixture import RedisServer, redis_server_fixture  # noqa: F401
from ...tcpproxy import TcpProxy
from ..transports.test_core_transports import head_cursor

CHANNEL = "chaos"
FAST = Backoff(initial=0.02, maximum=0.5)
SETTLE = 40.0
"""Seconds any wait in a scenario may take before it fails."""


@dataclass
class Run:
    """What the publisher had acknowledged and what each subscriber received."""

    acked: list[int] = field(default_factory=list)
    received: dict[str, list[Message | Gap]] = field(default_factory=dict)
    stop: asyncio.Event = field(default_factory=asyncio.Event)


def _cuts(rng: random.Random, low: int, high: int) -> Callable[[], int | None]:
    """Cut most connections somewhere in their first `low`..`high` bytes back to the client."""
    return lambda: rng.randint(low, high) if rng.random() < 0.8 else None


async def _until(probe: Callable[[], Awaitable[bool]], what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SETTLE
    while not await probe():
        assert loop.time() < deadline, f"no {what} within {SETTLE}s"
        await asyncio.sleep(0.05)


async def _publisher(client: PushClient, run: Run) -> None:
    n = 0
    while not run.stop.is_set():
        n += 1
        with contextlib.suppress(PushError):
            await client.publish(CHANNEL, n)
            run.acked.append(n)
        await asyncio.sleep(0.02)  # the publish rate: about 50 a second


async def _subscriber(client: PushClient, transport: str, cursor: str, got: list[Any]) -> None:
    async for item in client.subscribe(CHANNEL, transport=transport, cursor=cursor):
        got.append(item)


def _in_redis(redis: RedisServer) -> set[int]:
    entries = redis.client().xrange(f"pushserver:h:{CHANNEL}")
    return {orjson.loads(fields[b"d"]) for _, fields in entries}  # the publisher's numbers


def _check(name: str, events: list[Message | Gap], acked: list[int], kept: set[int]) -> None:
    delivered = [e.data for e in events if isinstance(e, Message) and isinstance(e.data, int)]
    assert len(delivered) == len(set(delivered)), f"{name}: duplicates"
    assert delivered == sorted(delivered), f"{name}: out of order"
    at = {e.data: i for i, e in enumerate(events) if isinstance(e, Message)}
    assert len(at) == sum(isinstance(e, Message) for e in events), f"{name}: duplicates"
    got = [n for n in acked if n in at]
    for n in acked:
        if n in at:
            continue
        assert n not in kept, f"{name}: acknowledged {n} is still in Redis but never delivered"
        before = [m for m in got if m < n]
        after = [m for m in got if m > n]
        low = at[before[-1]] if before else -1
        high = at[after[0]] if after else len(events)
        assert any(isinstance(e, Gap) for e in events[low + 1 : high]), (
            f"{name}: acknowledged {n} lost without a gap"
        )


async def _scenario(
    redis: RedisServer,
    urls: tuple[str, str],
    fault: Callable[[dict[str, TcpProxy]], Awaitable[None]],
    seed: int,
) -> Run:
    """Publish and subscribe through cutting proxies (subscribers half on each of `urls`), run
    `fault`, publish on until deliveries resume, then check every subscriber."""
    rng = random.Random(seed)
    run = Run()
    ports = [int(url.rsplit(":", 1)[1]) for url in urls]
    async with contextlib.AsyncExitStack() as stack:
        proxies = {
            "a": await stack.enter_async_context(TcpProxy(ports[0], cut_after=_cuts(rng, 1, 6000))),
            "b": await stack.enter_async_context(TcpProxy(ports[1], cut_after=_cuts(rng, 1, 6000))),
            "pub": await stack.enter_async_context(
                TcpProxy(ports[0], cut_after=_cuts(rng, 0, 3000))
            ),
        }
        session = await stack.enter_async_context(aiohttp.ClientSession())
        cursor = await head_cursor(session, urls[0], CHANNEL)
        clients = {}
        for side in ("a", "b", "pub"):
            clients[side] = await stack.enter_async_context(
                PushClient(proxies[side].url, backoff=FAST, heartbeat=0.5, poll_timeout=2)
            )
        tasks = []
        for side in ("a", "b"):
            for transport in TRANSPORT_NAMES:
                got = run.received[f"{side}/{transport}"] = []
                tasks.append(
                    asyncio.create_task(_subscriber(clients[side], transport, cursor, got))
                )
        publisher = asyncio.create_task(_publisher(clients["pub"], run))
        try:

            async def acked_past(count: int) -> bool:
                assert not publisher.done(), publisher
                return len(run.acked) >= count

            await _until(lambda: acked_past(40), "publishing before the fault")
            await fault(proxies)
            recovered_at = len(run.acked) + 60
            await _until(lambda: acked_past(recovered_at), "publishing after the fault")
            run.stop.set()
            await publisher
            last = run.acked[-1]

            async def all_caught_up() -> bool:
                return all(
                    any(isinstance(e, Message) and e.data == last for e in got)
                    for got in run.received.values()
                )

            await _until(all_caught_up, "delivery of the last acknowledged message everywhere")
        finally:
            for task in [*tasks, publisher]:
                task.cancel()
            await asyncio.gather(*tasks, publisher, return_exceptions=True)
    kept = _in_redis(redis)
    for name, events in run.received.items():
        _check(name, events, run.acked, kept)
    gaps = sum(isinstance(e, Gap) for events in run.received.values() for e in events)
    cuts = sum(p.cuts for p in proxies.values())
    print(f"acked {len(run.acked)}, subscribers {len(run.received)}, gaps {gaps}, cuts {cuts}")
    return run


def _node(server_factory: Callable[..., ServerProcess], redis: RedisServer, *extra: str) -> Any:
    return server_factory("--redis", redis.url, "--heartbeat", "0.5", *extra)


async def test_chaos_redis_restart(
    redis_server: RedisServer, server_factory: Callable[..., ServerProcess]
) -> None:
    """Redis restarts empty; node b's link to it stays cut a while longer, so a publishes to
    the new epoch before b is back (b must still deliver all of it)."""
    closed = False
    async with TcpProxy(redis_server.port, cut_after=lambda: 0 if closed else None) as gate:
        a = _node(server_factory, redis_server)
        b = server_factory("--redis", f"redis://127.0.0.1:{gate.port}/0", "--heartbeat", "0.5")

        async def restart(_: dict[str, TcpProxy]) -> None:
            nonlocal closed
            closed = True
            redis_server.stop(signal.SIGKILL)
            redis_server.restart()
            async with aiohttp.ClientSession() as s:

                async def published_while_b_is_away() -> bool:
                    async with s.post(f"{a.url}/pub/{CHANNEL}", json="while b is away") as r:
                        return r.status == 201

                await _until(published_while_b_is_away, "a publish to the new epoch")
            closed = False

        await _scenario(redis_server, (a.url, b.url), restart, seed=1)


async def test_chaos_redis_frozen_for_ten_seconds(
    redis_server: RedisServer, server_factory: Callable[..., ServerProcess]
) -> None:
    a, b = _node(server_factory, redis_server), _node(server_factory, redis_server)

    async def freeze(_: dict[str, TcpProxy]) -> None:
        assert redis_server.proc is not None
        redis_server.proc.send_signal(signal.SIGSTOP)
        try:
            await asyncio.sleep(10)  # the fault itself: Redis hangs this long
        finally:
            redis_server.proc.send_signal(signal.SIGCONT)

    await _scenario(redis_server, (a.url, b.url), freeze, seed=2)


async def test_chaos_worker_killed(
    redis_server: RedisServer, server_factory: Callable[..., ServerProcess]
) -> None:
    srv = _node(server_factory, redis_server, "--workers", "2")

    async def kill_worker(_: dict[str, TcpProxy]) -> None:
        pids: dict[int, int] = {}
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as s:

            async def both_seen() -> bool:
                async with s.get(f"{srv.url}/stats") as r:
                    stats = await r.json()
                pids[stats["worker"]] = stats["pid"]
                return len(pids) == 2

            await _until(both_seen, "both workers")
        os.kill(pids[1], signal.SIGKILL)

    await _scenario(redis_server, (srv.url, srv.url), kill_worker, seed=3)


async def test_chaos_node_stopped_and_its_clients_move(
    redis_server: RedisServer, server_factory: Callable[..., ServerProcess]
) -> None:
    a, b = _node(server_factory, redis_server), _node(server_factory, redis_server)

    async def stop_a(proxies: dict[str, TcpProxy]) -> None:
        for name in ("a", "pub"):  # new connections go to b from now on
            proxies[name].upstream = ("127.0.0.1", b.port)
        assert await asyncio.to_thread(a.stop, signal.SIGTERM) == 0

    await _scenario(redis_server, (a.url, b.url), stop_a, seed=4)


pytestmark = pytest.mark.timeout(120)
