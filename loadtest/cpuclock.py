"""CPU used and CPU waited for, per process.

On a shared machine a process can be starved rather than busy: it wants a core but sits in the
run queue, and its own CPU percentage stays low while its latency soars. Linux counts that wait
in /proc/PID/schedstat (main thread: the one that does the work in gevent and asyncio
processes), so a step can say "this process wanted X % of a core and got Y %".
"""

from __future__ import annotations

from pathlib import Path

import psutil


def run_queue_wait(pid: int) -> float | None:
    """Seconds the process's main thread has waited for a CPU; None where not available."""
    try:
        fields = Path(f"/proc/{pid}/schedstat").read_text().split()
        return int(fields[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


def cpu_seconds(pid: int) -> float | None:
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return None
    return times.user + times.system
