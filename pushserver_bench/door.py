"""The door under a flood of silent connections: how long a new long-poll and `/healthz` take
while connections that send nothing fill `--max-connections` (docs/performance.md).

    python -m pushserver_bench.door --limit 10000 --silent 10500

Starts a server with `--max-connections LIMIT` (or measures `--url`), opens SILENT connections
that send nothing, spread over loopback source addresses, then times on new connections, one
after the other: `/healthz`, a `GET /lp/{channel}?timeout=0` (retried on 503 until answered:
the time is until the answer that serves it) and `/healthz` again. Every figure is read from
the server's answers; a server that cannot be reached stops the run with an error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Sequence

from pushserver.launcher import ServerProcess
from pushserver_measure.http11 import Endpoint
from pushserver_measure.tuning import raise_open_files_limit

SOURCES = 8
"""Loopback source addresses the silent connections come from (127.0.0.2 and on)."""


async def _get(endpoint: Endpoint, path: str) -> int:
    """One GET on a new connection; its status."""
    reader, writer = await asyncio.open_connection(endpoint.host, endpoint.port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    answer = await reader.read()
    writer.close()
    return int(answer.split(b" ", 2)[1])


async def _timed(endpoint: Endpoint, path: str, retry: bool) -> dict:
    started = time.monotonic()
    refused = 0
    while True:
        status = await _get(endpoint, path)
        if status == 200 or not retry or time.monotonic() - started > 30:
            break
        refused += 1
        await asyncio.sleep(0.01)
    took = time.monotonic() - started
    return {"path": path, "status": status, "ms": round(took * 1000, 1), "refused_first": refused}


async def measure(endpoint: Endpoint, silent: int) -> None:
    opened = []
    started = time.monotonic()
    for k in range(silent):
        source = f"127.0.0.{2 + k % SOURCES}"
        opened.append(
            await asyncio.open_connection(endpoint.host, endpoint.port, local_addr=(source, 0))
        )
    flood = time.monotonic() - started
    print(json.dumps({"silent_opened": silent, "seconds": round(flood, 2)}), flush=True)
    for path, retry in (("/healthz", False), ("/lp/door?timeout=0", True), ("/healthz", False)):
        line = await _timed(endpoint, path, retry)
        line["load"] = os.getloadavg()[0]
        line["utc"] = time.strftime("%H:%M:%S", time.gmtime())
        print(json.dumps(line), flush=True)
    for _, writer in opened:
        writer.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pushserver_bench.door")
    parser.add_argument("--limit", type=int, default=10_000, help="--max-connections")
    parser.add_argument("--silent", type=int, default=10_500, help="connections that send nothing")
    parser.add_argument("--url", default="", help="a running server (its own limit applies)")
    args = parser.parse_args(argv)
    if raise_open_files_limit() < args.silent + 100:
        raise SystemExit(f"this process may not open {args.silent} connections")
    if args.url:
        asyncio.run(measure(Endpoint.parse(args.url), args.silent))
        return 0
    with ServerProcess(["--max-connections", str(args.limit)]) as srv:
        asyncio.run(measure(Endpoint.parse(srv.url), args.silent))
    return 0


if __name__ == "__main__":
    sys.exit(main())
