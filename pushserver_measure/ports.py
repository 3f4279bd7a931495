"""Loopback ports for the processes the tools start (Locust masters, throwaway redis-servers)."""

from __future__ import annotations

import random
import socket
from pathlib import Path

EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST = 20000
"""The lowest port chosen below the ephemeral range (well clear of the usual services')."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now. On Linux it is chosen below
    the kernel's ephemeral range: a port from that range can be taken by any outgoing
    connection between this call and the bind of the process it is for, which a busy machine
    (a test run's other workers) does within seconds; elsewhere the system picks one."""
    try:
        first = int(EPHEMERAL.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        first = 0
    candidates = random.sample(range(LOWEST, first), min(64, max(first - LOWEST, 0)))
    for port in [*candidates, 0]:
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(sock.getsockname()[1])
    raise OSError("no free port on 127.0.0.1")
