"""Experiment 10: a crowd of long-polls timing out together, and a message meanwhile.

Devices that reconnected together (after a restart, a network outage) poll together: one
message answers them all, they all poll again, and when nothing more is published their polls
time out in the same moment, every `?timeout` seconds. N long-polls of one channel are held with
`?timeout=T`, one message sets them polling together, and for the next two timeouts a 1→1
long-poll on another channel (each message published `PACE` after the last arrived) measures
what a message waits while the crowd is answered. A row whose crowd did not time out twice per
subscriber did not measure that, and is invalid.

nginx+nchan (`--target nchan`) holds a poll as long as its location says: the crowd polls the
subscriber location with `-timeout` appended (`/sub-timeout/` beside `/sub/`), configured with
`nchan_subscriber_timeout 5s` (docs/performance.md), and is answered 408 when it times out.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
from typing import Any

from .client import BenchError, Tally, message_data
from .context import Bench, channel
from .pool import ClientPool, SubPlan, merge, spread
from .stats import ms, percentile
from .table import Table
from .targets import Target
from .versus import crowded, judge, reachable, sources

SIZES = (10_000, 19_800)
"""19,800: pushserver holds its open-file limit less 100 connections, and the 1→1 long-poll,
its publisher and the subscriber counts need a few of them."""
HOLD = 5.0
"""Seconds a crowd's poll is held (pushserver's `?timeout`; nchan's is configured)."""
ROUNDS = 2
"""Timeouts of the whole crowd a row must see."""
PACE = 0.002
"""Seconds between a 1→1 message's arrival and the next one's publishing."""

COLUMNS = [
    "subscribers",
    "poll timeout s",
    "crowd timeouts",
    "1→1 messages",
    "1→1 p50 ms",
    "1→1 p99 ms",
    "1→1 worst ms",
    "client busy %",
    "verdict",
]


async def one_to_one(target: Target, seconds: float) -> tuple[Tally, int, float]:
    """1→1 long-poll for `seconds`: the tally, the messages published, the share of a core
    this process used."""
    name = channel("to1")
    tally = Tally(parse=True)
    _, close = await target.subscribe("longpoll", name, tally, 0)
    publisher = await target.publisher()
    sent = 0
    try:
        await target.wait_subscribed(name, 1)
        cpu, start = time.process_time(), time.monotonic()
        while time.monotonic() - start < seconds:
            await publisher.send(target.publish(name, message_data()))
            sent += 1
            if not await tally.reach(sent, 10):
                break
            await asyncio.sleep(PACE)
        busy = (time.process_time() - cpu) / max(time.monotonic() - start, 1e-6)
    finally:
        publisher.close()
        close()
    return tally, sent, busy


def crowd_target(target: Target) -> Target:
    """`target` with its long-polls held `HOLD` seconds."""
    if target.kind == "pushserver":
        return dataclasses.replace(target, poll_timeout=HOLD)
    return dataclasses.replace(target, sub=target.sub.rstrip("/") + "-timeout/")


async def crowd_row(bench: Bench, target: Target, n: int) -> dict[str, Any]:
    """N long-polls held `HOLD` seconds, set polling together, timing out `ROUNDS` times
    while a 1→1 long-poll runs."""
    name = channel("crowd")
    shares = spread(n, max(bench.processes, math.ceil(n / bench.per_process)))
    held = crowd_target(target)
    plans = [
        SubPlan(held.sub, "longpoll", [name] * k, 0, False, 60, held, source)
        for k, source in zip(shares, sources(target, len(shares)), strict=True)
    ]
    async with ClientPool(plans, bench.client_cpus) as crowd:
        ready = time.time()
        await target.wait_subscribed(name, n)
        publisher = await target.publisher()
        try:
            await publisher.send(target.publish(name, message_data()))
        finally:
            publisher.close()
        tally, sent, main_busy = await one_to_one(target, ROUNDS * HOLD + HOLD / 2)
        reports = await crowd.collect()
        wall = time.time() - ready
    report = merge(reports)
    errors = report["errors"] + tally.errors
    lost = (n - report["received"]) + (sent - tally.received)
    busy = max(main_busy, *(r["cpu"] / wall for r in reports))
    short = crowded(busy, report["cpu"], wall, bench.client_cpus)
    if shortfall := too_few(report["empty"], n):
        errors.append(shortfall)
    verdict = judge(lost, errors, short, tally.late)
    return {
        "row": [
            n,
            HOLD,
            report["empty"],
            sent,
            ms(percentile(tally.latencies, 0.5)),
            ms(percentile(tally.latencies, 0.99)),
            ms(max(tally.latencies, default=math.nan)),
            100 * busy,
            verdict,
        ],
        "lost": lost,
        "errors": [] if verdict == "valid" else [f"{n:,} timing out: {verdict}"],
    }


def too_few(timeouts: int, n: int) -> str:
    """Why `timeouts` of a crowd of `n` do not make a row ("" when they do)."""
    if timeouts >= ROUNDS * n:
        return ""
    return (
        f"the crowd timed out {timeouts:,} times, fewer than {ROUNDS} per subscriber: "
        "it did not measure a crowd timing out"
    )


async def run(bench: Bench) -> list[Table]:
    with bench.server() as url:
        target = Target.of(bench.target, url, bench.pub_url, bench.sub_url)
        where = f"{target.kind} (publish {target.pub}, subscribe {target.sub})"
        table = Table(10, f"a crowd of long-polls timing out together: {where}", COLUMNS)
        if not await reachable(target, table):
            return [table]
        table.notes += [
            f"N long-polls of one channel held {HOLD:g} s (at {crowd_target(target).sub}), set "
            f"polling together by one message, then timing out together {ROUNDS} times; "
            "meanwhile a 1→1 long-poll on another channel, each message published "
            f"{PACE * 1000:g} ms after the last arrived, timed publish→arrival (the kernel's "
            "receive timestamp)",
        ]
        for n in bench.subscribers or ([200] if bench.quick else list(SIZES)):
            try:
                step = await crowd_row(bench, target, n)
            except (BenchError, OSError, RuntimeError) as exc:
                failed = f"INVALID: {type(exc).__name__}: {exc}"
                row = [n, HOLD, *[""] * (len(COLUMNS) - 3), failed]
                table.add(*row, lost=0, errors=[f"{n:,} timing out: {failed}"])
                continue
            table.add(*step["row"], lost=step["lost"], errors=step["errors"])
    return [table]
