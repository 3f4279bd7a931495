"""Experiment 1: latency 1→1. Each message carries its send time; the next one is published
when the previous one has reached every subscriber, so the figure is latency, not queueing."""

from __future__ import annotations

from typing import Any

from .client import TRANSPORTS, Publisher, Tally, subscribe_many, wait_held, wait_subscribed
from .context import Bench, channel
from .machine import CpuMeter
from .stats import summary_ms
from .table import Table


async def pingpong(
    url: str,
    transport: str,
    subscribers: int,
    messages: int,
    publish_url: str = "",
    workers: int = 1,
) -> dict[str, Any]:
    """Publish `messages` one by one to `subscribers` subscribers of one channel, in process;
    through `publish_url` when given (another node), else through `url`, which `workers`
    server processes share."""
    name = channel("lat")
    tally = Tally(parse=True)
    meter = CpuMeter(url)
    subs = await subscribe_many(url, transport, [name] * subscribers, tally, messages)
    publisher = await Publisher.open(publish_url or url)
    try:
        if workers > 1:  # each worker counts only its own subscribers
            await wait_held(url, transport, subscribers, workers)
        else:
            await wait_subscribed(url, name, subscribers)
        await meter.start()
        for i in range(1, messages + 1):
            await publisher.one(name)
            if not await tally.reach(i * subscribers, 10):
                break
        wall, server_cpu, client_cpu = await meter.stop()
    finally:
        publisher.close()
        for _, close in subs:
            close()
    return {
        "latencies": tally.latencies,
        "lost": messages * subscribers - tally.received,
        "errors": tally.errors,
        "wall": wall,
        "server_cpu": server_cpu,
        "client_cpu": client_cpu,
    }


COLUMNS = ["transport", "messages", "median ms", "p99 ms", "max ms", "server CPU s", "client CPU s"]


def latency_row(label: str, messages: int, result: dict[str, Any]) -> list[Any]:
    return [
        label,
        messages,
        *summary_ms(result["latencies"]),
        result["server_cpu"],
        result["client_cpu"],
    ]


async def run(bench: Bench) -> list[Table]:
    messages = bench.size(5000, 20)
    table = Table(1, "latency 1→1 (publish with send time → receipt)", COLUMNS)
    table.notes.append(
        "1 publisher, 1 subscriber, 1 channel, 100-byte JSON messages, one POST /pub/{channel} "
        "per message, next one sent after receipt; client and server on loopback"
    )
    with bench.server() as url:
        for transport in TRANSPORTS:
            result = await pingpong(url, transport, 1, messages)
            table.add(
                *latency_row(transport, messages, result),
                lost=result["lost"],
                errors=result["errors"],
            )
    return [table]
