"""Subscribers and request loads spread over client processes.

One Python process can neither hold more than 20,000 sockets nor receive as fast as the server
sends on a second core, so subscriber-heavy experiments run their clients in a few spawned
processes. Each reports what it counted and the CPU it spent, so the tables can show when the
client, not the server, was the bottleneck.
"""

from __future__ import annotations

import asyncio
import dataclasses
import multiprocessing
import os
import time
from collections.abc import Callable, Coroutine
from multiprocessing.connection import Connection
from typing import Any

from pushserver_measure.tuning import raise_open_files_limit

from .client import (
    Tally,
    connect,
    get_request,
    message_data,
    open_many,
    publish_request,
)
from .runnable import Runnable
from .targets import Target

CONTEXT = multiprocessing.get_context("forkserver")
CONTEXT.set_forkserver_preload(["pushserver_bench.pool", "uvloop"])


def spread(total: int, parts: int) -> list[int]:
    """`total` split into `parts` near-equal shares (no empty shares)."""
    parts = max(1, min(parts, total)) if total else 1
    return [total // parts + (i < total % parts) for i in range(parts)]


@dataclasses.dataclass
class SubPlan:
    """What one client process subscribes to, and what it must receive (per subscriber).

    With `target`, subscribers speak that server's protocol (`url` is then unused); with
    `source`, they connect from that local address (each 127.0.0.x has its own ports);
    `plain`: they time their reads when they make them (the plain client, `arrival`).
    `expect` 0: receive until told to report."""

    url: str
    transport: str
    channels: list[str]
    expect: int
    parse: bool = False
    timeout: float = 60.0
    target: Target | None = None
    source: str = ""
    plain: bool = False


@dataclasses.dataclass
class RequestPlan:
    """A closed loop of requests on `connections` keep-alive connections, `count` in all."""

    url: str
    kind: str  # "publish" | "longpoll"
    channel: str
    connections: int
    count: int


def _run(
    main: Callable[..., Coroutine[Any, Any, None]],
    plan: Any,
    conn: Connection,
    cpus: frozenset[int],
) -> None:
    raise_open_files_limit()
    if cpus:
        os.sched_setaffinity(0, cpus)
    import uvloop

    uvloop.run(main(plan, conn))


async def _recv(conn: Connection) -> Any:
    return await asyncio.get_running_loop().run_in_executor(None, conn.recv)


async def _hand_over(conn: Connection, report: dict[str, Any]) -> None:
    """Say this process is done, and send its report once every process is: a report is
    thousands of latencies to unpickle, which would take the CPU from a server still serving
    the other processes' subscribers."""
    conn.send(("reached", None))
    await _recv(conn)
    conn.send(("done", report))


async def _subscriber_main(plan: SubPlan, conn: Connection) -> None:
    runnable = Runnable() if plan.parse else None
    tally = Tally(plan.parse, runnable)
    server = plan.target or Target.of("pushserver", plan.url)
    try:
        subs = await open_many(
            lambda c: server.subscribe(
                plan.transport, c, tally, plan.expect, plan.source, plan.plain
            ),
            plan.channels,
        )
    except Exception as exc:
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    cpu = time.process_time()
    conn.send(("ready", len(subs)))
    await _recv(conn)
    target = plan.expect * len(subs)
    if target:
        await tally.reach(target, plan.timeout)
    else:
        await asyncio.sleep(0.2)
    busiest = (0.0, 0.0)
    if runnable is not None:
        busiest = runnable.busiest(tally.spans)
        runnable.close()
    await _hand_over(
        conn,
        {
            "received": tally.received,
            "expected": target,
            "first": tally.first,
            "last": tally.last,
            "latencies": tally.latencies,
            "late": tally.late,
            "waits": tally.waits,
            "spans": tally.spans,
            "runnable": busiest,
            "empty": tally.empty,
            "errors": tally.errors,
            "cpu": time.process_time() - cpu,
            "cpus": sorted(os.sched_getaffinity(0)),
        },
    )
    for _, close in subs:
        close()


async def _request_main(plan: RequestPlan, conn: Connection) -> None:
    conns = [await connect(plan.url) for _ in range(plan.connections)]
    if plan.kind == "publish":

        def raw() -> bytes:
            return publish_request(plan.channel, message_data())

        ok = 201
    else:

        def raw() -> bytes:
            return get_request(f"/lp/{plan.channel}?history=1&timeout=0")

        ok = 200
    conn.send(("ready", len(conns)))
    await _recv(conn)
    cpu = time.process_time()
    times: list[float] = []
    errors: list[str] = []
    shares = spread(plan.count, len(conns))

    async def loop(c: Any, n: int) -> None:
        for _ in range(n):
            start = time.perf_counter()
            status, body = await c.request(raw())
            times.append(time.perf_counter() - start)
            if status != ok and len(errors) < 20:
                errors.append(f"{status} {body[:100]!r}")

    start = time.time()
    await asyncio.gather(*(loop(c, n) for c, n in zip(conns, shares, strict=False)))
    await _hand_over(
        conn,
        {
            "first": start,
            "last": time.time(),
            "times": times,
            "errors": errors,
            "cpu": time.process_time() - cpu,
            "cpus": sorted(os.sched_getaffinity(0)),
        },
    )
    for c in conns:
        c.close()


class ClientPool:
    """Client processes running plans: `async with pool:` waits until all are ready,
    `await pool.collect()` tells them the load is sent and gathers their reports.

    With `cpus`, the processes run only on those CPUs: on a small machine the client then
    leaves the server's core alone instead of taking turns on it mid fan-out."""

    def __init__(
        self,
        plans: list[SubPlan] | list[RequestPlan],
        cpus: frozenset[int] = frozenset(),
        ready_timeout: float = 120,
    ):
        self.plans = plans
        self.cpus = cpus
        self.ready_timeout = ready_timeout
        self.procs: list[multiprocessing.process.BaseProcess] = []
        self.conns: list[Connection] = []
        self.held = 0

    async def __aenter__(self) -> ClientPool:
        for plan in self.plans:
            mine, theirs = CONTEXT.Pipe()
            main = _subscriber_main if isinstance(plan, SubPlan) else _request_main
            proc = CONTEXT.Process(target=_run, args=(main, plan, theirs, self.cpus), daemon=True)
            proc.start()
            theirs.close()
            self.procs.append(proc)
            self.conns.append(mine)
        replies = await asyncio.wait_for(
            asyncio.gather(*(_recv(c) for c in self.conns)), self.ready_timeout
        )
        for kind, value in replies:
            if kind != "ready":
                raise RuntimeError(f"client process failed: {value}")
            self.held += value
        return self

    async def collect(self) -> list[dict[str, Any]]:
        for c in self.conns:
            c.send("collect")
        await asyncio.gather(*(_recv(c) for c in self.conns))  # every process done
        for c in self.conns:
            c.send("report")
        replies = await asyncio.gather(*(_recv(c) for c in self.conns))
        return [value for _, value in replies]

    async def __aexit__(self, *exc: object) -> None:
        for proc in self.procs:
            proc.join(5)
            if proc.is_alive():
                proc.kill()
                proc.join()
        for c in self.conns:
            c.close()


def merge(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """One report for all processes: sums, the earliest first and the latest last receipt."""
    firsts = [r["first"] for r in reports if r["first"]]
    out: dict[str, Any] = {
        "first": min(firsts) if firsts else 0.0,
        "last": max(r["last"] for r in reports),
        "cpu": sum(r["cpu"] for r in reports),
        "errors": [e for r in reports for e in r["errors"]],
    }
    for key in ("received", "expected", "late", "empty"):
        if key in reports[0]:
            out[key] = sum(r[key] for r in reports)
    for key in ("latencies", "times"):
        if key in reports[0]:
            out[key] = [x for r in reports for x in r[key]]
    return out
