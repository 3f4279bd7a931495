"""What a publish costs a server tree, counted rather than timed: the instructions the server
process executes per publish (valgrind's callgrind, user space) with N SSE, NDJSON or long-poll
subscribers of one channel (0: nobody subscribed, each publish's 201 awaited), one publish at a
time, each delivered to all before the next (one flush each, `--max-flush-delay 0`); a long-poll
polls again from the callback that read its answer, as the bench's 1->1 client does, so its
re-poll and the next publish race as they do there; or the Python bytes
each held long-poll keeps (tracemalloc). Counts do not move with the load of a shared machine,
so trees can be compared one after the other.

    .venv/bin/python scripts/publish_cost.py TREE... [--subscribers 100] [--publishes 500]
        [--transport sse|stream|longpoll] [--redis] [--held 2000 [--channels 100]] [--opcodes]
        [--keep DIR]

Each TREE (a `git worktree add --detach` of a commit) runs with this checkout's `.venv` through
`PYTHONPATH`, on the allocator `PYTHONMALLOC` (and `LD_PRELOAD`) in this command's environment
name, pymalloc when unset: never re-executed onto jemalloc by the server itself, which valgrind
would not follow. `--redis` starts a redis-server for the runs; `--held N` counts memory instead
(N long-polls over `--channels` channels: 1 is experiment 9's crowd);
`--opcodes` counts the Python opcodes and calls the same publishes run (a `sys.settrace` opcode
counter, no valgrind). `--keep DIR` keeps what each tree's count is made of, by function:
`DIR/callgrind.out.TREE` for `callgrind_annotate`, or `DIR/opcodes.TREE.tsv` (opcodes and calls
per publish, file, function).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pickle
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pushserver.launcher import ServerProcess
from pushserver_bench.client import BenchError, wait_subscribed
from pushserver_measure.http11 import Responses
from tests.redis_fixture import RedisServer

QUIET = ["--heartbeat", "3600", "--sweep-interval", "3600"]
"""The server's periodic work put off past the run: it comes by the clock, and valgrind slows a
run by a varying factor, so one count would take in a heartbeat to every subscriber, sweeps and
the allocator's check, and the next not (up to 3k instructions per publish apart)."""
MARK = b"QZQZ"
BODY = b'{"p":"' + MARK + b"x" * 86 + b'"}'
BOOT = """
import collections, json, os, pickle, runpy, signal, sys, tracemalloc
out = os.environ["COST_OUT"]
if os.environ.get("COST_OPCODES"):
    ops, calls = collections.Counter(), collections.Counter()
    def step(frame, event, arg):
        if event == "opcode":
            ops[frame.f_code] += 1
        return step
    def enter(frame, event, arg):
        if event == "call":
            calls[frame.f_code] += 1
            frame.f_trace_opcodes = True
            return step
    def counting(sig, frame):
        if sig == signal.SIGUSR1:
            sys.settrace(enter)
            open(out + ".on", "w").close()
            return
        sys.settrace(None)
        rows = [[c.co_filename, c.co_qualname, ops[c], calls[c]] for c in set(ops) | set(calls)]
        with open(out + ".part", "w") as f:
            json.dump(rows, f)
        os.rename(out + ".part", out)
    signal.signal(signal.SIGUSR1, counting)
    signal.signal(signal.SIGUSR2, counting)
if os.environ.get("COST_HELD"):
    tracemalloc.start()
    shots = []
    def shot(sig, frame):
        shots.append(tracemalloc.take_snapshot())
        if len(shots) == 2:
            with open(out, "wb") as f:
                pickle.dump(shots, f)
        open(out + ".%d" % len(shots), "w").close()
    signal.signal(signal.SIGUSR1, shot)
sys.argv = ["pushserver", *sys.argv[1:]]
runpy.run_module("pushserver", run_name="__main__", alter_sys=True)
"""
"""Runs the server of the tree `PYTHONPATH` names; with `COST_HELD`, SIGUSR1 takes a
tracemalloc snapshot (two in all, written to `COST_OUT`); with `COST_OPCODES`, SIGUSR1 starts
counting opcodes and calls by code object and SIGUSR2 writes the counts to `COST_OUT`."""


class Measured(ServerProcess):
    """A server of another tree, under `prefix` (valgrind) or with tracemalloc."""

    def __init__(self, args: list[str], tree: Path, prefix: list[str], env: dict[str, str]):
        allocator = {"PYTHONMALLOC": os.environ.get("PYTHONMALLOC") or "pymalloc"}
        super().__init__(args, ready_timeout=180, env={"PYTHONPATH": str(tree), **allocator, **env})
        self.prefix = prefix

    def command(self, port: int) -> list[str]:
        where = ["--host", self.host, "--port", str(port)]
        return [*self.prefix, sys.executable, "-c", BOOT, *where, *self.args]


