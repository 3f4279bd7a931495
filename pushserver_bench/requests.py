"""Closed-loop request load from client processes: the load of experiments 4 and 5."""

from __future__ import annotations

from typing import Any

from .context import Bench
from .machine import CpuMeter
from .pool import ClientPool, RequestPlan, merge, spread


async def request_load(
    bench: Bench, url: str, kind: str, channel: str, connections: int, count: int
) -> dict[str, Any]:
    """`count` requests of `kind` ("publish" or "longpoll") over `connections` connections."""
    procs = spread(connections, bench.processes)
    counts = spread(count, len(procs)) if count >= len(procs) else [count] + [0] * (len(procs) - 1)
    plans = [
        RequestPlan(url, kind, channel, conns, n) for conns, n in zip(procs, counts, strict=True)
    ]
    meter = CpuMeter(url)
    async with ClientPool(plans, bench.client_cpus) as pool:
        await meter.start()
        report = merge(await pool.collect())
        wall, server_cpu, client_cpu = await meter.stop()
    report.update(wall=wall, server_cpu=server_cpu, client_cpu=client_cpu + report["cpu"])
    return report
