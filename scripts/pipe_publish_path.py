"""Server CPU per publish through one pushserver process `--redis`: this checkout (publish
script calls over `pipe.py`) against VARIANT, a copy of it with `scripts/redispy-variant.diff`
applied (the same calls through redis-py's `OneConnection`). Interleaved rounds, a fresh server
per round and tree, 1 and 8 keep-alive publisher connections of the bench's request load
(`pushserver_bench.requests.request_load`), nobody subscribed.

    .venv/bin/python scripts/pipe_publish_path.py VARIANT 3 20000     # VARIANT ROUNDS MESSAGES

`scripts/pipe_vs_redispy.sh` makes VARIANT and runs this after `pipe_client_cost.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pushserver.launcher import ServerProcess
from pushserver_bench.context import Bench, channel
from pushserver_bench.machine import SERVER_PIDS
from pushserver_bench.requests import request_load
from tests.redis_fixture import RedisServer

HERE = Path(__file__).resolve().parent.parent


async def one(bench: Bench, url: str, connections: int, messages: int) -> tuple[float, ...]:
    r = await request_load(bench, url, "publish", channel("pp"), connections, messages)
    done = len(r["times"])
    if not done:
        raise SystemExit(f"no publish answered at {url}: {r['errors'][:3]}")
    return r["server_cpu"] / done * 1e6, done / (r["last"] - r["first"]), messages - done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("variant", type=Path, help="a copy with redispy-variant.diff applied")
    parser.add_argument("rounds", type=int)
    parser.add_argument("messages", type=int)
    args = parser.parse_args()
    trees = {"pipe.py": HERE, "redis-py": args.variant.resolve()}
    if not (trees["redis-py"] / "pushserver").is_dir():
        raise SystemExit(f"{args.variant}: not a pushserver checkout")
    os.chdir(tempfile.gettempdir())  # each server imports the tree its PYTHONPATH names
    print(os.popen("uptime").read().strip(), flush=True)
    redis_server = RedisServer().start()
    bench = Bench(machine="local")
    try:
        for n in range(args.rounds):
            for label, tree in trees.items():
                server = ServerProcess(
                    ["--redis", redis_server.url, "--heartbeat", "60"],
                    env={"PYTHONPATH": str(tree)},
                ).start(0)
                assert server.proc is not None
                SERVER_PIDS[server.url] = server.proc.pid
                try:
                    for connections in (1, 8):
                        load = one(bench, server.url, connections, args.messages)
                        cpu, rate, lost = asyncio.run(load)
                        print(
                            f"round {n + 1} {label:9} {connections} conn: server CPU {cpu:6.1f} "
                            f"µs/publish, {rate:7.0f} publishes/s, unanswered {lost}",
                            flush=True,
                        )
                finally:
                    del SERVER_PIDS[server.url]
                    server.stop()
        print(os.popen("uptime").read().strip(), flush=True)
    finally:
        redis_server.stop()


if __name__ == "__main__":
    main()