class Counted(asyncio.Protocol):
    """A held response: its head seen, the message marks in its body counted."""

    def __init__(self, seen: Callable[[int], None]) -> None:
        self.seen = seen
        self.tail = b""
        self.head = False

    def data_received(self, data: bytes) -> None:
        buf = self.tail + data
        if not self.head and b"\r\n\r\n" in buf:
            self.head = True
            self.seen(0)
        self.tail = buf[1 - len(MARK) :]
        if n := buf.count(MARK):
            self.seen(n)


class Polling(asyncio.Protocol):
    """A plain long-poll that polls again from the callback that read its answer, with the
    answer's cursor, as the bench's 1->1 client does; the message marks each answer carries
    counted."""

    def __init__(self, seen: Callable[[int], None]) -> None:
        self.seen = seen
        self.answers = Responses(retry_after=False)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.poll(b"")

    def poll(self, cursor: bytes) -> None:
        query = b"&cursor=" + cursor if cursor else b""
        self.transport.write(b"GET /lp/cost?timeout=60%s HTTP/1.1\r\nHost: cost\r\n\r\n" % query)

    def data_received(self, data: bytes) -> None:
        for answer in self.answers.feed(data):
            if answer.status != 200:  # SystemExit leaves the loop, as intended
                raise SystemExit(f"a long-poll was answered {answer.status}: {answer.body!r}")
            self.poll(orjson.loads(answer.body)["cursor"].encode())
            self.seen(answer.body.count(MARK))


class Publisher(asyncio.Protocol):
    """One keep-alive connection: a publish, and its answer awaited."""

    def __init__(self) -> None:
        self.answers = Responses(retry_after=False)
        self.answered: asyncio.Future[int] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        for answer in self.answers.feed(data):
            assert self.answered is not None
            self.answered.set_result(answer.status)

    async def publish(self, request: bytes) -> None:
        self.answered = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        if (status := await self.answered) != 201:
            raise SystemExit(f"publish answered {status}")


