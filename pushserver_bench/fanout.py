"""Publishers x subscribers on one channel, subscribers in client processes: the load shared
by experiments 2, 3, 6 and the fan-out budget."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from .client import Publisher, wait_held, wait_subscribed
from .context import Bench
from .machine import CpuMeter
from .pool import ClientPool, SubPlan, merge, spread


async def fan_out(
    bench: Bench,
    url: str,
    transport: str,
    publish_to: str,
    listen_on: list[str],
    messages: int,
    publishers: int = 1,
    batch: int = 0,
    expect: int | None = None,
    workers: int = 1,
) -> dict[str, Any]:
    """`publishers` connections publish `messages` in all to `publish_to` (one request per
    message, or `batch` per request) while one subscriber per `listen_on` entry counts them.

    Each subscriber must receive `expect` (default: all `messages`); `workers` is how many
    server processes share the URL."""
    expect = messages if expect is None else expect
    plans = [
        SubPlan(url, transport, listen_on[i :: bench.processes], expect)
        for i in range(min(bench.processes, len(listen_on)))
    ]
    meter = CpuMeter(url)
    async with ClientPool(plans, bench.client_cpus) as pool:
        if workers > 1:  # each worker counts only its own subscribers
            await wait_held(url, transport, len(listen_on), workers)
        else:
            for name in set(listen_on):
                await wait_subscribed(url, name, listen_on.count(name))
        pubs = [await Publisher.open(url) for _ in range(publishers)]
        await meter.start()
        start = time.time()
        await asyncio.gather(
            *(
                _publish(p, publish_to, n, batch)
                for p, n in zip(pubs, spread(messages, publishers), strict=False)
            )
        )
        published = time.time()
        at_published = await meter.server_now()
        report = merge(await pool.collect())
        wall, server_cpu, client_cpu = await meter.stop()
        for p in pubs:
            p.close()
    report.update(
        start=start,
        published=published,
        wall=wall,
        server_cpu=server_cpu,
        server_cpu_publishing=at_published,
        client_cpu=client_cpu + report["cpu"],
        lost=report["expected"] - report["received"],
    )
    return report


async def _publish(publisher: Publisher, channel: str, n: int, batch: int) -> None:
    if not batch:
        for _ in range(n):
            await publisher.one(channel)
        return
    while n > 0:
        await publisher.batch(channel, min(batch, n))
        n -= batch
