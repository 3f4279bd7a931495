"""The bench's client processes against a real server: with `cpus` they run only there, and
they still receive everything."""

from __future__ import annotations

import asyncio
import os

from pushserver.launcher import ServerProcess
from pushserver_bench.client import Publisher
from pushserver_bench.context import channel
from pushserver_bench.pool import ClientPool, RequestPlan, SubPlan, merge
from pushserver_bench.targets import Target


async def subscribe_and_publish(url: str, cpus: frozenset[int]) -> list[dict]:
    name = channel("pool")
    plans = [SubPlan(url, transport, [name] * 3, 2) for transport in ("longpoll", "sse")]
    async with ClientPool(plans, cpus) as pool:
        await Target.of("pushserver", url).wait_subscribed(name, 6)
        publisher = await Publisher.open(url)
        try:
            for _ in range(2):
                await publisher.one(name)
        finally:
            publisher.close()
        return await pool.collect()


def test_subscribers_run_on_the_cpus_given() -> None:
    cpu = max(os.sched_getaffinity(0))
    with ServerProcess() as server:
        reports = asyncio.run(subscribe_and_publish(server.url, frozenset({cpu})))
    assert [r["cpus"] for r in reports] == [[cpu], [cpu]]
    report = merge(reports)
    assert report["received"] == report["expected"] == 12 and report["errors"] == []


def test_without_cpus_they_run_where_the_bench_may() -> None:
    with ServerProcess() as server:
        reports = asyncio.run(subscribe_and_publish(server.url, frozenset()))
    assert [r["cpus"] for r in reports] == [sorted(os.sched_getaffinity(0))] * 2


async def publish_load(url: str, cpus: frozenset[int]) -> list[dict]:
    async with ClientPool([RequestPlan(url, "publish", channel("poolpub"), 2, 10)], cpus) as pool:
        return await pool.collect()


def test_request_loads_run_on_the_cpus_given() -> None:
    cpu = min(os.sched_getaffinity(0))
    with ServerProcess() as server:
        (report,) = asyncio.run(publish_load(server.url, frozenset({cpu})))
    assert report["cpus"] == [cpu] and len(report["times"]) == 10 and report["errors"] == []