async def deadline(ready: Callable[[], bool], what: str, seconds: float = 120) -> None:
    end = time.monotonic() + seconds
    while not ready():
        if time.monotonic() > end:
            raise SystemExit(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def fan_out(port: int, pid: int, args: argparse.Namespace, out: Path) -> str:
    """Instructions (or opcodes and calls) per publish over `args.publishes` publishes, after a
    warm-up."""
    loop = asyncio.get_running_loop()
    heads, got, want = [0], [0], [0]  # heads seen, messages received, messages awaited
    delivered = loop.create_future()

    def seen(n: int) -> None:
        if not n:
            heads[0] += 1
            return
        got[0] += n
        if got[0] >= want[0] and not delivered.done():
            delivered.set_result(None)

    path = f"/{args.transport}/cost".encode()
    for _ in range(args.subscribers):
        if args.transport == "longpoll":
            await loop.create_connection(lambda: Polling(seen), "127.0.0.1", port)
            continue
        t, _ = await loop.create_connection(lambda: Counted(seen), "127.0.0.1", port)
        t.write(b"GET %s HTTP/1.1\r\nHost: cost\r\n\r\n" % path)
    if args.transport == "longpoll":  # held polls send no head back: the server counts them
        try:
            await wait_subscribed(f"http://127.0.0.1:{port}", "cost", args.subscribers, 120)
        except BenchError as exc:
            raise SystemExit(str(exc)) from None
    else:
        await deadline(lambda: heads[0] == args.subscribers, "the subscribers' heads")
    _, pub = await loop.create_connection(Publisher, "127.0.0.1", port)
    request = b"POST /pub/cost HTTP/1.1\r\nHost: cost\r\nContent-Type: application/json\r\n"
    request += b"Content-Length: %d\r\n\r\n%s" % (len(BODY), BODY)

    async def publish(n: int) -> None:
        nonlocal delivered
        for _ in range(n):
            delivered = loop.create_future()
            want[0] = got[0] + args.subscribers
            await pub.publish(request)
            if args.subscribers:  # with none, the 201 is all a publish waits for
                await asyncio.wait_for(delivered, 60)

    await publish(20)
    if args.opcodes:
        os.kill(pid, signal.SIGUSR1)
        await deadline(Path(f"{out}.on").exists, "the opcode counter")
        await publish(args.publishes)
        os.kill(pid, signal.SIGUSR2)
        await deadline(out.exists, "the opcode counts")
        return opcodes(out, args)
    control = ["callgrind_control"]
    subprocess.run([*control, "-z", str(pid)], check=True, capture_output=True)
    await publish(args.publishes)
    subprocess.run([*control, "-d", str(pid)], check=True, capture_output=True)
    dumps = sorted(Path(args.dir).glob(f"cg.{pid}.*"))
    summary = re.search(r"^summary: (\d+)", dumps[-1].read_text(), re.M)
    assert summary is not None
    if args.keep:
        shutil.copy(dumps[-1], Path(args.keep) / f"callgrind.out.{args.tree}")
    return f"{int(summary[1]) / args.publishes:,.0f} instructions per publish"


def opcodes(out: Path, args: argparse.Namespace) -> str:
    """The opcode counter's totals per publish; by function in `--keep`'s directory."""
    rows = json.loads(out.read_text())
    n = args.publishes
    if args.keep:
        rows.sort(key=lambda row: -row[2])
        lines = [
            f"{ops / n:.2f}\t{calls / n:.2f}\t{file}\t{name}" for file, name, ops, calls in rows
        ]
        (Path(args.keep) / f"opcodes.{args.tree}.tsv").write_text("\n".join(lines) + "\n")
    ops, calls = sum(row[2] for row in rows) / n, sum(row[3] for row in rows) / n
    return f"{ops:,.1f} Python opcodes and {calls:,.1f} Python calls per publish"


async def held(port: int, pid: int, out: Path, n: int, channels: int) -> float:
    """Python bytes per held long-poll: tracemalloc before and after `n` are held."""
    loop = asyncio.get_running_loop()
    await asyncio.sleep(0.5)

    async def snapshot(k: int) -> None:
        os.kill(pid, signal.SIGUSR1)
        await deadline(Path(f"{out}.{k}").exists, "a snapshot")

    await snapshot(1)
    for i in range(n):
        t, _ = await loop.create_connection(lambda: Counted(lambda _: None), "127.0.0.1", port)
        t.write(b"GET /lp/cost-%d?timeout=60 HTTP/1.1\r\nHost: cost\r\n\r\n" % (i % channels))
    await asyncio.sleep(2)  # held, not answered: nothing arrives to wait for
    await snapshot(2)
    with open(out, "rb") as f:
        before, after = pickle.load(f)
    return sum(d.size_diff for d in after.compare_to(before, "filename")) / n


def measure(tree: Path, args: argparse.Namespace, redis: str | None) -> str:
    out = Path(args.dir) / f"out.{tree.name}"
    for stale in out.parent.glob(f"{out.name}*"):  # the same tree's earlier run
        stale.unlink()
    flags = ["--max-flush-delay", "0", *QUIET, *(["--redis", redis] if redis else [])]
    if args.held:
        server = Measured(flags, tree, [], {"COST_OUT": str(out), "COST_HELD": "1"})
    elif args.opcodes:
        server = Measured(flags, tree, [], {"COST_OUT": str(out), "COST_OPCODES": "1"})
    else:
        valgrind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={args.dir}/cg.%p"]
        server = Measured(flags, tree, valgrind, {"COST_OUT": str(out)})
    with server:
        assert server.proc is not None
        if args.held:
            value = asyncio.run(held(server.port, server.proc.pid, out, args.held, args.channels))
            return (
                f"{tree}: {value:,.1f} Python bytes per held long-poll "
                f"({args.held:,} held over {args.channels:,} channel{'s' * (args.channels > 1)})"
            )
        args.tree = tree.name
        counted = asyncio.run(fan_out(server.port, server.proc.pid, args, out))
        return (
            f"{tree}: {counted} ({args.subscribers} {args.transport} subscribers, "
            f"{'Redis' if redis else 'memory broker'})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", type=Path, nargs="+")
    parser.add_argument("--subscribers", type=int, default=100)
    parser.add_argument("--publishes", type=int, default=500)
    parser.add_argument("--transport", choices=("sse", "stream", "longpoll"), default="sse")
    parser.add_argument("--redis", action="store_true")
    parser.add_argument("--held", type=int, default=0, help="count memory per held long-poll")
    parser.add_argument("--channels", type=int, default=100, help="the held polls' channels")
    parser.add_argument("--opcodes", action="store_true", help="count Python opcodes instead")
    parser.add_argument("--keep", type=Path, help="keep each tree's counts by function here")
    args = parser.parse_args()
    if args.channels < 1:
        parser.error("--channels must be at least 1")
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the held long-polls' sockets
    if args.keep:
        args.keep = args.keep.resolve()
        args.keep.mkdir(parents=True, exist_ok=True)
    trees = [tree.resolve() for tree in args.trees]  # `.` is this checkout, not the cwd below
    os.chdir(tempfile.gettempdir())  # each server imports the tree its PYTHONPATH names
    with tempfile.TemporaryDirectory() as scratch:
        args.dir = scratch
        redis = RedisServer().start() if args.redis else None
        try:
            for tree in trees:
                if redis is not None:
                    redis.client().flushall()
                print(measure(tree, args, redis.url if redis else None), flush=True)
        finally:
            if redis is not None:
                redis.stop()


if __name__ == "__main__":
    main()
