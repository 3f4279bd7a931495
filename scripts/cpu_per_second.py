"""CPU of Redis, a server (with its workers) and a burn-in's Locust master (its publisher),
second by second, as shares of one core: which of the processes sharing one machine during a
burn-in ran short. One line a second, `EPOCH redis=% server=% master=%`, for at most 15 minutes
or until killed.

    python scripts/cpu_per_second.py REDIS_PID SERVER_PID OUT

The master is found once it starts: the Locust process whose command line has `--master` and
this checkout's locustfile.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import psutil

from pushserver_burnin.cli import LOCUSTFILE
from pushserver_measure.machine import cpu_seconds

SECONDS = 900


def burnin_master() -> int | None:
    for proc in psutil.process_iter(["cmdline"]):
        command = proc.info["cmdline"] or []
        if "--master" in command and str(LOCUSTFILE) in command:
            return int(proc.pid)
    return None


def used(pids: list[int]) -> float:
    return sum(cpu_seconds(pid) or 0.0 for pid in pids)


def main(redis: int, server: int, out: Path) -> None:
    master: int | None = None
    before: tuple[float, dict[str, float]] | None = None
    with out.open("w") as log:
        for _ in range(SECONDS):
            master = master or burnin_master()
            try:
                workers = [p.pid for p in psutil.Process(server).children()]
            except psutil.Error:
                return  # the server has stopped
            groups = {"redis": [redis], "server": workers, "master": [master] if master else []}
            now = (time.time(), {name: used(pids) for name, pids in groups.items()})
            if before is not None:
                wall = now[0] - before[0]
                shares = " ".join(
                    f"{name}={100 * (now[1][name] - before[1][name]) / wall:.1f}" for name in groups
                )
                log.write(f"{now[0]:.1f} {shares}\n")
                log.flush()
            before = now
            time.sleep(1)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]))
