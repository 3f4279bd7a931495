"""This process's CPU share and resident memory, for /stats."""

from __future__ import annotations

import os
import resource
import time


class CpuSampler:
    """CPU % over the last sampling interval, so /stats readers need no state of their own."""

    def __init__(self) -> None:
        self.percent = 0.0
        self._wall = time.monotonic()
        self._cpu = time.process_time()

    def sample(self) -> None:
        wall, cpu = time.monotonic(), time.process_time()
        if wall > self._wall:
            self.percent = round(100.0 * (cpu - self._cpu) / (wall - self._wall), 1)
        self._wall, self._cpu = wall, cpu


def rss_bytes() -> int:
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
