"""What every handler reaches through the app: settings, hub, broker, metrics."""

from __future__ import annotations

import dataclasses
import os
import resource
import time

from aiohttp import web

from .broker.base import Broker
from .config import Settings
from .expiry import ExpiryWatch
from .gcmonitor import GcMonitor
from .hub import Hub
from .metrics import Metrics


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


@dataclasses.dataclass(eq=False)
class ServerState:
    settings: Settings
    hub: Hub
    broker: Broker
    metrics: Metrics
    gc: GcMonitor
    expiry: ExpiryWatch
    worker: int
    cpu: CpuSampler = dataclasses.field(default_factory=CpuSampler)
    draining: bool = False


STATE = web.AppKey("pushserver_state", ServerState)
