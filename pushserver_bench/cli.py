"""`pushserver-bench`: run the experiments, print their tables, optionally write JSON."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence

from pushserver.usage import OneLineParser
from pushserver_measure.machine import describe
from pushserver_measure.tuning import raise_open_files_limit

from . import (
    broadcast,
    budgets,
    concurrency,
    inputs,
    latency,
    loops,
    pubsub,
    scaleout,
    throughput,
    timeouts,
    versus,
    wirebytes,
)
from .context import Bench
from .said import bench_line, bench_said
from .table import Table
from .targets import KINDS, TRANSPORTS
from .versus import CLIENTS

MAX_PER_PROCESS = 19_000
"""Subscribers one client process may hold: its 20,000 open files, less room for the rest."""

EXPERIMENTS: dict[int, Callable[[Bench], Awaitable[list[Table]]]] = {
    1: latency.run,
    2: pubsub.run,
    3: broadcast.run,
    4: concurrency.run,
    5: throughput.run,
    6: loops.run,
    7: budgets.run,
    8: scaleout.run,
    9: versus.run,
    10: timeouts.run,
    11: wirebytes.run,
}
BY_DEFAULT = [1, 2, 3, 4, 5, 6, 7, 8]
"""Experiments 9 and 10 hold up to 19,900 subscribers, 11 compares codings: they run when
named."""


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = OneLineParser(
        prog="pushserver-bench",
        description="Rerun the classic event-service and push benchmarks against pushserver on "
        "loopback: 1 latency 1→1, 2 publishersxsubscribers, 3 broadcast, 4 concurrency 1 vs "
        "100, 5 publish throughput by connectionsxworkers, 6 uvloop vs asyncio, 7 fast path "
        "budgets, 8 Redis scale-out (two nodes, --workers 2); and, only when named, 9 any "
        "server at --url (pushserver or nginx+nchan, --target), or the bench's bare server (the "
        "floor), under 19,900 subscribers, 10 a crowd of 19,800 long-polls timing out together "
        "and a 1→1 long-poll meanwhile (pushserver or nginx+nchan), 11 bytes on the wire per "
        "delivered message, compressed and not (pushserver or nginx+nchan).",
    )
    parser.add_argument(
        "--url",
        default="",
        help="measure this running server instead of "
        "starting one per experiment (experiments 5 and 6 then skip what needs "
        "other server settings)",
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run)")
    parser.add_argument("--only", default="", metavar="N[,M]", help="experiments to run")
    parser.add_argument("--json", metavar="FILE", help="also write the tables as JSON")
    parser.add_argument(
        "--processes",
        type=int,
        default=2,
        help="client processes for subscriber-heavy loads (default 2)",
    )
    parser.add_argument(
        "--client-cpus",
        default="",
        metavar="LIST",
        help="run the client processes only on these CPUs (as taskset -c takes them: 1 or "
        "1-3,5), so on a small machine they leave the server's core alone; the bench's own "
        "process, which publishes, stays free (default: any CPU)",
    )
    parser.add_argument(
        "--redis",
        default="",
        help="Redis URL for the 2-worker rows of experiment 5 and for experiment 8",
    )
    parser.add_argument(
        "--server-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra argument for the servers the bench starts (repeatable)",
    )
    parser.add_argument(
        "--target",
        choices=KINDS,
        default="pushserver",
        help="experiments 9 and 10: what serves --url (nchan needs --url or --sub-url; without "
        "--url, bare starts the bench's bare server, the least a uvloop server can do: "
        "experiment 9 only)",
    )
    parser.add_argument(
        "--pub-url",
        default="",
        help="experiment 9, nchan: the publisher location the channel is appended to "
        "(default URL/pub/)",
    )
    parser.add_argument(
        "--sub-url",
        default="",
        help="experiment 9, nchan: the subscriber location the channel is appended to "
        "(default URL/sub/)",
    )
    parser.add_argument(
        "--pid",
        type=int,
        action="append",
        default=[],
        help="experiment 9: a server process to read CPU and RSS from (repeatable; default: "
        "whoever listens on the subscribe port, with its children)",
    )
    parser.add_argument(
        "--subscribers",
        default="",
        metavar="N[,M]",
        help="experiments 9 and 10: subscriber counts (default 1000,5000,10000,19900 and "
        "10000,19800)",
    )
    parser.add_argument(
        "--client",
        default="",
        metavar="C[,C]",
        help="experiment 9: the measuring clients, side by side: tuned (the kernel's receive "
        "timestamps, --client-cpus) and/or plain (timed when data_received is called, the "
        "loop's own transports, no pinning) (default both)",
    )
    parser.add_argument(
        "--per-process",
        type=int,
        default=5000,
        metavar="N",
        help="experiments 9 and 10: subscribers per client process at most, each on its own "
        f"source address (default 5000; at most {MAX_PER_PROCESS})",
    )
    parser.add_argument(
        "--compressed",
        action="store_true",
        help="experiment 9: subscribers ask for compression (Accept-Encoding: gzip) and "
        "inflate what comes compressed",
    )
    parser.add_argument(
        "--encode-cursor",
        action="store_true",
        help="experiment 9: send pushserver's long-poll cursor percent-encoded, as "
        "encodeURIComponent writes it (browsers, the JS and Java clients)",
    )
    parser.add_argument(
        "--transports",
        default="",
        metavar="T[,T]",
        help="experiment 9: transports under load, longpoll and/or sse (default both; one per "
        "run on a fresh server gives each its memory figure)",
    )
    return parser.parse_args(argv)


def cpu_list(text: str) -> frozenset[int]:
    """The CPUs of a list such as "0,2-3"; ValueError when it is not one."""
    cpus: set[int] = set()
    for part in text.split(","):
        first, dash, last = part.partition("-")
        low, high = int(first), int(last) if dash else int(first)
        if not 0 <= low <= high:
            raise ValueError(part)
        cpus.update(range(low, high + 1))
    return frozenset(cpus)


def cpus_refusal(text: str) -> str:
    """Why `--client-cpus` cannot be used here ("" when it can)."""
    try:
        cpus = cpu_list(text)
    except ValueError:
        return f"--client-cpus takes a CPU list such as 1 or 1-3,5, not {text!r}"
    free = os.sched_getaffinity(0)
    if not cpus <= free:
        missing = ",".join(map(str, sorted(cpus - free)))
        usable = ",".join(map(str, sorted(free)))
        return f"--client-cpus: CPU {missing} is not one this process may use ({usable})"
    return ""


def refusal(
    args: argparse.Namespace,
    numbers: list[int],
    transports: list[str],
    clients: Sequence[str] = (),
) -> str:
    """Why the arguments cannot run ("" when they can)."""
    if args.client_cpus and (problem := cpus_refusal(args.client_cpus)):
        return problem
    if any(n not in EXPERIMENTS for n in numbers):
        return f"--only takes numbers from 1 to {len(EXPERIMENTS)}"
    if any(t not in TRANSPORTS for t in transports):
        return f"--transports takes {','.join(TRANSPORTS)}"
    if any(c not in CLIENTS for c in clients):
        return f"--client takes {','.join(CLIENTS)}"
    if not 1 <= args.per_process <= MAX_PER_PROCESS:
        return f"--per-process takes 1 to {MAX_PER_PROCESS} subscribers"
    if args.compressed and numbers != [9]:
        return "--compressed goes with --only 9"
    if args.encode_cursor and (args.target != "pushserver" or numbers != [9]):
        return "--encode-cursor goes with --only 9 and a pushserver target (its cursor)"
    if args.target == "nchan" and not set(numbers) <= {9, 10, 11}:
        return "--target nchan goes with --only 9, 10 or 11"
    if args.target == "bare" and numbers != [9]:
        return "--target bare goes with --only 9"
    if args.target == "nchan" and not (args.url or args.sub_url):
        return f"--target {args.target} needs --url or --sub-url"
    if args.target == "bare" and args.server_arg:
        return "--server-arg is for pushserver; the bare server takes none"
    return ""


async def run(bench: Bench, numbers: list[int]) -> list[Table]:
    tables = []
    for number in numbers:
        bench.said.clear()
        for table in await EXPERIMENTS[number](bench):
            table.servers = list(bench.said)
            print(table.render(bench.machine, bench_line()), flush=True)
            tables.append(table)
    return tables


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        numbers = [int(n) for n in args.only.split(",") if n] or BY_DEFAULT
        sizes = [int(n) for n in args.subscribers.split(",") if n]
    except ValueError:
        numbers, sizes = [0], []
    transports = [t for t in args.transports.split(",") if t]
    clients = [c for c in args.client.split(",") if c]
    problem = refusal(args, numbers, transports, clients) or inputs.problem(args, sizes)
    if problem:
        print(f"pushserver-bench: {problem}", file=sys.stderr)
        return 2
    problem = inputs.unreachable(args, numbers)
    if problem:
        print(f"pushserver-bench: {problem}", file=sys.stderr)
        return 1
    raise_open_files_limit()
    # SIGTERM unwinds like Ctrl-C, so the servers and client processes the bench started stop.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    cpus = cpu_list(args.client_cpus) if args.client_cpus else frozenset()
    pinned = f"; client processes on CPUs {args.client_cpus}" if cpus else ""
    bench = Bench(
        describe() + pinned,
        args.quick,
        args.url or args.sub_url,
        args.server_arg,
        args.redis,
        max(1, args.processes),
        args.target,
        args.pub_url,
        args.sub_url,
        args.pid,
        sizes,
        transports,
        cpus,
        clients,
        args.per_process,
        args.encode_cursor,
        args.compressed,
    )
    import uvloop

    tables = uvloop.run(run(bench, numbers))
    lost = sum(t.lost for t in tables)
    failed = [t for t in tables if t.lost or t.errors]
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {
                    "machine": bench.machine,
                    "bench": bench_said(),
                    "quick": args.quick,
                    "lost": lost,
                    "tables": [t.to_json() for t in tables],
                },
                fh,
                indent=1,
            )
    if failed:
        print(
            f"FAILED: {lost} deliveries lost; errors in experiments "
            f"{sorted({t.experiment for t in failed})}",
            file=sys.stderr,
        )
        return 1
    print("all deliveries arrived (lost=0)")
    return 0
