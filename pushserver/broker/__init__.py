"""Brokers: where ids, history and cross-process fan-out live (memory or Redis)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config import Settings
    from ..hub import Hub
    from .base import Broker


def create_broker(settings: Settings, hub_factory: type[Hub]) -> tuple[Broker, Hub]:
    """The broker the settings ask for, with the hub it feeds."""
    if settings.redis:
        from .redis import RedisBroker

        return RedisBroker.create(settings, hub_factory)
    from .memory import MemoryBroker

    return MemoryBroker.create(settings, hub_factory)
