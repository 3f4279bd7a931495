"""The CPU the server and the client spent over one measurement."""

from __future__ import annotations

import time
from typing import Any

from pushserver_measure.machine import tree_cpu_seconds

from .client import get_json

SERVER_PIDS: dict[str, int] = {}
"""Process ids of the servers the bench started, by URL: with workers, their CPU is read from
the process tree (every worker), not from the `/stats` of whichever worker answers."""


def server_cpu(url: str, stats: dict[str, Any]) -> float:
    pid = SERVER_PIDS.get(url)
    tree = tree_cpu_seconds(pid) if pid else None
    if tree is None or not tree[1]:  # one process: /stats is finer than clock ticks
        return float(stats["cpu_seconds"])
    return tree[0]


class CpuMeter:
    """Server CPU (its process tree, or `/stats` cpu_seconds for `--url`) and this process's CPU
    over one measurement."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.server = 0.0
        self.client = 0.0
        self.wall = 0.0
        self.stats: dict[str, Any] = {}

    async def read(self) -> dict[str, Any]:
        stats = await get_json(self.url, "/stats")
        assert isinstance(stats, dict)
        return stats

    async def start(self) -> None:
        self.stats = await self.read()
        self.server = server_cpu(self.url, self.stats)
        self.client = time.process_time()
        self.wall = time.perf_counter()

    async def stop(self) -> tuple[float, float, float]:
        """(wall seconds, server CPU seconds, this process's CPU seconds) since `start`."""
        wall = time.perf_counter() - self.wall
        client = time.process_time() - self.client
        self.stats = await self.read()
        return wall, server_cpu(self.url, self.stats) - self.server, client

    async def server_now(self) -> float:
        """Server CPU seconds since `start`, without ending the measurement."""
        return server_cpu(self.url, await self.read()) - self.server
