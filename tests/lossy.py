"""The lossy-link scenario every client is tested against, and a command to run it.

A server with `--history-size 1000` behind a proxy that cuts every connection after a random
300-3,000 bytes (seeded); 300 messages published straight to the server at about 100/s, each
message's data its index (0..299); a subscriber through the proxy must get each exactly once, in
order (ids 1..300, no gap).

Other clients' test runners use it from the repository root with the project's Python:

    python -m tests.lossy serve [--seed N]
        prints one JSON line {"url": proxy URL, "server": server URL, "channel": name,
        "cursor": head cursor, "messages": 300}; subscribe through "url" from "cursor" (or
        with no cursor, through the proxy), then write `publish` on its stdin to start
        publishing; it prints {"published": 300} when done and exits at EOF on stdin.
    python -m tests.lossy check FILE
        FILE holds the received envelopes, one JSON object per line; exits 0 when they are
        exactly the 300 messages in order, else prints what is wrong and exits 1.
    python -m tests.lossy run --transport T [--seconds S] [--seed N]
        the Python client on transport T; prints how many messages it got and when.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from pushclient import Message, PushClient

from pushserver.launcher import ServerProcess

from .tcpproxy import TcpProxy

CHANNEL = "lossy"
MESSAGES = 300
RATE = 100.0
HISTORY = 1000
CUT_BYTES = (300, 3000)


def random_cuts(seed: int) -> Callable[[], int]:
    """Bytes each new connection may carry from the server before the proxy cuts it."""
    rng = random.Random(seed)
    return lambda: rng.randint(*CUT_BYTES)


@dataclass(frozen=True, slots=True)
class LossyLink:
    server: ServerProcess
    proxy: TcpProxy
    cursor: str
    """The channel's head cursor, read straight from the server before anything is published."""


@asynccontextmanager
async def lossy_link(seed: int = 1) -> AsyncIterator[LossyLink]:
    """A server with history 1,000 and the cutting proxy in front of it."""
    with ServerProcess(["--history-size", str(HISTORY)]) as server:
        async with TcpProxy(server.port, cut_after=random_cuts(seed)) as proxy:
            yield LossyLink(server, proxy, await head_cursor(server.url))


async def head_cursor(base: str) -> str:
    async with (
        aiohttp.ClientSession() as s,
        s.get(f"{base}/lp/{CHANNEL}", params={"timeout": "0"}) as r,
    ):
        r.raise_for_status()
        return (await r.json())["cursor"]


async def publish_all(base: str, count: int = MESSAGES, rate: float = RATE) -> None:
    """`count` messages, one request each, paced at `rate` per second (not proxied)."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    async with aiohttp.ClientSession() as s:
        for i in range(count):
            await asyncio.sleep(max(0.0, start + i / rate - loop.time()))
            async with s.post(f"{base}/pub/{CHANNEL}", json=i) as r:
                r.raise_for_status()


def problems(envelopes: Sequence[dict[str, Any]], count: int = MESSAGES) -> list[str]:
    """What is wrong with what a subscriber received (empty: all `count`, once, in order)."""
    found = []
    gaps = [e for e in envelopes if e.get("type") == "gap"]
    if gaps:
        found.append(f"{len(gaps)} gap(s), first {gaps[0]}")
    got = [(e.get("id"), e.get("data")) for e in envelopes if e.get("type") is None]
    expected = [(i + 1, i) for i in range(count)]
    if got != expected:
        seen = [data for _, data in got]
        dups = len(seen) - len(set(seen))
        missing = sorted(set(range(count)) - set(seen))
        disordered = seen != sorted(seen)
        found.append(
            f"got {len(got)} of {count}: {dups} duplicate(s), {len(missing)} missing "
            f"(first {missing[:5]}), {'out of order' if disordered else 'in order'}"
        )
    return found


@dataclass(slots=True)
class Received:
    envelopes: list[dict[str, Any]]
    seconds: float
    """From the first publish to the last message received (or the deadline)."""


async def receive_with_pushclient(
    link: LossyLink, transport: str, deadline: float, count: int = MESSAGES
) -> Received:
    """Subscribe through the proxy with the Python client while publishing; stop at `count`
    messages or after `deadline` seconds."""
    envelopes: list[dict[str, Any]] = []

    async def subscribe() -> None:
        async with (
            PushClient(link.proxy.url, heartbeat=20.0) as client,
            client.subscribe(CHANNEL, transport=transport, cursor=link.cursor) as sub,
        ):
            async for item in sub:
                envelopes.append(_envelope(item))
                if len(envelopes) >= count:
                    return

    started = time.monotonic()
    subscriber = asyncio.create_task(subscribe())
    publisher = asyncio.create_task(publish_all(link.server.url, count))
    try:
        await asyncio.wait_for(asyncio.shield(subscriber), deadline)
    except TimeoutError:
        subscriber.cancel()
    await publisher
    return Received(envelopes, time.monotonic() - started)


def _envelope(item: Any) -> dict[str, Any]:
    if isinstance(item, Message):
        return {"channel": item.channel, "id": item.id, "data": item.data}
    return {"type": "gap", "channel": item.channel, "from": item.from_id, "to": item.to_id}


async def _serve(seed: int) -> None:
    async with lossy_link(seed) as link:
        print(
            json.dumps(
                {
                    "url": link.proxy.url,
                    "server": link.server.url,
                    "channel": CHANNEL,
                    "cursor": link.cursor,
                    "messages": MESSAGES,
                }
            ),
            flush=True,
        )
        lines = _stdin_lines()
        async for line in lines:
            if line.strip() == "publish":
                await publish_all(link.server.url)
                print(json.dumps({"published": MESSAGES}), flush=True)
        # EOF on stdin: done.


async def _stdin_lines() -> AsyncIterator[str]:
    while line := await asyncio.to_thread(sys.stdin.readline):
        yield line


async def _run(transport: str, seconds: float, seed: int) -> None:
    async with lossy_link(seed) as link:
        got = await receive_with_pushclient(link, transport, seconds)
        found = problems(got.envelopes)
        print(
            json.dumps(
                {
                    "transport": transport,
                    "received": sum(1 for e in got.envelopes if e.get("type") is None),
                    "seconds": round(got.seconds, 2),
                    "cuts": link.proxy.cuts,
                    "problems": found,
                }
            )
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.lossy", description=__doc__.split("\n")[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="server + cutting proxy; publish on request")
    serve.add_argument("--seed", type=int, default=1)
    check = commands.add_parser("check", help="check a file of received envelopes")
    check.add_argument("file", type=Path)
    run = commands.add_parser("run", help="the Python client through the cutting proxy")
    run.add_argument("--transport", required=True, choices=("longpoll", "stream", "sse", "ws"))
    run.add_argument("--seconds", type=float, default=60.0)
    run.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if args.command == "serve":
        asyncio.run(_serve(args.seed))
    elif args.command == "run":
        asyncio.run(_run(args.transport, args.seconds, args.seed))
    else:
        lines = args.file.read_text().splitlines()
        found = problems([json.loads(line) for line in lines if line.strip()])
        for problem in found:
            print(problem)
        return 1 if found else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
