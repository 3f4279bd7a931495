"""Measure the Redis broker's scale-out on loopback: the two figures `pushserver-bench` cannot
take, because it publishes and subscribes through one URL.

    python -m loadtest.scaleout latency --publish URL_A --subscribe URL_B [--messages 2000]
    python -m loadtest.scaleout fanout --url URL [--workers 2] [--subscribers 1000] [--messages 200]

`latency`: one NDJSON subscriber on B, one publisher on A; each message is published when the
previous one has arrived, and the time from sending the POST to reading the line is recorded.
`fanout`: N NDJSON subscribers of one channel on URL (any number of workers behind it); M
messages published in batches of 10; deliveries/s = N x M / (last line read - first POST sent).
Newlines are counted, not parsed, so the client spends as little CPU as possible; run the
servers with a long `--heartbeat` so no heartbeat line falls within a run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from collections.abc import Sequence

import aiohttp


async def _subscribe(session: aiohttp.ClientSession, url: str) -> aiohttp.ClientResponse:
    response = await session.get(url)
    response.raise_for_status()
    return response


async def _held(
    session: aiohttp.ClientSession, url: str, want: int, workers: int = 1, timeout: float = 60
) -> None:
    """Wait until the server (all its workers) holds `want` streams: /stats answers for one
    worker per connection, so ask on fresh connections until every worker has been heard."""
    latest: dict[int, int] = {}
    deadline = time.monotonic() + timeout
    while sum(latest.values()) != want or len(latest) < workers:
        if time.monotonic() > deadline:
            raise RuntimeError(f"streams held per worker: {latest}, expected {want} in all")
        async with session.get(f"{url}/stats", headers={"Connection": "close"}) as r:
            stats = await r.json()
        latest[stats["worker"]] = stats["connections"]["stream"]
        await asyncio.sleep(0.01)


async def latency(publish: str, subscribe: str, messages: int) -> dict[str, float]:
    channel = f"scaleout-lat-{uuid.uuid4().hex[:8]}"
    samples = []
    async with aiohttp.ClientSession() as s:
        response = await _subscribe(s, f"{subscribe}/stream/{channel}")
        await _held(s, subscribe, 1)
        for n in range(messages):
            sent = time.perf_counter()
            async with s.post(f"{publish}/pub/{channel}", json={"n": n}) as r:
                r.raise_for_status()
            while not (await response.content.readline()).strip():
                pass  # heartbeats
            samples.append((time.perf_counter() - sent) * 1000)
        response.close()
    samples.sort()
    return {
        "messages": messages,
        "p50_ms": round(statistics.median(samples), 3),
        "p99_ms": round(samples[int(len(samples) * 0.99) - 1], 3),
        "max_ms": round(samples[-1], 3),
    }


async def _count(response: aiohttp.ClientResponse, want: int) -> float:
    """Read until `want` messages arrived (one line each, after the stream's first empty line;
    no heartbeat falls within a run); returns the time of the last read."""
    seen = -1
    while seen < want:
        chunk = await response.content.readany()
        if not chunk:
            raise RuntimeError(f"stream ended after {seen} of {want} messages")
        seen += chunk.count(b"\n")
    return time.perf_counter()


async def fanout(
    url: str, subscribers: int, messages: int, workers: int = 1, batch: int = 10
) -> dict[str, float]:
    channel = f"scaleout-fan-{uuid.uuid4().hex[:8]}"
    connector = aiohttp.TCPConnector(limit=0, force_close=True)
    async with aiohttp.ClientSession(connector=connector) as s:
        streams = []
        for start in range(0, subscribers, 100):
            count = min(100, subscribers - start)
            streams += await asyncio.gather(
                *(_subscribe(s, f"{url}/stream/{channel}") for _ in range(count))
            )
        await _held(s, url, subscribers, workers)
        readers = [asyncio.create_task(_count(r, messages)) for r in streams]
        began = time.perf_counter()
        for sent in range(0, messages, batch):
            items = [{"channel": channel, "data": {"n": sent + k}} for k in range(batch)]
            async with s.post(f"{url}/pub", json=items[: messages - sent]) as r:
                r.raise_for_status()
        finished = max(await asyncio.gather(*readers))
        for r in streams:
            r.close()
    seconds = finished - began
    return {
        "subscribers": subscribers,
        "messages": messages,
        "seconds": round(seconds, 3),
        "deliveries_per_s": round(subscribers * messages / seconds),
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m loadtest.scaleout", description=__doc__)
    modes = parser.add_subparsers(dest="mode", required=True)
    lat = modes.add_parser("latency", help="publish on one node, receive on another")
    lat.add_argument("--publish", required=True)
    lat.add_argument("--subscribe", required=True)
    lat.add_argument("--messages", type=int, default=2000)
    fan = modes.add_parser("fanout", help="stream fan-out deliveries per second")
    fan.add_argument("--url", required=True)
    fan.add_argument("--subscribers", type=int, default=1000)
    fan.add_argument("--messages", type=int, default=200)
    fan.add_argument("--workers", type=int, default=1, help="worker processes behind --url")
    args = parser.parse_args(argv)
    if args.mode == "latency":
        result = asyncio.run(latency(args.publish, args.subscribe, args.messages))
    else:
        result = asyncio.run(fanout(args.url, args.subscribers, args.messages, args.workers))
    print(" ".join(f"{k}={v}" for k, v in result.items()))


if __name__ == "__main__":
    main()
