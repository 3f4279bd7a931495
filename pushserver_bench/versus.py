"""Experiment 9: one client against any server at a URL: pushserver, or nginx+nchan.

Held subscribers under load: one channel, N long-poll or SSE subscribers spread over client
processes (each on its own source address 127.0.0.x, so no process nears its 20,000 open
files), messages published at a fixed rate; the worst publish→arrival latency, the server's CPU
per delivery (a long-poll's re-poll included) and its resident memory per held subscriber, read
from the server's processes in /proc (nginx: master and workers). Then the light loads: 1→1
latency, server CPU per published message, fan-out to 100 SSE subscribers from 8 publishers.

Two measuring clients, side by side (`--client`). The tuned one times a delivery by when its
bytes arrived (the kernel's receive timestamp, `arrival`), so a client process that reads late
does not add its delay, and keeps to `--client-cpus`. The plain one measures as an independent
client written with raw asyncio protocols does: the loop's own transports, a delivery timed
when `data_received` is called, no CPU pinning. Both re-poll from the callback that read the
answer, and both take the server's CPU from /proc over each step.

A row is invalid when the client, not the server, set its figure all the same:
- a long-poll message waited on a re-poll the client sent late: the server had begun answering
  that message (its first arrival at any subscriber) before the client polled for it;
- the tuned client: a client process busy for most of a core over the step;
- the plain client: a client process runnable (running or waiting for a core) for most of the
  time it read one message's answers, so its reads followed its own pace (`runnable`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import math
import os
import time
from typing import Any

from pushserver_measure.machine import (
    listening_pids,
    preemptions,
    resident_bytes,
    run_seconds,
    user_system_seconds,
    waited_seconds,
    with_descendants,
)
from pushserver_measure.verdict import BUSY

from .client import BenchError, Publisher, Tally, ticker_data
from .context import Bench, channel
from .machine import SERVER_PIDS
from .pool import ClientPool, SubPlan, merge, spread
from .runnable import MIN_WINDOW
from .stats import ms, percentile, rate
from .table import Table
from .targets import TRANSPORTS, Target

SIZES = (1000, 5000, 10_000, 19_900)
CLIENTS = ("tuned", "plain")
"""The measuring clients: kernel receive timestamps and `--client-cpus`, or the plain one."""
SHARED = 0.1
"""Preemptions per message from which a one-at-a-time row's server shared its core
(`shared_core`): alone on a core it waits between requests, preempted 0.04 times per message
or fewer (docs/performance.md)."""
FAN_OUT_SUBSCRIBERS, FAN_OUT_PUBLISHERS = 100, 8
_ADDRESSES = itertools.count()

HELD_COLUMNS = [
    "transport",
    "client",
    "subscribers",
    "messages",
    "publish s",
    "worst ms",
    "server µs/delivery",
    "server kernel %",
    "server waited %",
    "client µs/delivery",
    "client busy %",
    "client runnable %",
    "RSS KB/subscriber",
    "late re-polls",
    "waited on client",
    "verdict",
]
LIGHT_COLUMNS = [
    "measurement",
    "transport",
    "client",
    "subscribers",
    "messages",
    "p50 ms",
    "deliveries/s",
    "server µs each",
    "client µs each",
    "client busy %",
    "verdict",
]


class Server:
    """The measured server's processes, read from /proc."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.base = resident_bytes(pids)
        self.peak = 0

    def cpu(self) -> float:
        return run_seconds(self.pids)

    def waited(self) -> float:
        return waited_seconds(self.pids)

    def preempted(self) -> int:
        return preemptions(self.pids)

    def split(self) -> tuple[float, float]:
        """User and kernel seconds (10 ms ticks: for a share over a run of seconds)."""
        return user_system_seconds(self.pids)

    def per_subscriber(self, n: int) -> float | str:
        """Resident KB per held subscriber, `n` of them, over the RSS at the start of the run.

        Memory freed by an earlier step is reused, not returned to the system, so only a step
        holding more subscribers than every step before it has a figure."""
        if n <= self.peak:
            return "n/a"
        self.peak = n
        return (resident_bytes(self.pids) - self.base) / n / 1024


