"""The machine a figure was measured on, and what each process used and waited for.

On a shared machine a process can be starved rather than busy: it wants a core but sits in the
run queue, and its own CPU percentage stays low while its latency soars. Linux counts that wait
in /proc/PID/schedstat (main thread: the one that does the work in gevent and asyncio
processes), so a measurement can say "this process wanted X % of a core and got Y %".
"""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

import psutil


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def machine_info() -> dict[str, Any]:
    """The machine as results files record it (docs/results-format.md)."""
    return {
        "cpus": os.cpu_count(),
        "cpu_model": cpu_model(),
        "memory_bytes": psutil.virtual_memory().total,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def describe() -> str:
    """The machine in one line, as the bench's tables name it."""
    return (
        f"{os.cpu_count()} cores, {cpu_model() or 'unknown CPU'}, "
        f"{platform.system()} {platform.release()}, Python {platform.python_version()}"
    )


def run_queue_wait(pid: int) -> float | None:
    """Seconds the process's main thread has waited for a CPU; None where not available."""
    try:
        fields = Path(f"/proc/{pid}/schedstat").read_text().split()
        return int(fields[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of one process; None once it is gone."""
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return None
    return times.user + times.system


def tree_cpu_seconds(pid: int) -> tuple[float, int] | None:
    """CPU seconds of a process and all its descendants, and how many descendants it has."""
    try:
        root = psutil.Process(pid)
        children = root.children(recursive=True)
        return sum(sum(p.cpu_times()[:2]) for p in (root, *children)), len(children)
    except psutil.Error:
        return None
