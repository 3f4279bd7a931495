"""Broker engines: where ids, history and cross-process fan-out live (memory or Redis)."""

from __future__ import annotations

from ..config import Settings
from ..core.broker import Broker


def create_broker(settings: Settings) -> Broker:
    """The engine the settings ask for (Redis is imported only when used)."""
    if settings.redis:
        kind = settings.redis_target.kind
        if kind == "cluster":
            from .redis.cluster import ClusterBroker

            return ClusterBroker(settings)
        if kind == "sentinel":
            from .redis.sentinel import SentinelBroker

            return SentinelBroker(settings)
        from .redis import RedisBroker

        return RedisBroker(settings)
    from .memory import MemoryBroker

    return MemoryBroker(settings.history_size, settings.history_ttl, settings.sweep_interval)
