"""Experiment 2: publishers x subscribers. Latency with 1 publisher and 1 to 20 subscribers,
and throughput (events per second per subscriber, first to last receipt) for 1-1, 1-10, 10-1
and 5-5, publishing one request per message vs batched `POST /pub`."""

from __future__ import annotations

from .client import TRANSPORTS
from .context import Bench, channel
from .fanout import fan_out
from .latency import pingpong
from .stats import rate, summary_ms
from .table import Table

LATENCY_SHAPES = (1, 2, 5, 10, 20)
THROUGHPUT_SHAPES = ((1, 1), (1, 10), (10, 1), (5, 5))
BATCH = 100
HISTORY = 20_000  # long-polls catch up from the history: it must hold a whole run


async def run(bench: Bench) -> list[Table]:
    messages = bench.size(1000, 10)
    total = bench.size(10_000, 100)
    batch = bench.size(BATCH, 10)
    latency = Table(
        2,
        "publishers x subscribers: latency",
        [
            "transport",
            "pub-sub",
            "messages",
            "median ms",
            "p99 ms",
            "max ms",
            "server CPU s",
            "client CPU s",
        ],
    )
    latency.notes.append(
        "1 publisher, N subscribers of one channel in the bench process, 100-byte messages, "
        "one POST per message, next one sent when every subscriber has it"
    )
    throughput = Table(
        2,
        "publishers x subscribers: throughput",
        [
            "transport",
            "pub-sub",
            "publishing",
            "messages",
            "events/s per sub",
            "deliveries/s",
            "server CPU %",
            "client CPU s",
        ],
    )
    throughput.notes.append(
        f"{total:,} messages in all (100 bytes) to one channel, split over the publishers, each "
        f"on its own keep-alive connection; batched = {batch} messages per POST /pub; "
        f"subscribers spread over {bench.processes} client processes; events/s per subscriber "
        "= messages / (last receipt - first receipt); server started with --history-size "
        f"{HISTORY:,} so long-polls catch up from the history"
    )
    with bench.server("--history-size", str(HISTORY)) as url:
        for transport in TRANSPORTS:
            for subs in LATENCY_SHAPES:
                result = await pingpong(url, transport, subs, messages)
                latency.add(
                    transport,
                    f"1-{subs}",
                    messages,
                    *summary_ms(result["latencies"]),
                    result["server_cpu"],
                    result["client_cpu"],
                    lost=result["lost"],
                    errors=result["errors"],
                )
        for transport in TRANSPORTS:
            for pubs, subs in THROUGHPUT_SHAPES:
                for size in (0, batch):
                    name = channel("tp")
                    r = await fan_out(bench, url, transport, name, [name] * subs, total, pubs, size)
                    window = r["last"] - r["first"]
                    throughput.add(
                        transport,
                        f"{pubs}-{subs}",
                        f"batch {size}" if size else "1 per request",
                        total,
                        rate(total, window),
                        rate(total * subs, r["last"] - r["start"]),
                        100 * r["server_cpu"] / r["wall"],
                        r["client_cpu"],
                        lost=r["lost"],
                        errors=r["errors"],
                    )
    return [latency, throughput]