def server_pids(bench: Bench, url: str, target: Target) -> list[int]:
    """`--pid`, else the server the bench started, else whoever listens on the subscribe port."""
    if bench.pids:
        return with_descendants(bench.pids)
    if url in SERVER_PIDS:
        return with_descendants([SERVER_PIDS[url]])
    return with_descendants(listening_pids(target.endpoints[1].port))


async def unreachable(target: Target) -> str:
    """Why the target cannot be measured ("" when both its endpoints accept connections)."""
    for at in target.endpoints:
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(at.host, at.port), 10)
        except (OSError, TimeoutError) as exc:
            return f"target unreachable at {at.host}:{at.port}: {exc or type(exc).__name__}"
        writer.close()
    return ""


async def reachable(target: Target, table: Table) -> bool:
    """Whether `target` can be measured; when not, `table` says why."""
    problem = await unreachable(target)
    if problem:
        table.errors.append(problem)
    return not problem


def sources(target: Target, n: int) -> list[str]:
    """A loopback source address per client process (the kernel's default off loopback), each
    step taking the next ones in turn (127.0.0.2 to .251), so a step's connections do not meet
    the TIME_WAIT of the step before on the same address and destination."""
    if not target.endpoints[1].host.startswith("127."):
        return [""] * n
    return [f"127.0.0.{2 + next(_ADDRESSES) % 250}" for _ in range(n)]


def judge(lost: int, errors: list[str], short: str = "", late: int = 0, shared: str = "") -> str:
    """ "valid", or "INVALID: " and why the row measured something else than the server
    (`short`: why the client was short of CPU, `crowded`; `shared`: why the server's cost per
    message was not its own, `shared_core`)."""
    reasons = [f"{lost:,} deliveries lost"] if lost else []
    reasons += errors[:1]
    if short:
        reasons.append(f"client-bound: {short}")
    if shared:
        reasons.append(shared)
    if late:
        what = "message" if late == 1 else "messages"
        reasons.append(f"client-bound: {late:,} {what} waited on a late re-poll")
    return "INVALID: " + "; ".join(reasons) if reasons else "valid"


def shared_core(preempted: int, messages: int) -> str:
    """Why a one-at-a-time row's server CPU per message is not what it costs on a core of its
    own ("" when it is): the server was preempted `SHARED` times per message or more, so
    another process ran on its core (the bench's publisher or client, or other load). Then it
    finds the next request waiting instead of sleeping for it, and a request and its answer
    pass between processes without waking another core: main cost 18 us per publish so,
    against 47-48 alone on its core (docs/performance.md, "No regression")."""
    each = preempted / max(messages, 1)
    if each < SHARED:
        return ""
    return (
        f"shared a core: the server was preempted {each:.2f} times per message (another "
        "process ran on its core), so its CPU per message is not what it costs on a core of "
        "its own"
    )


def busiest(reports: list[dict[str, Any]], start: float) -> float:
    """The largest share of a core a client process used from the first publish to its last
    receipt."""
    return max(r["cpu"] / max(r["last"] - start, 1e-6) for r in reports)


def crowded(busy: float, cpu: float, wall: float, cpus: frozenset[int]) -> str:
    """Why the client processes were short of CPU ("" when they were not): the busiest of them
    (`busy`, a share of a core) used most of a core, or, kept to `cpus`, all of them together
    (`cpu` seconds over `wall` seconds) used most of those."""
    if busy * 100 >= BUSY:
        return f"a client process used {busy:.0%} of a core"
    if cpus:
        share = cpu / max(wall, 1e-6) / len(cpus)
        if share * 100 >= BUSY:
            names = ",".join(map(str, sorted(cpus)))
            return f"the client processes used {share:.0%} of CPUs {names}, all they were given"
    return ""


async def publish_n(publisher: Publisher, target: Target, name: str, n: int) -> None:
    for _ in range(n):
        await publisher.send(target.publish(name, ticker_data()))


