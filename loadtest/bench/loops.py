"""Experiment 6: uvloop vs the default asyncio loop, on the loads of experiments 1 and 2."""

from __future__ import annotations

from typing import Any

from .context import Bench, channel
from .fanout import fan_out
from .latency import pingpong
from .stats import rate, summary_ms
from .table import Table

LOOPS = ("uvloop", "asyncio")


async def _measure(bench: Bench, url: str) -> tuple[list[tuple[str, float]], int, list[str]]:
    messages = bench.size(2000, 20)
    total = bench.size(10_000, 100)
    batch = bench.size(100, 10)
    figures: list[tuple[str, float]] = []
    lost, errors = 0, []
    for transport in ("stream", "longpoll"):
        r = await pingpong(url, transport, 1, messages)
        median, p99, _ = summary_ms(r["latencies"])
        figures += [
            (f"exp 1 {transport} 1→1 median ms", median),
            (f"exp 1 {transport} p99 ms", p99),
        ]
        lost += r["lost"]
        errors += r["errors"]
    for pubs, subs in ((1, 10), (5, 5)):
        for size in (0, batch):
            name = channel("loop")
            r: dict[str, Any] = await fan_out(
                bench, url, "stream", name, [name] * subs, total, pubs, size
            )
            mode = f"batch {size}" if size else "1 per request"
            figures.append(
                (
                    f"exp 2 stream {pubs}-{subs} {mode} events/s per sub",
                    rate(total, r["last"] - r["first"]),
                )
            )
            figures.append((f"exp 2 stream {pubs}-{subs} {mode} server CPU s", r["server_cpu"]))
            lost += r["lost"]
            errors += r["errors"]
    return figures, lost, errors


async def run(bench: Bench) -> list[Table]:
    table = Table(6, "uvloop vs asyncio (server --loop)", ["measurement", *LOOPS])
    if not bench.launches:
        table.add("all", "n/a (needs the bench to start the server)", "")
        return [table]
    table.notes.append(
        "same loads as experiments 1 and 2, server started with --loop uvloop / asyncio"
    )
    columns: dict[str, list[tuple[str, float]]] = {}
    for loop in LOOPS:
        with bench.server("--loop", loop) as url:
            figures, lost, errors = await _measure(bench, url)
        columns[loop] = figures
        table.lost += lost
        table.errors += errors[:5]
    for (label, a), (_, b) in zip(columns["uvloop"], columns["asyncio"], strict=True):
        table.add(label, a, b)
    return [table]
