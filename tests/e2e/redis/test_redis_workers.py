"""`--workers N`: several processes on one port, sharing channels through Redis."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import aiohttp

from pushserver.launcher import ServerProcess

from ...redis_fixture import RedisServer, redis_server_fixture  # noqa: F401
from ...wire import TRANSPORTS, Subscriber, publish, take
from ..transports.test_core_transports import head_cursor


def test_workers_refuse_to_start_without_redis() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pushserver", "--port", "0", "--workers", "2"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "--redis" in done.stderr
    assert "pushserver listening" not in done.stdout


async def test_every_worker_serves_and_every_subscriber_gets_everything(
    redis_server: RedisServer, server_factory: Callable[..., ServerProcess]
) -> None:
    srv = server_factory("--workers", "2", "--redis", redis_server.url, "--heartbeat", "0.5")
    held_per_transport, total = 4, 20
    fresh = aiohttp.TCPConnector(force_close=True, limit=0)  # every request a new connection
    async with aiohttp.ClientSession(connector=fresh) as s:
        start = await head_cursor(s, srv.url, "wide")
        subs = []
        for transport in TRANSPORTS:
            for _ in range(held_per_transport):
                cursor = start if transport == "longpoll" else None
                sub = Subscriber(s, srv.url, transport, "wide", cursor)
                await sub.connect()
                subs.append(sub)
        held = 3 * held_per_transport
        latest: dict[int, dict[str, Any]] = {}
        on_channel: dict[int, int] = {}  # each worker's own subscribers of "wide"

        async def all_held_and_both_workers_seen() -> bool:
            async with s.get(f"{srv.url}/stats") as r:
                stats = await r.json()
            latest[stats["worker"]] = stats
            async with s.get(f"{srv.url}/channels/wide") as r:
                if r.status == 200:  # 404: a worker none of them landed on
                    info = await r.json()
                    on_channel[info["worker"]] = info["subscribers"]
            counted = sum(
                seen["connections"][t] for seen in latest.values() for t in ("stream", "sse", "ws")
            )
            polls = sum(seen["connections"]["longpoll"] for seen in latest.values())
            return (
                set(latest) == {0, 1}
                and counted == held
                and sum(on_channel.values()) == held + polls
            )

        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while not await all_held_and_both_workers_seen():
            assert loop.time() < deadline, f"workers seen: {latest}"
            await asyncio.sleep(0.02)
        readers = [asyncio.create_task(take(sub, total)) for sub in subs]
        for n in range(1, total + 1):
            assert (await publish(s, srv.url, "wide", n))["id"] == n
        for sub, reader in zip(subs, readers, strict=True):
            events = await reader
            assert [e["id"] for e in events] == list(range(1, total + 1)), sub.transport
            assert [e["data"] for e in events] == list(range(1, total + 1))
            await sub.close()

        os.kill(latest[1]["pid"], signal.SIGKILL)  # the supervisor replaces a dead worker

        async def worker_1_replaced() -> bool:
            try:
                async with s.get(f"{srv.url}/stats") as r:
                    stats = await r.json()
            except aiohttp.ClientConnectionError:  # queued on the killed worker's socket
                return False
            return stats["worker"] == 1 and stats["pid"] != latest[1]["pid"]

        deadline = loop.time() + 30
        while not await worker_1_replaced():
            assert loop.time() < deadline, "worker 1 was not replaced"
            await asyncio.sleep(0.02)
    assert srv.stop() == 0
    assert srv.log.count("pushserver listening on") == 1
