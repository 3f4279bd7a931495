"""Experiment 6: uvloop vs the default asyncio loop, on the loads of experiments 1 and 2."""

from __future__ import annotations

from typing import Any

from .context import Bench, channel
from .fanout import fan_out
from .latency import pingpong
from .stats import rate, summary_ms
from .table import Table

LOOPS = ("uvloop", "asyncio")

Figure = tuple[str, float, dict[str, Any]]


async def _measure(bench: Bench, url: str) -> list[Figure]:
    """(label, value, the run it came from) for each measurement, in a fixed order."""
    messages = bench.size(2000, 20)
    total = bench.size(10_000, 100)
    batch = bench.size(100, 10)
    figures: list[Figure] = []
    for transport in ("stream", "longpoll"):
        r = await pingpong(url, transport, 1, messages)
        median, p99, _ = summary_ms(r["latencies"])
        figures.append((f"exp 1 {transport} 1→1 median ms", median, r))
        figures.append((f"exp 1 {transport} 1→1 p99 ms", p99, {}))
    for pubs, subs in ((1, 10), (5, 5)):
        for size in (0, batch):
            name = channel("loop")
            r = await fan_out(bench, url, "stream", name, [name] * subs, total, pubs, size)
            mode = f"batch {size}" if size else "1 per request"
            label = f"exp 2 stream {pubs}-{subs} {mode}"
            figures.append((f"{label} events/s per sub", rate(total, r["last"] - r["first"]), r))
            figures.append((f"{label} server CPU s", r["server_cpu"], {}))
    return figures


async def run(bench: Bench) -> list[Table]:
    table = Table(6, "uvloop vs asyncio (server --loop)", ["measurement", *LOOPS])
    if not bench.launches:
        table.add("all", "n/a (needs the bench to start the server)", "")
        return [table]
    table.notes.append(
        "same loads as experiments 1 and 2, server started with --loop uvloop / asyncio; "
        "lost counts both runs of a row"
    )
    runs: dict[str, list[Figure]] = {}
    for loop in LOOPS:
        with bench.server("--loop", loop) as url:
            runs[loop] = await _measure(bench, url)
    for (label, a, ra), (_, b, rb) in zip(runs["uvloop"], runs["asyncio"], strict=True):
        table.add(
            label,
            a,
            b,
            lost=ra.get("lost", 0) + rb.get("lost", 0),
            errors=ra.get("errors", []) + rb.get("errors", []),
        )
    return [table]