def waited_on_client(reports: list[dict[str, Any]]) -> int:
    """Long-poll messages that waited on the client: the server had begun answering the message
    (its first arrival at any subscriber, in any process) before the client sent the poll that
    fetched it. A message published before the client polled again, but whose answering began
    after that poll went out, waited on the server's own queue, not on the client."""
    begun: dict[float, float] = {}
    for r in reports:
        for sent, (first, _) in r["spans"].items():
            begun[sent] = min(first, begun.get(sent, first))
    waited = 0
    for r in reports:
        waits = r["waits"]
        for i in range(0, len(waits), 2):
            if waits[i + 1] > begun[waits[i]]:
                waited += 1
    return waited


def outpaced(reports: list[dict[str, Any]]) -> tuple[float, str]:
    """The largest share of one message's read window a client process was runnable, and why
    the plain client's reads followed its own pace ("" when they did not)."""
    share, sent = max((tuple(r["runnable"]) for r in reports), default=(0.0, 0.0))
    if share * 100 < BUSY:
        return share, ""
    return share, (
        f"a client process was running or waiting for a core {share:.0%} of the time it read "
        f"the message sent at {time.strftime('%H:%M:%S', time.gmtime(sent))} UTC"
    )


async def held(
    bench: Bench,
    target: Target,
    server: Server,
    transport: str,
    client: str,
    n: int,
    messages: int,
    per_s: float,
) -> dict[str, Any]:
    """N subscribers of one channel, measured by `client` (`CLIENTS`), `messages` published at
    `per_s` a second (N up to 19,900: pushserver holds its open-file limit less 100)."""
    name = channel("vs")
    plain = client == "plain"
    shares = spread(n, max(bench.processes, math.ceil(n / bench.per_process)))
    plans = [
        SubPlan(target.sub, transport, [name] * k, messages, True, 60, target, source, plain)
        for k, source in zip(shares, sources(target, len(shares)), strict=True)
    ]
    cpus = frozenset() if plain else bench.client_cpus
    async with ClientPool(plans, cpus) as crowd:
        await target.wait_subscribed(name, n)
        rss = server.per_subscriber(n)
        publisher = await target.publisher()
        cpu, split, waited = server.cpu(), server.split(), server.waited()
        start = time.time()
        try:
            for i in range(messages):
                await asyncio.sleep(max(0.0, start + i / per_s - time.time()))
                await publisher.send(target.publish(name, ticker_data()))
        finally:
            publisher.close()
        published = time.time() - start
        reports = await crowd.collect()
        server_cpu, waited = server.cpu() - cpu, server.waited() - waited
        wall = time.time() - start
        user, kernel = (b - a for a, b in zip(split, server.split(), strict=True))
    report = merge(reports)
    lost = report["expected"] - report["received"]
    busy = busiest(reports, start)
    runnable, hurried = outpaced(reports)
    received = max(1, report["received"])
    short = hurried if plain else crowded(busy, report["cpu"], report["last"] - start, cpus)
    late = waited_on_client(reports)
    verdict = judge(lost, report["errors"], short, late)
    return {
        "row": [
            transport,
            client,
            n,
            messages,
            published,
            ms(max(report["latencies"], default=math.nan)),
            1e6 * server_cpu / received,
            100 * kernel / (user + kernel) if user + kernel > 0 else math.nan,
            100 * waited / wall,
            1e6 * report["cpu"] / received,
            100 * busy,
            100 * runnable if runnable else "n/a",
            rss,
            report["late"],
            late,
            verdict,
        ],
        "lost": lost,
        "errors": [] if verdict == "valid" else [f"{transport} x {n:,} ({client}): {verdict}"],
    }


