"""Run the server: in this process, or as `--workers N` processes under a supervisor."""

from __future__ import annotations

from .config import Settings
from .web.server import listening_socket, raise_open_file_limit, run_worker
from .workers import supervise


def run(settings: Settings) -> None:
    """Serve until stopped; an address that cannot be bound raises ConfigError."""
    if settings.workers > 1:
        supervise(settings)
        return
    raise_open_file_limit(settings)
    run_worker(settings, listening_socket(settings))
