"""Experiment 4: request latency at concurrency 1 vs 100, for publish requests and long-poll
round trips (a poll answered at once from the channel's history)."""

from __future__ import annotations

import statistics

from .client import Publisher
from .context import Bench, channel
from .requests import request_load
from .stats import ms, percentile, rate
from .table import Table


async def run(bench: Bench) -> list[Table]:
    table = Table(
        4,
        "request latency at concurrency 1 vs 100",
        [
            "request",
            "concurrency",
            "requests",
            "mean ms",
            "p99 ms",
            "ms per request (all)",
            "requests/s",
            "server CPU %",
            "client CPU s",
        ],
    )
    table.notes.append(
        "closed loop: each connection sends its next request when the previous is answered; "
        "publish = POST /pub/{channel} (100 bytes, no subscribers); long-poll = "
        "GET /lp/{channel}?history=1&timeout=0 (answered from history); "
        f"connections spread over up to {bench.processes} client processes"
    )
    with bench.server() as url:
        name = channel("conc")
        publisher = await Publisher.open(url)
        await publisher.one(name)
        publisher.close()
        for kind, label in (("publish", "publish"), ("longpoll", "long-poll")):
            for concurrency, count in ((1, bench.size(2000, 20)), (100, bench.size(20_000, 200))):
                r = await request_load(bench, url, kind, name, concurrency, count)
                window = r["last"] - r["first"]
                times = r["times"]
                table.add(
                    label,
                    concurrency,
                    len(times),
                    ms(statistics.fmean(times)),
                    ms(percentile(times, 0.99)),
                    ms(window / len(times)),
                    rate(len(times), window),
                    100 * r["server_cpu"] / r["wall"],
                    r["client_cpu"],
                    lost=count - len(times),
                    errors=r["errors"],
                )
    return [table]
