"""Experiment 5: publish throughput for 100,000 messages by publisher connections x server
workers. Two workers share channels through Redis: the bench uses `--redis URL`, or starts a
throwaway redis-server when one is installed."""

from __future__ import annotations

from .context import Bench, channel
from .redisserver import redis_url
from .requests import request_load
from .stats import rate
from .table import Table

CONNECTIONS = (1, 2, 4, 8, 16, 32)
NEEDS_REDIS = "n/a (needs --redis)"


async def run(bench: Bench) -> list[Table]:
    messages = bench.size(100_000, 200)
    table = Table(
        5,
        f"publish throughput, {messages:,} messages",
        [
            "workers",
            "broker",
            "connections",
            "seconds",
            "messages/s",
            "server CPU s",
            "client CPU s",
        ],
    )
    table.notes.append(
        "one POST /pub/{channel} per 100-byte message, no subscribers, closed loop per "
        f"connection, connections spread over up to {bench.processes} client processes; "
        "server CPU: all its processes (supervisor and workers; not Redis)"
    )
    with redis_url(bench.redis) as redis:
        for workers, broker in ((1, "memory"), (2, "redis")):
            if broker == "redis" and not (redis and bench.launches):
                table.add(workers, broker, "all", NEEDS_REDIS, "", "", "")
                continue
            args = ["--workers", str(workers), "--redis", redis] if broker == "redis" else []
            with bench.server(*args) as url:
                for connections in CONNECTIONS:
                    r = await request_load(
                        bench, url, "publish", channel("thr"), connections, messages
                    )
                    window = r["last"] - r["first"]
                    table.add(
                        workers,
                        broker,
                        connections,
                        window,
                        rate(len(r["times"]), window),
                        r["server_cpu"],
                        r["client_cpu"],
                        lost=messages - len(r["times"]),
                        errors=r["errors"],
                    )
    return [table]
