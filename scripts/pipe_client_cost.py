"""The publish script call alone, through the two clients the engine has: `pipe.Pipe` (one
Redis) against redis-py's `OneConnection` (one connection, retries off, hiredis; the Cluster and
Sentinel engines' writer), each without and with a `WAIT 1` after the call. Sequential calls,
one in flight, as the engine makes them (`coalesce.py`), on a master with one replica started
here; node CPU is this process's, Redis CPU the master's `INFO cpu`.

    .venv/bin/python scripts/pipe_client_cost.py 3 20000     # ROUNDS CALLS
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import time
from pathlib import Path
from typing import Any

import hiredis
import redis
import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pushserver.broker.redis.pipe import Pipe, Script
from pushserver.broker.redis.scripts import PUBLISH_LUA, Keys
from pushserver.broker.redis.shard import (
    CONNECT_TIMEOUT,
    REPLY_TIMEOUT,
    OneConnection,
    Writer,
    read_pool,
)
from tests.redis_fixture import REPLICATION, RedisServer, poll
from tests.redis_sentinel import role

DATA = b'{"n": 1, "text": "' + b"x" * 80 + b'"}'
NAME = "bench-client-cost"


def call(keys: Keys) -> tuple[list[Any], list[Any]]:
    """The keys and arguments of a one-message publish, as `Shard` builds them (history 100,
    5 minutes, a day of meta, no lineage trusted but the master's own)."""
    names = [*keys.channel(NAME), keys.seen(NAME, ""), *keys.shared(NAME)]
    args: list[Any] = [secrets.token_hex(5), 100, 300_000, 86_400_000, repr(time.time())]
    args += [keys.prefix, 65536, "", NAME, DATA, ""]
    return names, args


def writer(kind: str, url: str) -> Writer:
    if kind == "pipe.py":
        return Pipe(read_pool(url).make_connection(), REPLY_TIMEOUT, CONNECT_TIMEOUT)
    return OneConnection(read_pool(url, size=1))


async def run(kind: str, url: str, calls: int, wait: bool) -> None:
    out, script = writer(kind, url), Script(PUBLISH_LUA)
    names, args = call(Keys())
    for _ in range(calls):
        await out.script(script, names, args)
        if wait:
            await out.call("WAIT", 1, 1000)
    await out.aclose()


def redis_cpu(server: RedisServer) -> float:
    with server.client() as client:
        info = client.info("cpu")
    return float(info["used_cpu_user"] + info["used_cpu_sys"])


async def measure(kind: str, master: RedisServer, calls: int, wait: bool) -> tuple[float, ...]:
    await run(kind, master.url, 200, wait)  # warm-up, and the script loaded
    r0, c0, w0 = redis_cpu(master), time.process_time(), time.perf_counter()
    await run(kind, master.url, calls, wait)
    c1, w1, r1 = time.process_time(), time.perf_counter(), redis_cpu(master)
    return (c1 - c0) / calls * 1e6, (w1 - w0) / calls * 1e6, (r1 - r0) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rounds", type=int)
    parser.add_argument("calls", type=int)
    args = parser.parse_args()
    versions = (hiredis.__version__, redis.__version__, uvloop.__version__)
    print("hiredis {}, redis-py {}, uvloop {}".format(*versions))
    print(os.popen("uptime").read().strip(), flush=True)
    master, replica = RedisServer(REPLICATION).start(), RedisServer().start()
    try:
        with replica.client() as client:
            client.replicaof("127.0.0.1", master.port)
        poll(lambda: role(replica) == ("slave", "up"), "the replica synced")
        for n in range(args.rounds):
            for kind in ("pipe.py", "redis-py"):
                for wait in (False, True):
                    cpu, wall, rcpu = uvloop.run(measure(kind, master, args.calls, wait))
                    label = f"{kind}{' + WAIT 1' if wait else ''}"
                    print(
                        f"round {n + 1} {label:18} node CPU {cpu:6.1f} µs/call, wall {wall:6.1f}"
                        f" µs/call, Redis CPU (master) {rcpu:5.1f} µs/call",
                        flush=True,
                    )
        print(os.popen("uptime").read().strip(), flush=True)
    finally:
        master.stop()
        replica.stop()


if __name__ == "__main__":
    main()
