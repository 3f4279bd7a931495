"""What the tables must name: the machine, and the CPU the server and the client spent."""

from __future__ import annotations

import os
import platform
import time
from typing import Any

import psutil

from .client import get_json


def describe() -> str:
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (
        f"{os.cpu_count()} cores, {model}, Linux {platform.release()}, "
        f"Python {platform.python_version()}"
    )


SERVER_PIDS: dict[str, int] = {}
"""Process ids of the servers the bench started, by URL: with workers, their CPU is read from
the process tree (every worker), not from the `/stats` of whichever worker answers."""


def server_cpu(url: str, stats: dict[str, Any]) -> float:
    pid = SERVER_PIDS.get(url)
    try:
        root = psutil.Process(pid) if pid else None
        workers = root.children(recursive=True) if root else []
        if root is None or not workers:  # one process: /stats is finer than clock ticks
            return stats["cpu_seconds"]
        return sum(sum(p.cpu_times()[:2]) for p in (root, *workers))
    except psutil.Error:
        return stats["cpu_seconds"]


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
