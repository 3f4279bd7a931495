"""Faults and churn mid-run, and load generators that join from elsewhere: pushserver-burnin
end to end against real servers, Redis restarted by a --fault command, subscribers dropped by
--churn, and Locust workers started as separate `pushserver-burnin worker` processes."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pushserver.launcher import ServerProcess
from pushserver_measure.ports import free_port

from .test_burnin import RUN_TIMEOUT, burnin_command, read_results, run_burnin

REDIS = shutil.which("redis-server")


@contextlib.contextmanager
def daemon_redis(folder: Path) -> Iterator[tuple[int, str]]:
    """A Redis that a shell command can restart (daemonized, its pid in a file); yields its
    port and the command that restarts it empty."""
    if REDIS is None:
        pytest.skip("redis-server is not installed")
    port = free_port()
    pidfile = folder / "redis.pid"
    server = [REDIS, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder)]
    quiet = ["--save", "", "--appendonly", "no", "--daemonize", "yes", "--pidfile", str(pidfile)]
    start = shlex.join([*server, *quiet])
    ping = f"redis-cli -p {port} ping"
    wait = f"until {ping} >/dev/null 2>&1; do sleep 0.05; done"
    subprocess.run(f"{start} && {wait}", shell=True, check=True, timeout=20)
    restart = f"redis-cli -p {port} shutdown nosave; {start} && {wait}"
    try:
        yield port, restart
    finally:
        deadline = time.monotonic() + 10
        while not pidfile.exists() and time.monotonic() < deadline:
            time.sleep(0.05)  # a restart still starting
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pidfile.read_text()), signal.SIGKILL)


def test_a_redis_restart_mid_step_loses_nothing_unannounced(
    server_factory: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    with daemon_redis(tmp_path) as (port, restart):
        srv = server_factory("--redis", f"redis://127.0.0.1:{port}/0")
        done = run_burnin(
            "subscribers", srv.url, tmp_path / "out", "--transport", "stream", "--workers", "1",
            "--step", "3", "--max", "9", "--step-seconds", "3", "--rate", "5", "--ceiling", "5",
            "--churn", "4", "--fault", f"2:{restart}", "--no-charts", "--max-minutes", "1.5",
        )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    _, steps, end = read_results(tmp_path / "out")
    assert end is not None and end["reason"] in ("max", "ceiling"), done.stdout + done.stderr
    faulted = [step for step in steps if step["fault"]]
    assert [step["step"] for step in faulted] == [2]
    fault = faulted[0]["fault"]
    assert fault["command"] == restart and fault["exit_status"] == 0
    assert fault["seconds"] > 0 and fault["started"] >= faulted[0]["started"]
    assert fault["recovery_seconds"] is not None and fault["recovery_seconds"] > 0
    assert faulted[0]["invalid"] is None  # failed publishes there are the fault's doing
    for step in steps:
        assert step["duplicates"] == 0
        assert step["delivered"] + step["lost"] == step["expected"]
    # whatever was lost was announced by a gap (Redis restarted empty: a new epoch)
    assert sum(step["lost"] for step in steps) <= sum(step["missed"] for step in steps)
    assert sum(step["churned"] for step in steps) > 0
    assert all(step["reconnects"] >= step["churned"] for step in steps)


def test_workers_join_a_master_from_separate_processes(
    server_factory: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    srv = server_factory()
    port = free_port()
    master = subprocess.Popen(
        burnin_command(
            "subscribers", srv.url, tmp_path, "--transport", "sse", "--workers", "0",
            "--remote-workers", "2", "--master-bind-host", "127.0.0.1", "--master-bind-port",
            str(port), "--step", "2", "--max", "4", "--step-seconds", "2", "--rate", "5",
            "--no-charts", "--max-minutes", "1",
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    join = [sys.executable, "-m", "pushserver_burnin.cli", "worker"]
    workers = [
        subprocess.Popen(
            [*join, "--master", f"127.0.0.1:{port}", "--source-ip", f"127.0.0.{n}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for n in (5, 6)
    ]
    try:
        output, _ = master.communicate(timeout=RUN_TIMEOUT)
        codes = [worker.wait(timeout=30) for worker in workers]
    finally:
        for proc in (master, *workers):
            if proc.poll() is None:
                proc.kill()
    assert master.returncode == 0, output
    assert f"Locust master on 127.0.0.1:{port}" in output
    assert f"pushserver-burnin worker --master HOST:{port}" in output
    assert codes == [0, 0]  # the master ended them
    header, steps, end = read_results(tmp_path)
    assert header["settings"]["workers"] == 2
    assert [step["subscribers"] for step in steps] == [2, 4]
    for step in steps:
        assert step["delivered"] == step["expected"] > 0
        assert step["loadgen"]["processes"] == 3  # the master and both joined workers
    assert end is not None and end["reason"] == "max"
