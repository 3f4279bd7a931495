"""pushserver-burnin and pushserver-bench as a new user meets them: every bad input is one line
naming the setting, exit 2, no traceback, no usage block, and nothing started."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from pushserver.launcher import ServerProcess
from pushserver_measure.ports import free_port

CLOSED = f"http://127.0.0.1:{free_port()}"


def tool(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def assert_refused(done: subprocess.CompletedProcess[str], prog: str, *words: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""
    assert "Traceback" not in done.stderr and "usage:" not in done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(f"{prog}: ")
    for word in words:
        assert word in line, line


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--host", "ftp://127.0.0.1:8080"], ["--host must be an http:// URL"]),
        (["--host", "https://127.0.0.1:8080"], ["--host must be an http:// URL"]),
        (["--host", "http://127.0.0.1:99999"], ["--host: port out of range"]),
        (["--out", "/proc/nope"], ["--out: cannot create the directory '/proc/nope'"]),
        (["--max", "-5"], ["--max must be positive, got -5"]),
        (["--workers", "-1"], ["--workers must be 0 or more, got -1"]),
        (["--source-ip", "banana"], ["--source-ip must be an IP address of this machine"]),
        (["--source-ip", "192.0.2.1"], ["--source-ip: cannot listen on 192.0.2.1"]),
        (["--max-minutes", "0"], ["--max-minutes must be positive, got 0"]),
        (["--step-seconds", "-1"], ["--step-seconds must be positive"]),
        (["--rate", "0"], ["--rate must be positive"]),
        (["--spawn-rate", "0"], ["--spawn-rate must be positive"]),
        (["--repeats", "0"], ["--repeats must be at least 1"]),
        (["--factor", "0.5"], ["--factor must be above 1"]),
        (["--churn", "-2"], ["--churn must be 0 or more"]),
        (["--fault", "banana"], ["--fault must be STEP:COMMAND"]),
        (["--fault", "9:true", "--max", "200"], ["--fault 9:true: the run has only 2 steps"]),
        (["--master-bind-port", "70000"], ["--master-bind-port must be 0..65535"]),
        (["--master-bind-host", "banana"], ["--master-bind-host must be an IP address"]),
        (["--transport", "pigeon"], ["--transport must be one of longpoll"]),
        (["--step", "abc"], ["--step", "invalid int value"]),
        (["--bogus"], ["unrecognized arguments: --bogus"]),
    ],
)
def test_burnin_refuses_each_bad_input_in_one_line(
    tmp_path: Path, args: list[str], words: list[str]
) -> None:
    base = ["subscribers", "--host", CLOSED, "--out", str(tmp_path / "out"), "--no-charts"]
    done = tool("pushserver_burnin.cli", *base, *args)
    assert_refused(done, "pushserver-burnin", *words)
    assert not (tmp_path / "out" / "results.jsonl").exists()  # nothing was started


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--master", "nowhere"], ["--master must be HOST:PORT"]),
        (["--master", "127.0.0.1:99999"], ["--master must be HOST:PORT"]),
        (["--master", "127.0.0.1:5557", "--source-ip", "banana"], ["--source-ip must be"]),
    ],
)
def test_burnin_worker_refuses_each_bad_input_in_one_line(
    args: list[str], words: list[str]
) -> None:
    assert_refused(
        tool("pushserver_burnin.cli", "worker", *args), "pushserver-burnin worker", *words
    )


def test_a_run_that_finishes_no_step_says_why_and_exits_1(
    server_factory: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    srv = server_factory()
    done = tool(
        "pushserver_burnin.cli", "subscribers", "--host", srv.url, "--out", str(tmp_path),
        "--workers", "0", "--step-seconds", "30", "--max-minutes", "0.05", "--no-probe",
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "pushserver-burnin: no step finished (time: stopped after --max-minutes 0.05)" in (
        done.stderr
    )
    assert not list(tmp_path.glob("*.html"))  # no empty charts


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--url", "notaurl"], ["--url must be an http:// URL, got 'notaurl'"]),
        (["--url", "127.0.0.1:8080"], ["--url must be an http:// URL"]),
        (["--pub-url", "https://127.0.0.1:1/pub/"], ["--pub-url must be an http:// URL"]),
        (["--url", "http://127.0.0.1:99999"], ["--url: port out of range"]),
        (["--url", "ftp://127.0.0.1:21"], ["--url must be an http:// URL"]),
        (["--json", "/proc/nope/x.json"], ["--json: no directory '/proc/nope'"]),
        (["--redis", "notaurl"], ["--redis: pushserver --check: --redis must be a redis://"]),
        (["--redis", f"redis://127.0.0.1:{free_port()}/0"], ["--redis", "cannot reach Redis"]),
        (["--server-arg=--bogus"], ["--server-arg: pushserver --check: unrecognized", "--bogus"]),
        (["--subscribers", "-5", "--only", "9"], ["--subscribers must be positive, got -5"]),
        (["--processes", "0"], ["--processes must be at least 1"]),
        (["--only", "42"], ["--only takes numbers from 1 to"]),
        (["--target", "pigeon"], ["--target", "invalid choice"]),
    ],
)
def test_bench_refuses_each_bad_input_in_one_line(args: list[str], words: list[str]) -> None:
    assert_refused(tool("pushserver_bench", "--quick", *args), "pushserver-bench", *words)


def test_burnin_refuses_a_master_port_already_taken(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = tool(
            "pushserver_burnin.cli", "subscribers", "--host", CLOSED, "--out", str(tmp_path),
            "--master-bind-port", str(port),
        )  # fmt: skip
    assert_refused(
        done, "pushserver-burnin", f"--master-bind-port: cannot listen on 127.0.0.1 port {port}"
    )


@pytest.mark.parametrize("only", ["1", "9"])
def test_bench_fails_in_one_line_when_nothing_listens_at_the_url(only: str) -> None:
    """A run that cannot reach what it measures fails (exit 1): before any experiment, or in
    experiment 9's own table."""
    port = CLOSED.rsplit(":", 1)[1]
    done = tool("pushserver_bench", "--quick", "--only", only, "--url", CLOSED)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert f"target unreachable at 127.0.0.1:{port}" in done.stdout + done.stderr
    if only == "1":
        assert done.stderr.splitlines() == [
            f"pushserver-bench: --url: target unreachable at 127.0.0.1:{port}: Connection refused"
        ]
