"""Run the server: in this process, or as `--workers N` processes under a supervisor."""

from __future__ import annotations

import sys

from .config import Settings
from .web.server import listening_socket, raise_open_file_limit, run_worker
from .workers import supervise


def run(settings: Settings) -> None:
    if settings.workers > 1:
        supervise(settings)
        return
    raise_open_file_limit(settings)
    try:
        sock = listening_socket(settings)
    except OSError as exc:
        sys.exit(f"pushserver: cannot listen on {settings.host}:{settings.port}: {exc.strerror}")
    run_worker(settings, sock)
