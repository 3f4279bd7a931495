"""How evenly 1,000 channels load the 3 primaries of a real Redis Cluster (issue 34: the
busiest primary's Redis CPU at most 1.3 times the idlest's), and what a publish costs each.

    .venv/bin/python scripts/cluster_spread.py [--messages 30000] [--channels 1000]

One pushserver node on a fresh cluster (three primaries, a replica each, `--redis-replicas` as
given), one NDJSON subscriber per channel on it, then batches of 50 messages over every channel
in turn through 8 keep-alive connections. Each primary's CPU is read from `INFO cpu`
(used_cpu_sys + used_cpu_user) before and after. Prints per primary: channels, publishes, CPU
seconds, CPU per publish; and busiest/idlest CPU. Exits 1 when a message was not delivered.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
from redis.crc import key_slot

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pushserver.launcher import ServerProcess
from tests.redis_cluster import running_cluster

BATCH = 50
CONNECTIONS = 8


def cpu(node: Any) -> float:
    info = node.client().info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


async def count(http: aiohttp.ClientSession, url: str, channel: str, got: list[int]) -> None:
    async with http.get(f"{url}/stream/{channel}") as r:
        assert r.status == 200, await r.text()
        async for line in r.content:
            if line.strip() and b'"data"' in line:
                got[0] += 1


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=30_000)
    parser.add_argument("--channels", type=int, default=1000)
    parser.add_argument("--redis-replicas", default="-1")
    args = parser.parse_args()
    names = [f"spread{n}" for n in range(args.channels)]
    with running_cluster() as cluster:
        node = ServerProcess(["--redis", cluster.url, "--redis-replicas", args.redis_replicas])
        node.start(0)
        try:
            primaries = cluster.primaries()
            owner = {p.port: p for p in primaries}
            slots = {v.port: v.slots for v in cluster.views() if v.port in owner}
            home = {
                n: next(p for p, s in slots.items() if key_slot(n.encode()) in s) for n in names
            }
            got = [0]
            timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
            connector = aiohttp.TCPConnector(limit=args.channels + CONNECTIONS + 8)
            async with aiohttp.ClientSession(timeout=timeout, connector=connector) as http:
                while True:  # the node on the cluster
                    async with http.get(f"{node.url}/healthz") as r:
                        if r.status == 200:
                            break
                    await asyncio.sleep(0.1)
                readers = [asyncio.create_task(count(http, node.url, n, got)) for n in names]
                while True:
                    async with http.get(f"{node.url}/stats") as r:
                        if (await r.json())["connections"]["stream"] >= args.channels:
                            break
                    await asyncio.sleep(0.1)
                batches = [
                    [
                        {"channel": names[(b * BATCH + k) % len(names)], "data": k}
                        for k in range(BATCH)
                    ]
                    for b in range(args.messages // BATCH)
                ]
                before = {port: cpu(p) for port, p in owner.items()}
                started = time.monotonic()

                async def send(part: list[list[dict[str, Any]]]) -> None:
                    for batch in part:
                        async with http.post(f"{node.url}/pub", json=batch) as r:
                            assert r.status == 201, await r.text()

                await asyncio.gather(*(send(batches[c::CONNECTIONS]) for c in range(CONNECTIONS)))
                elapsed = time.monotonic() - started
                after = {port: cpu(p) for port, p in owner.items()}
                deadline = time.monotonic() + 30
                while got[0] < len(batches) * BATCH and time.monotonic() < deadline:
                    await asyncio.sleep(0.1)
                for task in readers:
                    task.cancel()
        finally:
            node.stop()
    published = {port: 0 for port in owner}
    for batch in batches:
        for item in batch:
            published[home[item["channel"]]] += 1
    rows = {
        port: {
            "channels": sum(1 for h in home.values() if h == port),
            "publishes": published[port],
            "cpu_s": round(after[port] - before[port], 3),
            "cpu_us_per_publish": round(1e6 * (after[port] - before[port]) / published[port], 2),
        }
        for port in owner
    }
    used = [r["cpu_s"] for r in rows.values()]
    result = {
        "messages": len(batches) * BATCH,
        "delivered": got[0],
        "seconds": round(elapsed, 2),
        "primaries": rows,
        "busiest_over_idlest_cpu": round(max(used) / min(used), 3),
    }
    print(json.dumps(result, indent=1))
    return 0 if got[0] == len(batches) * BATCH else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