async def one_to_one(
    target: Target, server: Server, transport: str, client: str, messages: int, alone: bool = True
) -> tuple[list[Any], int, list[str]]:
    """1→1, measured by `client`: the next message published once the last one arrived; with
    `alone`, invalid when the server shared its core (`shared_core`)."""
    name = channel("vs1")
    tally = Tally(parse=True)
    plain = client == "plain"
    _, close = await target.subscribe(transport, name, tally, messages, plain=plain)
    publisher = await target.publisher()
    try:
        await target.wait_subscribed(name, 1)
        cpu, own, preempted = server.cpu(), time.process_time(), server.preempted()
        for i in range(1, messages + 1):
            await publisher.send(target.publish(name, ticker_data()))
            if not await tally.reach(i, 10):
                break
        server_cpu, client_cpu = server.cpu() - cpu, time.process_time() - own
        preempted = server.preempted() - preempted
    finally:
        publisher.close()
        close()
    lost = messages - tally.received
    each = max(1, tally.received)
    shared = shared_core(preempted, each) if alone else ""
    return (
        [
            "1→1 latency",
            transport,
            client,
            1,
            messages,
            ms(percentile(tally.latencies, 0.5)),
            "",
            1e6 * server_cpu / each,
            1e6 * client_cpu / each,
            "",
            judge(lost, tally.errors, late=tally.late, shared=shared),
        ],
        lost,
        tally.errors,
    )


async def publish_cost(
    target: Target, server: Server, messages: int, alone: bool = True
) -> list[Any]:
    """Server CPU per published message: one request each, nobody subscribed; with `alone`,
    invalid when the server shared its core (`shared_core`)."""
    publisher = await target.publisher()
    try:
        cpu, client, preempted = server.cpu(), time.process_time(), server.preempted()
        await publish_n(publisher, target, channel("vspub"), messages)
        server_cpu, client_cpu = server.cpu() - cpu, time.process_time() - client
        preempted = server.preempted() - preempted
    finally:
        publisher.close()
    return [
        "publish, no subscriber",
        "",
        "",
        0,
        messages,
        "",
        "",
        1e6 * server_cpu / messages,
        1e6 * client_cpu / messages,
        "",
        judge(0, [], shared=shared_core(preempted, messages) if alone else ""),
    ]


async def fan_out(
    bench: Bench, target: Target, server: Server, messages: int
) -> tuple[list[Any], int, list[str]]:
    """SSE fan-out: 8 publishers, one message per request, to 100 subscribers of one channel."""
    name = channel("vsfan")
    shares = spread(FAN_OUT_SUBSCRIBERS, bench.processes)
    plans = [
        SubPlan(target.sub, "sse", [name] * k, messages, False, 60, target, a)
        for k, a in zip(shares, sources(target, len(shares)), strict=True)
    ]
    async with ClientPool(plans, bench.client_cpus) as pool:
        await target.wait_subscribed(name, FAN_OUT_SUBSCRIBERS)
        publishers = [await target.publisher() for _ in range(FAN_OUT_PUBLISHERS)]
        cpu, start = server.cpu(), time.time()
        try:
            await asyncio.gather(
                *(
                    publish_n(p, target, name, k)
                    for p, k in zip(publishers, spread(messages, len(publishers)), strict=False)
                )
            )
        finally:
            for p in publishers:
                p.close()
        reports = await pool.collect()
        server_cpu = server.cpu() - cpu
    report = merge(reports)
    lost = report["expected"] - report["received"]
    received = max(1, report["received"])
    busy = busiest(reports, start)
    return (
        [
            "fan-out, 8 publishers",
            "sse",
            "tuned",
            FAN_OUT_SUBSCRIBERS,
            messages,
            "",
            rate(report["received"], report["last"] - start),
            1e6 * server_cpu / received,
            1e6 * report["cpu"] / received,
            100 * busy,
            judge(
                lost,
                report["errors"],
                crowded(busy, report["cpu"], report["last"] - start, bench.client_cpus),
            ),
        ],
        lost,
        report["errors"],
    )


def light_row(table: Table, result: tuple[list[Any], int, list[str]]) -> None:
    row, lost, errors = result
    invalid = [] if row[-1] == "valid" else [f"{row[0]} {row[1]}: {row[-1]}"]
    table.add(*row, lost=lost, errors=[*invalid, *errors])


