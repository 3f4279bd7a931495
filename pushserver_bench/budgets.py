"""Experiment 7: the fast-path budgets, each measured as its own load on a fresh server.

Stream fan-out rate, long-poll fan-out time, 1→1 stream latency and server memory per held
idle connection. The client processes hold at most a few thousand sockets each, so 19,000
connections fit under the 20,000 open files a process may have."""

from __future__ import annotations

import asyncio
import time

from .client import connect
from .context import Bench, channel
from .fanout import fan_out
from .latency import pingpong
from .pool import ClientPool, SubPlan
from .stats import rate, summary_ms
from .table import Table

IDLE_PROCESSES = 4
IDLE_CHANNELS = 100
FAN_PUBLISHERS = 10
QUICK_VERDICT = "n/a (quick)"
IDLE_SECONDS = 2.0
"""How long the connections are held before RSS is read, so what connecting allocated and
freed has settled."""


async def _held(url: str, n: int, timeout: float = 120) -> dict:
    """`/stats` once the server counts `n` held connections."""
    deadline = time.monotonic() + timeout
    while True:
        conn = await connect(url)
        try:
            stats = await conn.json("/stats")
        finally:
            conn.close()
        assert isinstance(stats, dict)
        if stats["connections"]["total"] >= n or time.monotonic() > deadline:
            return stats
        await asyncio.sleep(0.05)


async def idle_rss(
    url: str, n: int, transport: str, cpus: frozenset[int] = frozenset()
) -> tuple[float, int]:
    """Server RSS bytes per held idle connection, and how many were held."""
    names = [channel("idle") for _ in range(IDLE_CHANNELS)]
    per_proc = -(-n // IDLE_PROCESSES)
    listen = [names[i % IDLE_CHANNELS] for i in range(n)]
    plans = [SubPlan(url, transport, listen[i : i + per_proc], 0) for i in range(0, n, per_proc)]
    before = await _held(url, 0)
    async with ClientPool(plans, cpus) as pool:
        await _held(url, n)
        await asyncio.sleep(IDLE_SECONDS)
        after = await _held(url, n)
        await pool.collect()
    held = after["connections"]["total"]
    return (after["rss_bytes"] - before["rss_bytes"]) / max(1, held), held


async def run(bench: Bench) -> list[Table]:
    table = Table(7, "fast path budgets", ["measurement", "measured", "budget", "met"])
    subs = bench.size(1000, 20)
    messages = bench.size(3000, 100)
    batch = 100
    table.notes.append(
        f"server in one process; fan-out: 1 channel, {subs:,} stream subscribers over "
        f"{bench.processes} client processes, {messages:,} 100-byte messages, published in "
        f"POST /pub batches of {batch} or one per request (closed loop per publisher; several "
        "publishers' messages coalesce into one write per flush); long-poll: one message to "
        "N held polls of one channel; latency: the next message is published when every "
        "subscriber has the last (1→N: subscribers in the bench process); memory: "
        f"idle connections over {IDLE_CHANNELS} channels from {IDLE_PROCESSES} client "
        "processes (long-polls held with ?timeout=60), RSS from /stats after "
        f"{IDLE_SECONDS:g} s idle"
    )

    if bench.quick:
        table.notes.append(
            f"--quick: sizes far below the budgets' loads cannot meet them, so 'met' reads "
            f"{QUICK_VERDICT}; run without --quick to judge the budgets"
        )

    def row(label: str, value: float, budget: str, ok: bool | None, r: dict | None = None) -> None:
        verdict = "" if ok is None else QUICK_VERDICT if bench.quick else "yes" if ok else "NO"
        table.add(
            label,
            value,
            budget,
            verdict,
            lost=r["lost"] if r else 0,
            errors=r["errors"] if r else None,
        )

    with bench.server() as url:
        for publishers, size in ((1, batch), (1, 0), (FAN_PUBLISHERS, 0)):
            name = channel("fan")
            r = await fan_out(bench, url, "stream", name, [name] * subs, messages, publishers, size)
            deliveries = messages * subs
            speed = rate(deliveries, r["last"] - r["start"])
            mode = f"batches of {size}" if size else "1 per request"
            row(
                f"stream fan-out deliveries/s ({subs:,} subs, {publishers} pub, {mode})",
                speed,
                ">= 300,000",
                speed >= 3e5,
                r,
            )
            row("  server CPU s for it", r["server_cpu"], "", None)
            row("  deliveries per server CPU s", rate(deliveries, r["server_cpu"]), "", None)
            row("  client CPU s for it", r["client_cpu"], "", None)
        for n in (bench.size(5000, 50), bench.size(10_000, 100)):
            name = channel("lp")
            r = await fan_out(bench, url, "longpoll", name, [name] * n, 1)
            seconds = r["last"] - r["start"]
            budget, ok = ("<= 0.5 s", seconds <= 0.5) if n >= 10_000 else ("", None)
            row(f"long-poll fan-out s ({n:,} subs)", seconds, budget, ok, r)
        r = await pingpong(url, "stream", 1, bench.size(5000, 20))
        median = summary_ms(r["latencies"])[0]
        row("1→1 stream latency p50 ms", median, "< 0.3", median < 0.3, r)
        # What a costly fan-out costs each message (and what the flush delay adds to it).
        r = await pingpong(url, "stream", subs, bench.size(200, 5))
        median, p99, _ = summary_ms(r["latencies"])
        row(f"1→{subs:,} stream latency p50 ms (all subscribers)", median, "", None, r)
        row(f"1→{subs:,} stream latency p99 ms", p99, "", None)
    small, large = bench.size(10_000, 100), bench.size(19_000, 190)
    loads = [
        (small, "stream"),
        (large, "stream"),
        (small, "sse"),
        (small, "ws"),
        (small, "longpoll"),
    ]
    for n, transport in loads:
        with bench.server() as url:
            per_conn, held = await idle_rss(url, n, transport, bench.client_cpus)
        kb = per_conn / 1024
        row(
            f"server RSS KB per idle connection ({held:,} held, {transport})",
            kb,
            "<= 10",
            kb <= 10,
            {"lost": n - held, "errors": []},
        )
    return [table]
