"""Experiment 5: publish throughput for 100,000 messages by publisher connections × server
workers. Two workers share channels through Redis, so that row needs `--redis`."""

from __future__ import annotations

from .context import Bench, channel
from .requests import request_load
from .stats import rate
from .table import Table

CONNECTIONS = (1, 2, 4, 8, 16, 32)


async def run(bench: Bench) -> list[Table]:
    messages = bench.size(100_000, 200)
    table = Table(
        5,
        f"publish throughput, {messages:,} messages",
        ["workers", "connections", "seconds", "messages/s", "server CPU s", "client CPU s"],
    )
    table.notes.append(
        "one POST /pub/{channel} per 100-byte message, no subscribers, closed loop per "
        f"connection, connections spread over up to {bench.processes} client processes; "
        "server CPU is worker 0's (from its /stats)"
    )
    for workers in (1, 2):
        args = ["--workers", str(workers), "--redis", bench.redis] if workers > 1 else []
        if workers > 1 and not (bench.redis and bench.launches):
            table.add(workers, "all", "n/a (needs --redis)", "", "", "")
            continue
        with bench.server(*args) as url:
            for connections in CONNECTIONS:
                r = await request_load(bench, url, "publish", channel("thr"), connections, messages)
                window = r["last"] - r["first"]
                table.add(
                    workers,
                    connections,
                    window,
                    rate(len(r["times"]), window),
                    r["server_cpu"],
                    r["client_cpu"],
                    lost=messages - len(r["times"]),
                    errors=r["errors"],
                )
    return [table]