async def held_row(
    bench: Bench,
    table: Table,
    target: Target,
    server: Server,
    step: tuple[str, str, int],
    messages: int,
    per_s: float,
) -> None:
    """One row of held subscribers (`step`: transport, client, subscribers); a step that fails
    is an invalid row, and the next may still run."""
    transport, client, n = step
    try:
        result = await held(bench, target, server, transport, client, n, messages, per_s)
    except (BenchError, OSError, RuntimeError) as exc:
        failed = f"INVALID: {type(exc).__name__}: {exc}"
        row = [transport, client, n, messages, *[""] * (len(HELD_COLUMNS) - 5), failed]
        table.add(*row, lost=n * messages, errors=[f"{transport} x {n:,} ({client}): {failed}"])
        return
    table.add(*result["row"], lost=result["lost"], errors=result["errors"])


async def run(bench: Bench) -> list[Table]:
    with bench.server() as url:
        target = Target.of(bench.target, url, bench.pub_url, bench.sub_url)
        target = dataclasses.replace(
            target, encode_cursor=bench.encode_cursor, compressed=bench.compressed
        )
        where = f"{target.kind} (publish {target.pub}, subscribe {target.sub})"
        loads = Table(9, f"held subscribers under load: {where}", HELD_COLUMNS)
        light = Table(9, f"1→1, publish cost, fan-out: {where}", LIGHT_COLUMNS)
        problem = await unreachable(target)
        pids = [] if problem else server_pids(bench, url, target)
        if not problem and not pids:
            problem = f"no process listens on port {target.endpoints[1].port}: give --pid"
        if problem:
            loads.errors.append(problem)
            return [loads]
        server = Server(pids)
        sizes = bench.subscribers or ([200] if bench.quick else list(SIZES))
        messages, per_s = bench.size(20, 4), 2.0 if not bench.quick else 10.0
        clients = bench.clients or list(CLIENTS)
        loads.notes += [
            f"one channel; {messages} stock quotes of about 100 bytes of JSON at {per_s:g}/s per "
            f"step; subscribers {'ask for gzip' if bench.compressed else 'ask for no coding'}; "
            "worst = "
            "publish→arrival over every subscriber; client: tuned = arrival is the kernel's "
            "receive timestamp, client processes kept to --client-cpus if given; plain = arrival "
            "is when data_received is called, on the loop's own transports, no pinning",
            "late re-polls = long-poll messages published after the answer before them arrived "
            "and before the client polled again; waited on client = those the server had begun "
            "answering (first arrival anywhere) before that poll went out",
            f"server CPU and RSS from /proc of PIDs {pids}; server waited = the share of the "
            "step its processes were ready to run but had no core (their run-queue wait, summed); "
            "client CPU: every client process; client busy = the busiest client process's CPU "
            "over the step; client runnable = the largest share of one message's read window "
            f"(at least {MIN_WINDOW * 1000:g} ms) a client process ran or waited for a core; RSS "
            "per subscriber: over the RSS at the start, n/a after a step that held as many",
            f"1-minute load average at the start: {os.getloadavg()[0]:.2f}",
        ]
        for transport in bench.transports or TRANSPORTS:
            for n in sizes:
                for client in clients:
                    step = (transport, client, n)
                    await held_row(bench, loads, target, server, step, messages, per_s)
        light.notes += [
            "1→1: the next message published once the last arrived; publish: one POST per "
            f"message, keep-alive; fan-out: {FAN_OUT_SUBSCRIBERS} SSE subscribers over "
            f"{bench.processes} client processes, {FAN_OUT_PUBLISHERS} publishers; "
            "server µs each = server CPU per delivery (per message for publish)",
            f"1-minute load average at the start: {os.getloadavg()[0]:.2f}",
        ]
        alone = not bench.quick
        if not alone:
            light.notes.append(
                "--quick: a smoke run, often beside other work: the 1→1 and publish rows are "
                "not judged for a server that shared its core"
            )
        for transport in TRANSPORTS:
            for client in clients:
                messages = bench.size(2000, 20)
                result = await one_to_one(target, server, transport, client, messages, alone)
                light_row(light, result)
        row = await publish_cost(target, server, bench.size(5000, 50), alone)
        light_row(light, (row, 0, []))
        light_row(light, await fan_out(bench, target, server, bench.size(3000, 20)))
    return [loads, light]
