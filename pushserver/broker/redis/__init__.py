"""The Redis engine: ids, history and fan-out shared by every process and node on one Redis."""

from .single import RedisBroker

__all__ = ["RedisBroker"]
