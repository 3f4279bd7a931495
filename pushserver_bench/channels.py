"""Memory per channel: a server's RSS as it holds many channels' histories, after they expire,
and after a flood of anonymous channels (issue 36's figures, docs/performance.md).

    python -m pushserver_bench.channels fill --channels 100000 --messages 10
    python -m pushserver_bench.channels fill --channels 100000 --ttl 5 --after 30
    python -m pushserver_bench.channels flood --channels 192000 --after 60 [--redis URL]
    python -m pushserver_bench.channels budget --channels 100000 --messages 10

`budget` measures in this process, with tracemalloc, what the memory engine's histories
allocate per channel and per message. Otherwise, without `--url`, it starts a server (memory
broker, or `--redis URL`; `--history-size` is `--messages`, `--history-ttl` is `--ttl`) and
reads its RSS from /proc. `fill` publishes
`--messages` rounds of one message of `--size` bytes to each of `--channels` channels, in
`POST /pub` batches of `--batch`; `flood` holds long-polls of `--per-poll` fresh channels each,
all at once, until they time out (`--hold`). With `--after S`, RSS is read again once the
server holds no channel (`fill`) or the flood is over, and S seconds more have passed.
Publishing goes over `--clients` keep-alive connections, one thread each. Every figure comes
from the server: a server that cannot be reached, or that refuses a request, stops the run
with an error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator, Sequence

from prometheus_client.parser import text_string_to_metric_families

from pushserver.broker.memory import MemoryBroker
from pushserver.core.broker import Item
from pushserver.core.history import Histories
from pushserver.core.messages import Message
from pushserver.launcher import ServerProcess
from pushserver_measure.http11 import Connection, Endpoint

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss(pid: int) -> int:
    """Resident bytes of process `pid` (/proc/PID/statm)."""
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * PAGE


def _get(endpoint: Endpoint, path: str) -> bytes:
    """The body of `GET path`; anything but 200 ends the run, saying what was answered."""
    conn = Connection(endpoint)
    try:
        head, body = conn.request("GET", path)
    finally:
        conn.close()
    if head.status != 200:
        raise SystemExit(f"{path} answered {head.status}: {body[:200]!r}")
    return body


def stats(endpoint: Endpoint) -> dict:
    answer = json.loads(_get(endpoint, "/stats"))
    assert isinstance(answer, dict)
    return answer


def full_collections(endpoint: Endpoint) -> tuple[int, float]:
    """The server's full collections so far and their pauses summed, in seconds
    (`pushserver_gc_pause_seconds{generation="2"}` in `/metrics`)."""
    body = _get(endpoint, "/metrics")
    count, total = 0, 0.0
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            if family.name == "pushserver_gc_pause_seconds" and sample.labels["generation"] == "2":
                if sample.name.endswith("_count"):
                    count = int(sample.value)
                elif sample.name.endswith("_sum"):
                    total = sample.value
    return count, total


def in_threads(endpoint: Endpoint, clients: int, work: Callable[[Connection, int], None]) -> None:
    """`work(connection, k)` for k in range(clients), each on its own thread and connection;
    the first error ends the run."""
    errors: list[BaseException] = []

    def run(k: int) -> None:
        conn = Connection(endpoint)
        try:
            work(conn, k)
        except BaseException as exc:  # reported by the caller
            errors.append(exc)
        finally:
            conn.close()

    threads = [threading.Thread(target=run, args=(k,)) for k in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise SystemExit(f"a client failed: {errors[0]!r}")


def fill(endpoint: Endpoint, args: argparse.Namespace) -> None:
    """`args.messages` rounds over `args.channels` channels, each round's batches shared out
    among the clients."""
    data = b'"' + b"x" * (args.size - 2) + b'"'
    starts = range(0, args.channels, args.batch)

    def work(conn: Connection, k: int) -> None:
        for _ in range(args.messages):
            for start in starts[k :: args.clients]:
                end = min(args.channels, start + args.batch)
                body = (
                    b"["
                    + b",".join(
                        b'{"channel":"c%d","data":%b}' % (n, data) for n in range(start, end)
                    )
                    + b"]"
                )
                head, answer = conn.request(
                    "POST", "/pub", body, {"Content-Type": "application/json"}
                )
                if head.status != 201:
                    raise RuntimeError(f"POST /pub answered {head.status}: {answer[:200]!r}")

    in_threads(endpoint, args.clients, work)


def flood(endpoint: Endpoint, args: argparse.Namespace, during: Callable[[], object]) -> None:
    """Fresh channels held at once: `--per-poll` of them in each long-poll (`?timeout=`
    `--hold`), as many polls open together as `--channels` needs, spread over loopback source
    addresses, each answered (200) before the flood counts as over."""
    timer = threading.Timer(args.hold * 0.7, during)  # while the polls are held
    timer.start()
    try:
        asyncio.run(_flood(endpoint, args))
    finally:
        timer.cancel()


async def _flood(endpoint: Endpoint, args: argparse.Namespace) -> None:
    polls = -(-args.channels // args.per_poll)
    sources = [f"127.0.0.{2 + k % 8}" for k in range(polls)]

    async def one(k: int) -> None:
        first = k * args.per_poll
        names = ",".join(
            f"anon{n}" for n in range(first, min(args.channels, first + args.per_poll))
        )
        reader, writer = await asyncio.open_connection(
            endpoint.host, endpoint.port, local_addr=(sources[k], 0)
        )
        writer.write(
            f"GET /lp/{names}?timeout={args.hold:g} HTTP/1.1\r\nHost: x\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        answer = await reader.read()
        writer.close()
        if not answer.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"a flood poll was answered {answer[:200]!r}")

    results = await asyncio.gather(*(one(k) for k in range(polls)), return_exceptions=True)
    failed = [r for r in results if isinstance(r, BaseException)]
    if failed:
        raise SystemExit(f"{len(failed)} of {polls} flood polls failed: {failed[0]!r}")


def budget(args: argparse.Namespace) -> None:
    """In this process, with tracemalloc: what the memory engine's histories allocate for
    `--channels` channels (names aside), published to once with the history then expired (an
    idle channel), and holding 1 and `--messages` messages of `--size` bytes."""
    data = b'"' + b"x" * (args.size - 2) + b'"'
    names = [f"c{n}" for n in range(args.channels)]

    async def traced(messages: int, expire: bool) -> tuple[int, Histories]:
        broker = MemoryBroker(max(1, args.messages), 1e9, 3600.0)
        async with broker.running(NoSink()):  # no hub: the histories alone
            gc.collect()
            tracemalloc.start()
            for _ in range(messages):
                for start in range(0, args.channels, args.batch):
                    batch = [Item(name, data) for name in names[start : start + args.batch]]
                    for message in broker.publish(batch):
                        message.head  # noqa: B018 - encoded, as the fan-out does
            if expire:
                for history in broker.history.values():
                    history.expire(0.0, time.time() + 1)
            gc.collect()
            used = tracemalloc.get_traced_memory()[0]
            tracemalloc.stop()
        return used, broker.history

    n = args.channels
    idle, _ = asyncio.run(traced(1, True))
    one, _ = asyncio.run(traced(1, False))
    full, held = asyncio.run(traced(args.messages, False))
    head = held.tally.bytes / held.tally.messages
    marginal = (full - one) / (n * (args.messages - 1)) if args.messages > 1 else 0.0
    print(
        json.dumps(
            {
                "idle_channel_b": round(idle / n),
                "one_message_channel_b": round(one / n),
                "channel_b": round(full / n),
                "head_b": round(head, 1),
                "message_b": round(marginal, 1),
                "message_beyond_head_b": round(marginal - head, 1),
            }
        )
    )


class NoSink:
    """A hub with nobody subscribed: the engine's histories alone (a test's too)."""

    def append(self, message: Message) -> None:
        pass

    def jump(self, name: str) -> None:
        pass

    def audience(self, name: str) -> int:
        return 0


def until_empty(endpoint: Endpoint, timeout: float) -> dict:
    """`/stats` once the server holds no channel."""
    deadline = time.monotonic() + timeout
    while True:
        current = stats(endpoint)
        if current["channels"] == 0:
            return current
        if time.monotonic() > deadline:
            raise SystemExit(f"still {current['channels']} channels after {timeout:g} s")
        time.sleep(0.5)


def report(label: str, pid: int, endpoint: Endpoint, base: int, channels: int) -> int:
    now = rss(pid)
    held = stats(endpoint)
    per = (now - base) / channels if base else None
    full, paused = full_collections(endpoint)
    line = {
        "at": label,
        "rss_mb": round(now / 2**20, 1),
        "rss_per_channel_b": None if per is None else round(per),
        "channels_held": held["channels"],
        "history_bytes": held.get("history_bytes"),
        "malloc_trims": held.get("malloc_trims"),
        "full_collections": full,
        "full_collections_s": round(paused, 4),
        "gc_pause_worst_s": held["gc"]["pause_seconds_worst"],
        "load": os.getloadavg()[0],
        "utc": time.strftime("%H:%M:%S", time.gmtime()),
    }
    print(json.dumps(line), flush=True)
    return now


@contextlib.contextmanager
def server(args: argparse.Namespace) -> Iterator[tuple[str, int]]:
    if args.url:
        if not args.pid:
            raise SystemExit("--url needs --pid: the server process whose RSS is read")
        yield args.url, args.pid
        return
    extra = ["--history-size", str(max(1, args.messages)), "--history-ttl", str(args.ttl)]
    extra += ["--sweep-interval", str(args.sweep_interval), "--max-channels", "10000000"]
    if args.redis:
        extra += ["--redis", args.redis]
    with ServerProcess([*extra, *args.server_arg], ready_timeout=60) as srv:
        assert srv.proc is not None
        yield srv.url, srv.proc.pid


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m pushserver_bench.channels")
    parser.add_argument("mode", choices=("fill", "flood", "budget"))
    parser.add_argument("--channels", type=int, default=100_000)
    parser.add_argument("--messages", type=int, default=10, help="per channel (fill)")
    parser.add_argument("--size", type=int, default=100, help="bytes of JSON per message")
    parser.add_argument("--batch", type=int, default=1000, help="messages per POST /pub")
    parser.add_argument("--clients", type=int, default=2, help="connections, a thread each")
    parser.add_argument("--ttl", type=float, default=3600, help="--history-ttl of the server")
    parser.add_argument("--sweep-interval", type=float, default=5)
    parser.add_argument("--after", type=float, default=-1, help="seconds; <0: no after figure")
    parser.add_argument("--url", default="", help="a running server (with --pid)")
    parser.add_argument("--pid", type=int, default=0)
    parser.add_argument("--per-poll", type=int, default=64, help="channels per flood poll")
    parser.add_argument("--hold", type=float, default=5, help="flood polls' ?timeout=")
    parser.add_argument("--redis", default="", help="the server started with --redis URL")
    parser.add_argument("--server-arg", action="append", default=[], help="more server flags")
    args = parser.parse_args(argv)
    if args.size < 2 or args.channels < 1 or args.batch < 1 or args.clients < 1:
        parser.error("--size must be at least 2, --channels, --batch and --clients at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.mode == "budget":
        budget(args)
        return 0
    with server(args) as (url, pid):
        endpoint = Endpoint.parse(url)
        time.sleep(1)  # what starting allocated settles
        base = report("baseline", pid, endpoint, 0, 1)
        started = time.monotonic()
        if args.mode == "fill":
            fill(endpoint, args)
        else:
            flood(endpoint, args, lambda: report("held", pid, endpoint, base, args.channels))
        took = time.monotonic() - started
        print(json.dumps({"at": args.mode, "seconds": round(took, 1)}), flush=True)
        report(f"after {args.mode}", pid, endpoint, base, args.channels)
        if args.after >= 0:
            if args.mode == "fill":
                until_empty(endpoint, args.ttl + 20 * args.sweep_interval + 600)
            time.sleep(args.after)
            after = report(f"{args.after:g} s later", pid, endpoint, base, args.channels)
            bound = 1.25 * base + (20 << 20)
            print(json.dumps({"bound_mb": round(bound / 2**20, 1), "within": after <= bound}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
