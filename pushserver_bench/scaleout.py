"""Experiment 8: the Redis broker's scale-out on loopback.

Latency 1→1 with the publisher and the subscriber on one node or on two nodes sharing one Redis,
and stream fan-out through one process or `--workers 2` behind one port. Needs Redis (`--redis`
or an installed redis-server) and servers the bench starts itself."""

from __future__ import annotations

from .context import Bench, channel
from .fanout import fan_out
from .latency import pingpong
from .redisserver import redis_url
from .stats import rate, summary_ms
from .table import Table
from .throughput import NEEDS_REDIS

BATCH = 10
PUBLISHERS = 8
"""Connections publishing one message per request in the per-request fan-out."""


async def run(bench: Bench) -> list[Table]:
    messages = bench.size(2000, 20)
    subscribers, fan_messages = bench.size(1000, 20), bench.size(1000, 20)
    listeners, singles = bench.size(100, 5), bench.size(10000, 40)
    table = Table(
        8,
        "Redis scale-out",
        ["measurement", "server", "p50 ms", "p99 ms", "deliveries/s", "server CPU s"],
    )
    table.notes.append(
        f"latency: 1 stream subscriber, {messages:,} messages, the next one published when the "
        f"last arrived; fan-out: {subscribers:,} stream subscribers of one channel over "
        f"{bench.processes} client processes, {fan_messages:,} messages in POST /pub batches "
        f"of {BATCH}; per-request fan-out: {listeners:,} SSE subscribers, {singles:,} messages "
        f"from {PUBLISHERS} connections, one message per request; server CPU: the subscribers' "
        "node (all its workers; not Redis)"
    )
    with redis_url(bench.redis) as redis:
        if not (redis and bench.launches):
            table.add("all", NEEDS_REDIS, "", "", "", "")
            return [table]
        on_redis = ("--redis", redis)
        with bench.server() as url:
            await _latency(table, "memory broker, one node", url, url, messages)
        with bench.server(*on_redis) as a, bench.server(*on_redis) as b:
            await _latency(table, "Redis, same node", a, a, messages)
            await _latency(table, "Redis, node A → node B", b, a, messages)
        with bench.server(*on_redis, "--workers", "2") as url:
            await _latency(table, "Redis, --workers 2", url, url, messages, workers=2)
        servers = (
            ("memory broker, 1 process", (), 1),
            ("Redis broker, 1 process", on_redis, 1),
            ("Redis broker, --workers 2", (*on_redis, "--workers", "2"), 2),
        )
        for label, args, workers in servers:
            with bench.server(*args) as url:
                await _fan_out(
                    table, "stream fan-out", label, bench, url, workers, subscribers, fan_messages
                )
        for label, args, workers in servers:
            with bench.server(*args) as url:
                await _fan_out(
                    table, "per-request fan-out", label, bench, url, workers, listeners, singles
                )
    return [table]


async def _fan_out(
    table: Table,
    measurement: str,
    label: str,
    bench: Bench,
    url: str,
    workers: int,
    subs: int,
    n: int,
) -> None:
    """Stream fan-out in batches of `BATCH`, or SSE with one message per request."""
    name = channel("scale")
    batched = measurement == "stream fan-out"
    r = await fan_out(
        bench,
        url,
        "stream" if batched else "sse",
        name,
        [name] * subs,
        n,
        publishers=1 if batched else PUBLISHERS,
        batch=BATCH if batched else 0,
        workers=workers,
    )
    speed = rate(n * subs, r["last"] - r["start"])
    table.add(
        measurement, label, "", "", speed, r["server_cpu"], lost=r["lost"], errors=r["errors"]
    )


async def _latency(
    table: Table, label: str, sub_url: str, pub_url: str, messages: int, workers: int = 1
) -> None:
    r = await pingpong(sub_url, "stream", 1, messages, publish_url=pub_url, workers=workers)
    median, p99, _ = summary_ms(r["latencies"])
    table.add(
        "latency 1→1", label, median, p99, "", r["server_cpu"], lost=r["lost"], errors=r["errors"]
    )
