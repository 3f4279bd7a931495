"""The machine a figure was measured on, and what each process used and waited for.

On a shared machine a process can be starved rather than busy: it wants a core but sits in the
run queue, and its own CPU percentage stays low while its latency soars. Linux counts that wait
in /proc/PID/schedstat (main thread: the one that does the work in gevent and asyncio
processes), so a measurement can say "this process wanted X % of a core and got Y %".
"""

from __future__ import annotations

import os
import platform
from collections.abc import Iterator
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
    """The machine in one line, as the bench's tables name it; not the Python of the process
    asking, which the bench names apart from the server's (`pushserver_bench.said`)."""
    return (
        f"{os.cpu_count()} cores, {cpu_model() or 'unknown CPU'}, "
        f"{platform.system()} {platform.release()}"
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


def with_descendants(pids: list[int]) -> list[int]:
    """`pids` and every live descendant of them, each once (nginx: its master and workers)."""
    found: dict[int, None] = {}
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            for p in (proc, *proc.children(recursive=True)):
                found[p.pid] = None
        except psutil.Error:
            continue
    return list(found)


def _fd_target(pid: int, fd: int | str) -> str:
    try:
        return os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError:
        return ""


def _holds(pid: int, target: str) -> bool:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    return any(_fd_target(pid, fd) == target for fd in fds)


def listening_pids(port: int) -> list[int]:
    """The processes holding a listening TCP socket on `port`, with the ancestors that share
    it: the kernel names one holder of a shared socket, an nginx worker, say, and its master
    holds the same socket (the master's other workers are its descendants)."""
    pids: set[int] = set()
    for c in psutil.net_connections("tcp"):
        if c.status != psutil.CONN_LISTEN or not c.laddr or c.laddr.port != port or not c.pid:
            continue
        pid, socket = c.pid, _fd_target(c.pid, c.fd)
        pids.add(pid)
        try:
            while socket and (parent := psutil.Process(pid).ppid()) and _holds(parent, socket):
                pid = parent
                pids.add(pid)
        except psutil.Error:
            continue
    return sorted(pids)


def _task_texts(pids: list[int], name: str) -> Iterator[str]:
    """/proc/PID/task/*/`name` of every thread of `pids`; a thread that ends between the
    listing and the read is left out."""
    for pid in pids:
        for path in Path(f"/proc/{pid}/task").glob(f"*/{name}"):
            try:
                yield path.read_text()
            except OSError:
                continue


def _task_fields(pids: list[int], name: str, least: int) -> Iterator[list[str]]:
    """The fields of /proc/PID/task/*/`name` of every thread of `pids` (after the command name
    in parentheses, which may hold spaces), at least `least` of them."""
    for text in _task_texts(pids, name):
        fields = text.rpartition(")")[2].split()
        if len(fields) >= least:
            yield fields


def run_seconds(pids: list[int]) -> float:
    """CPU seconds all threads of `pids` have run, from /proc/PID/task/*/schedstat: nanosecond
    counts, where /proc/PID/stat counts 10 ms ticks that a short measurement may never see."""
    return _schedstat_seconds(pids, 0)


def waited_seconds(pids: list[int]) -> float:
    """Seconds all threads of `pids` have waited in a run queue, ready but without a core: a
    server sharing its cores with the client that measures it waits here while it is busy."""
    return _schedstat_seconds(pids, 1)


def _schedstat_seconds(pids: list[int], index: int) -> float:
    return sum(int(f[index]) for f in _task_fields(pids, "schedstat", index + 1)) / 1e9


def user_system_seconds(pids: list[int]) -> tuple[float, float]:
    """User and system (kernel) CPU seconds of every thread of `pids`, from
    /proc/PID/task/*/stat: 10 ms ticks, so a share of one in the other is read over a run of
    seconds (`run_seconds` is the precise total)."""
    user = system = 0
    for fields in _task_fields(pids, "stat", 13):
        # state is the first field after the command name; utime and stime the 12th and 13th
        user, system = user + int(fields[11]), system + int(fields[12])
    tick = os.sysconf("SC_CLK_TCK")
    return user / tick, system / tick


def preemptions(pids: list[int]) -> int:
    """Times the threads of `pids` were taken off a core while they could still run
    (/proc/PID/task/*/status `nonvoluntary_ctxt_switches`): a server alone on its core
    between requests gives it up by waiting (a voluntary switch) and is almost never
    preempted; one that shares a core with its client is."""
    total = 0
    for text in _task_texts(pids, "status"):
        for line in text.splitlines():
            if line.startswith("nonvoluntary_ctxt_switches:"):
                total += int(line.split(":")[1])
    return total


def resident_bytes(pids: list[int]) -> int:
    """Resident memory of `pids` together."""
    total = 0
    for pid in pids:
        try:
            total += psutil.Process(pid).memory_info().rss
        except psutil.Error:
            continue
    return total
