"""What the tables must name: the machine, and the CPU the server and the client spent."""

from __future__ import annotations

import os
import platform
import time
from typing import Any

from .client import HttpConnection, connect


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


class CpuMeter:
    """Server CPU (from `/stats` cpu_seconds) and this process's CPU over one measurement."""

    def __init__(self, conn: HttpConnection) -> None:
        self.conn = conn
        self.server = 0.0
        self.client = 0.0
        self.wall = 0.0
        self.stats: dict[str, Any] = {}

    @classmethod
    async def open(cls, url: str) -> CpuMeter:
        return cls(await connect(url))

    async def read(self) -> dict[str, Any]:
        stats = await self.conn.json("/stats")
        assert isinstance(stats, dict)
        return stats

    async def start(self) -> None:
        self.stats = await self.read()
        self.server = self.stats["cpu_seconds"]
        self.client = time.process_time()
        self.wall = time.perf_counter()

    async def stop(self) -> tuple[float, float, float]:
        """(wall seconds, server CPU seconds, this process's CPU seconds) since `start`."""
        wall = time.perf_counter() - self.wall
        client = time.process_time() - self.client
        self.stats = await self.read()
        return wall, self.stats["cpu_seconds"] - self.server, client

    def close(self) -> None:
        self.conn.close()
