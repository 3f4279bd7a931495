"""`pushserver-bench`: run the experiments, print their tables, optionally write JSON."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence

from pushserver_measure.machine import describe
from pushserver_measure.tuning import raise_open_files_limit

from . import broadcast, budgets, concurrency, latency, loops, pubsub, scaleout, throughput
from .context import Bench
from .table import Table

EXPERIMENTS: dict[int, Callable[[Bench], Awaitable[list[Table]]]] = {
    1: latency.run,
    2: pubsub.run,
    3: broadcast.run,
    4: concurrency.run,
    5: throughput.run,
    6: loops.run,
    7: budgets.run,
    8: scaleout.run,
}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="pushserver-bench",
        description="Rerun the classic event-service and push benchmarks against pushserver on "
        "loopback: 1 latency 1→1, 2 publishersxsubscribers, 3 broadcast, 4 concurrency 1 vs "
        "100, 5 publish throughput by connectionsxworkers, 6 uvloop vs asyncio, 7 fast path "
        "budgets, 8 Redis scale-out (two nodes, --workers 2).",
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
    return parser.parse_args(argv)


async def run(bench: Bench, numbers: list[int]) -> list[Table]:
    tables = []
    for number in numbers:
        for table in await EXPERIMENTS[number](bench):
            print(table.render(bench.machine), flush=True)
            tables.append(table)
    return tables


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        numbers = [int(n) for n in args.only.split(",") if n] or sorted(EXPERIMENTS)
    except ValueError:
        numbers = [0]
    if any(n not in EXPERIMENTS for n in numbers):
        print(
            f"pushserver-bench: --only takes numbers from 1 to {len(EXPERIMENTS)}", file=sys.stderr
        )
        return 2
    raise_open_files_limit()
    # SIGTERM unwinds like Ctrl-C, so the servers and client processes the bench started stop.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    bench = Bench(
        describe(), args.quick, args.url, args.server_arg, args.redis, max(1, args.processes)
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
