"""What every handler reaches through the app: settings, hub, metrics."""

from __future__ import annotations

import dataclasses

from aiohttp import web

from ..config import Settings
from ..core.expiry import ExpiryWatch
from ..core.hub import Hub
from ..core.ratelimit import RateLimiter
from ..monitor.gcmonitor import GcMonitor
from ..monitor.metrics import Metrics
from ..monitor.process import CpuSampler
from ..monitor.trim import Trimmer
from .admission import Admission, HeadGuard


@dataclasses.dataclass(eq=False)
class ServerState:
    settings: Settings
    hub: Hub
    metrics: Metrics
    gc: GcMonitor
    expiry: ExpiryWatch
    worker: int
    admission: Admission
    """Held subscribers and the limits on them (`admit` before any await, `leave` once)."""
    cpu: CpuSampler = dataclasses.field(default_factory=CpuSampler)
    trimmer: Trimmer = dataclasses.field(default_factory=Trimmer)
    """Gives the C allocator's free memory back after sweeps and floods."""
    heads: HeadGuard = dataclasses.field(init=False)
    draining: bool = False
    limiter: RateLimiter | None = None
    """The publish rate limit (`--max-publish-rate`), when set."""

    def __post_init__(self) -> None:
        self.heads = HeadGuard(self.admission)


STATE = web.AppKey("pushserver_state", ServerState)
