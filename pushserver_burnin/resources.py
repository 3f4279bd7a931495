"""What a step cost: the server's CPU, run-queue wait, memory and connections, and the load
generator's CPU and run-queue wait, from two snapshots (publishing starts, drain ends)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import orjson

from pushserver_burnin.settings import SATURATED_CPU
from pushserver_measure.http11 import Connection, ConnectionClosed
from pushserver_measure.machine import cpu_seconds, run_queue_wait

LOOPBACK = ("127.0.0.1", "::1", "localhost")


@dataclass(frozen=True)
class Clock:
    """One process's CPU used and CPU waited for (run queue), cumulative seconds, at a time."""

    cpu: float | None
    wait: float | None
    at: float


@dataclass
class Snapshot:
    time: float
    server: dict[int, dict[str, Any]]  # each worker's /stats, by pid
    server_clock: dict[int, Clock]  # each worker's, only when the server runs on this machine
    loadgen: dict[str, Clock]  # per load-generator process


def fetch_stats(conn: Connection, headers: dict[str, str]) -> dict[str, Any] | None:
    try:
        head, body = conn.request("GET", "/stats", headers=headers, timeout=10)
    except (OSError, ConnectionClosed):
        conn.close()
        return None
    return orjson.loads(body) if head.status == 200 else None


def _percent(first: Clock | None, last: Clock | None, field: str) -> float | None:
    """Share of one core over the interval between two clocks."""
    if first is None or last is None or last.at <= first.at:
        return None
    before, after = getattr(first, field), getattr(last, field)
    if before is None or after is None:
        return None
    return 100.0 * (after - before) / (last.at - first.at)


def connection_count(stats: dict[str, Any]) -> Any:
    connections = stats.get("connections")
    return connections.get("total") if isinstance(connections, dict) else connections


def worker_figures(pid: int, first: Snapshot, last: Snapshot) -> dict[str, Any]:
    """One worker over the step. Its CPU is its own `cpu_seconds` at both ends (`/stats`'s
    `cpu_percent` only when it gives none); a worker missing at the start has no CPU figure."""
    stats, before = last.server[pid], first.server.get(pid)
    cpu = stats.get("cpu_percent") if "cpu_seconds" not in stats else None
    if before is not None and last.time > first.time:
        start, end = before.get("cpu_seconds"), stats.get("cpu_seconds")
        if start is not None and end is not None:
            cpu = 100.0 * (end - start) / (last.time - first.time)
    return {
        "pid": pid,
        "worker": stats.get("worker"),
        "cpu_percent": cpu,
        "cpu_wait_percent": _percent(
            first.server_clock.get(pid), last.server_clock.get(pid), "wait"
        ),
        "rss_bytes": stats.get("rss_bytes"),
        "connections": connection_count(stats),
        "channels": stats.get("channels"),
        "history_bytes": stats.get("history_bytes"),
    }


def _known(rows: list[dict[str, Any]], key: str) -> list[float]:
    return [row[key] for row in rows if isinstance(row[key], int | float)]


def total(rows: list[dict[str, Any]], key: str) -> float | None:
    """The sum of a figure over rows (workers), None when no row has it."""
    values = _known(rows, key)
    return sum(values) if values else None


SUMMED = ("rss_bytes", "connections", "channels", "history_bytes")
"""What the whole server holds: the sum over its workers."""


def server_figures(first: Snapshot, last: Snapshot) -> dict[str, Any]:
    """The whole server over the step: memory, connections and channels of all its workers
    together; CPU of the busiest worker (a share of one core, as the load generator's is of its
    busiest process) and of all of them; each worker's figures beside."""
    rows = [worker_figures(pid, first, last) for pid in sorted(last.server)]
    figures: dict[str, Any] = {
        "workers": len(rows),
        "cpu_percent": max(_known(rows, "cpu_percent"), default=None),
        "cpu_wait_percent": max(_known(rows, "cpu_wait_percent"), default=None),
        "cpu_percent_total": total(rows, "cpu_percent"),
        "cpu_wait_percent_total": total(rows, "cpu_wait_percent"),
    }
    figures |= {key: total(rows, key) for key in SUMMED}
    return figures | {"per_worker": rows}


def loadgen_figures(first: Snapshot, last: Snapshot, delivered: int) -> dict[str, Any]:
    """The load generator's CPU over the step, and what one delivery cost it (µs of CPU)."""
    used, waited, wanted, spent = [], [], [], 0.0
    for node, clock in last.loadgen.items():
        start = first.loadgen.get(node)
        cpu = _percent(start, clock, "cpu")
        wait = _percent(start, clock, "wait")
        if cpu is not None:
            used.append(cpu)
            wanted.append(cpu + (wait or 0.0))
            if node != "master" and start is not None and start.cpu is not None:
                spent += (clock.cpu or 0.0) - start.cpu
        if wait is not None:
            waited.append(wait)
    return {
        "cpu_percent": max(used, default=None),
        "cpu_wait_percent": max(waited, default=None),
        "cpu_seconds": spent,
        "cpu_us_per_delivery": spent / delivered * 1e6 if delivered and spent else None,
        "processes": len(last.loadgen),
        "saturated": max(wanted, default=0.0) >= SATURATED_CPU,
    }


def own_clock(pid: int) -> Clock:
    return Clock(cpu_seconds(pid), run_queue_wait(pid), time.time())
