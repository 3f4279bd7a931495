"""The burn-in suite end to end: pushserver-burnin against a real server on loopback.

Runs are tiny (3 steps of 2, 4, 6 subscribers, 2 s each at 5 messages/s) so they check the
counting, aggregation and stopping logic, never performance.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import psutil
import pytest

from pushserver.launcher import ServerProcess

from ...redis_fixture import RedisServer, redis_server_fixture  # noqa: F401

RUN_TIMEOUT = 90
SMALL = ["--step", "2", "--step-seconds", "2", "--rate", "5", "--max", "6", "--max-minutes", "1"]
STEP_FIELDS = {
    "kind", "run_id", "test", "transport", "label", "step", "subscribers", "channels",
    "messages", "expected", "delivered", "lost", "duplicates", "latency", "probe", "server",
    "loadgen", "ceiling", "started", "ended", "reconnects",
}  # fmt: skip


def burnin_command(test: str, host: str, out: Path, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pushserver_burnin.cli",
        test,
        "--host",
        host,
        "--out",
        str(out),
        *args,
    ]


def read_results(out: Path) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any] | None]:
    lines = [orjson.loads(line) for line in (out / "results.jsonl").read_bytes().splitlines()]
    header = lines[0]
    assert header["kind"] == "run" and header["tool"] == "pushserver-burnin"
    steps = [line for line in lines if line["kind"] == "step"]
    ends = [line for line in lines if line["kind"] == "end"]
    return header, steps, ends[0] if ends else None


def run_burnin(test: str, host: str, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        burnin_command(test, host, out, *args),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )


def assert_complete(step: dict[str, Any], subscribers: int) -> None:
    assert step.keys() >= STEP_FIELDS
    assert step["subscribers"] == subscribers
    assert step["expected"] == step["messages"] * (
        subscribers if step["test"] == "subscribers" else 1
    )
    assert step["expected"] > 0
    assert step["delivered"] == step["expected"]
    assert step["lost"] == 0 and step["duplicates"] == 0
    for leg in ("publish", "fanout", "e2e"):
        summary = step["latency"][leg]
        assert summary["count"] > 0
        assert 0 <= summary["p50"] <= summary["p90"] <= summary["p99"] <= summary["worst"]
    assert step["latency"]["e2e"]["count"] == step["delivered"]
    assert step["probe"]["e2e"]["count"] > 0
    assert step["server"]["rss_bytes"] > 0
    assert step["server"]["connections"] >= subscribers
    assert step["loadgen"]["cpu_percent"] is not None


@pytest.mark.parametrize(
    ("test", "transport", "workers"),
    [("subscribers", "longpoll", "0"), ("channels", "stream", "1")],
)
def test_smoke_run_counts_every_delivery(
    server_factory: Callable[..., ServerProcess],
    tmp_path: Path,
    test: str,
    transport: str,
    workers: str,
) -> None:
    srv = server_factory()
    done = run_burnin(
        test, srv.url, tmp_path, "--transport", transport, "--workers", workers, *SMALL,
        "--no-charts",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    header, steps, end = read_results(tmp_path)
    assert (header["test"], header["transport"]) == (test, transport)
    assert [step["step"] for step in steps] == [1, 2, 3]
    for step, subscribers in zip(steps, (2, 4, 6), strict=True):
        assert_complete(step, subscribers)
        assert step["channels"] == (1 if test == "subscribers" else subscribers)
        assert step["loadgen"]["processes"] == int(workers) + 1  # + the master when distributed
        assert "cpu_us_per_delivery" in step["loadgen"]  # tiny steps may use < 1 CPU tick
    assert end is not None and end["reason"] == "max" and end["steps"] == 3
    assert "step 3: 6 subscribers" in done.stdout
    assert (
        "verdict: capacity under the 1 s ceiling: at least 6 subscribers "
        "(stopped by --max before reaching the ceiling); latency "
    ) in done.stdout
    assert done.stdout.splitlines()[-1] == f"verdict: {end['verdict']}"  # the last thing shown
    # Locust hears of each message once per report, its length the deliveries it stands for
    entries = json.loads((tmp_path / "locust_stats.json").read_text())
    deliver = next(entry for entry in entries if entry["method"] == "DELIVER")
    assert deliver["name"] == transport
    delivered = sum(step["delivered"] for step in steps)
    events = deliver["num_requests"]
    assert sum(step["publisher"]["rounds"] for step in steps) <= events <= delivered
    assert deliver["total_content_length"] == delivered


def test_ceiling_stops_the_run_after_the_first_step(
    server_factory: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    srv = server_factory()
    done = run_burnin(
        "subscribers", srv.url, tmp_path, "--transport", "sse", "--ceiling", "0.000001",
        *SMALL, "--no-charts",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    _, steps, end = read_results(tmp_path)
    assert len(steps) == 1
    assert steps[0]["latency"]["e2e"]["worst"] > 0.000001
    assert end is not None and end["reason"] == "ceiling" and end["steps"] == 1
    assert "burn-in finished (ceiling)" in done.stdout
    assert "passed the ceiling" in done.stdout
    assert (
        "verdict: capacity under the 1e-06 s ceiling: fewer than 2 subscribers "
        "(ceiling passed at step 1, 2 subscribers); latency source undecided (one step"
    ) in done.stdout


def test_max_minutes_bounds_the_run(
    server_factory: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    srv = server_factory()
    done = run_burnin(
        "subscribers", srv.url, tmp_path, "--step", "2", "--step-seconds", "2", "--rate", "5",
        "--max-minutes", "0.1", "--no-charts", "--no-probe",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    _, steps, end = read_results(tmp_path)
    assert end is not None and end["reason"] == "time"
    assert end["steps"] == len(steps) < 6  # a 2-s step cannot fit 6 times in 6 s
    assert "burn-in finished (time)" in done.stdout


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_the_run_as_interrupted(
    server_factory: Callable[..., ServerProcess], tmp_path: Path, signum: signal.Signals
) -> None:
    srv = server_factory()
    proc = subprocess.Popen(
        burnin_command("subscribers", srv.url, tmp_path, *SMALL, "--no-charts"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        results = tmp_path / "results.jsonl"
        deadline = time.monotonic() + RUN_TIMEOUT
        while not (results.exists() and b'"kind":"step"' in results.read_bytes()):
            assert time.monotonic() < deadline, "no step was written"
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            time.sleep(0.1)
        children = psutil.Process(proc.pid).children(recursive=True)
        assert children  # the Locust master, its worker and the probe
        proc.send_signal(signum)
        output, _ = proc.communicate(timeout=RUN_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, output
    _, steps, end = read_results(tmp_path)
    assert end is not None and end["reason"] == "interrupted"
    assert end["message"] == f"stopped by {signum.name}"  # the signal that came, named
    assert end["steps"] == len(steps) >= 1
    assert "burn-in finished (interrupted)" in output
    assert output.splitlines()[-1].startswith("verdict: ")
    _, alive = psutil.wait_procs(children, timeout=20)
    assert not alive  # nothing left behind


def test_distributed_run_aggregates_both_workers(
    server_factory: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    srv = server_factory()
    done = run_burnin(
        "subscribers", srv.url, tmp_path, "--transport", "ws", "--workers", "2", *SMALL,
        "--no-charts",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    header, steps, end = read_results(tmp_path)
    assert header["settings"]["workers"] == 2
    assert [step["subscribers"] for step in steps] == [2, 4, 6]
    for step, subscribers in zip(steps, (2, 4, 6), strict=True):
        assert_complete(step, subscribers)
        assert step["loadgen"]["processes"] == 3  # the master and both workers reported
    assert end is not None and end["reason"] == "max"


class CuttingProxy:
    """Loopback proxy that cuts subscriber connections mid-message.

    Every connection whose request is `GET {prefix}...` is cut in the middle of the server's
    `cut_at`-th burn-in message (counted by its `"seq"` field), reconnections included, so each
    subscriber drops several times a step and must resume from its cursor. Publishing and admin
    requests pass untouched.
    """

    def __init__(self, upstream_port: int, prefix: bytes, cut_at: int) -> None:
        self.upstream_port = upstream_port
        self.prefix = prefix
        self.cut_at = cut_at
        self.cuts = 0
        self.server: asyncio.Server | None = None
        self.pumps: set[asyncio.Task[None]] = set()

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def close(self) -> None:
        assert self.server is not None
        self.server.close()
        for pump in self.pumps:
            pump.cancel()
        await asyncio.gather(*self.pumps, return_exceptions=True)

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        up_r, up_w = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        first = await client_r.read(65536)
        up_w.write(first)
        cut = first.startswith(b"GET " + self.prefix)
        pumps = {
            asyncio.create_task(self._pump(client_r, up_w, cut=False)),
            asyncio.create_task(self._pump(up_r, client_w, cut=cut)),
        }
        self.pumps |= pumps
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump in pumps:
                pump.cancel()
            self.pumps -= pumps
            for writer in (client_w, up_w):
                writer.close()

    async def _pump(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, cut: bool) -> None:
        with contextlib.suppress(ConnectionError):
            await self._forward(src, dst, cut)

    async def _forward(
        self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, cut: bool
    ) -> None:
        seen = 0
        while data := await src.read(65536):
            if cut:
                at = -1
                for _ in range(self.cut_at - seen):
                    at = data.find(b'"seq"', at + 1)
                    if at < 0:
                        break
                    seen += 1
                if seen >= self.cut_at:
                    dst.write(data[:at])  # up to the middle of that message
                    await dst.drain()
                    self.cuts += 1
                    return
            dst.write(data)
            await dst.drain()


@pytest.mark.parametrize(("transport", "prefix"), [("stream", b"/stream/"), ("longpoll", b"/lp/")])
async def test_dropped_subscribers_are_counted_and_recovered(
    server_factory: Callable[..., ServerProcess], tmp_path: Path, transport: str, prefix: bytes
) -> None:
    srv = server_factory()
    proxy = CuttingProxy(srv.port, prefix, cut_at=3)
    url = await proxy.start()
    proc = await asyncio.create_subprocess_exec(
        *burnin_command("subscribers", url, tmp_path, "--transport", transport, *SMALL,
                        "--no-charts", "--no-probe"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    try:
        output, _ = await asyncio.wait_for(proc.communicate(), RUN_TIMEOUT)
    finally:
        await proxy.close()
    assert proc.returncode == 0, output.decode()
    assert proxy.cuts > 0
    _, steps, end = read_results(tmp_path)
    assert end is not None
    assert steps
    for step in steps:
        assert step["delivered"] + step["lost"] == step["expected"]
        assert step["duplicates"] == 0
    assert sum(step["reconnects"] for step in steps) > 0
    # the history (100 messages) covers every cut: the cursor recovers all of it
    assert all(step["lost"] == 0 for step in steps)


def test_charts_are_built_at_the_end(
    server_factory: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    srv = server_factory()
    done = run_burnin(
        "channels", srv.url, tmp_path, "--transport", "sse", "--step", "2", "--max", "2",
        "--step-seconds", "2", "--rate", "5",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    reports = list(tmp_path.glob("*.html"))
    assert reports, done.stdout
    assert f"report: {reports[0]}" in done.stdout
    typed = f"pushserver-burnin channels --host {srv.url} --out {tmp_path} --transport sse"
    header, _, _ = read_results(tmp_path)
    assert header["command"].startswith(typed)  # as typed, for the report
    assert typed in reports[0].read_text()


def test_dead_server_fails_at_once_with_one_line(tmp_path: Path) -> None:
    from pushserver_measure.ports import free_port

    host = f"http://127.0.0.1:{free_port()}"
    done = run_burnin("subscribers", host, tmp_path, "--no-charts")
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and f"cannot reach the server at {host}" in lines[0]
    _, steps, end = read_results(tmp_path)
    assert [step["step"] for step in steps] == [1]
    assert "cannot reach the server" in steps[0]["invalid"]
    assert end is not None and end["reason"] == "invalid"


def test_failing_publisher_makes_the_step_invalid(
    server_factory: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    srv = server_factory("--publish-key", "right")
    done = run_burnin(
        "subscribers", srv.url, tmp_path, "--publish-key", "wrong", *SMALL, "--no-charts",
    )  # fmt: skip
    assert done.returncode == 1
    assert "answered 401" in done.stderr.splitlines()[-1]
    _, steps, end = read_results(tmp_path)
    assert steps[0]["invalid"] and end is not None and end["reason"] == "invalid"


def test_repeats_measure_each_count_several_times(
    server_factory: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    srv = server_factory()
    done = run_burnin(
        "subscribers", srv.url, tmp_path, "--transport", "stream", "--step", "2", "--max", "4",
        "--repeats", "2", "--step-seconds", "1", "--rate", "5", "--no-charts", "--no-probe",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    _, steps, end = read_results(tmp_path)
    assert [(s["step"], s["subscribers"], s["repeat"]) for s in steps] == [
        (1, 2, 1), (2, 2, 2), (3, 4, 1), (4, 4, 2),
    ]  # fmt: skip
    assert end is not None and "at least 4 subscribers" in end["verdict"]


def test_subscribers_that_never_connect_make_the_step_invalid(
    server_factory: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    srv = server_factory("--max-connections", "1")  # the second subscriber is refused (503)
    done = run_burnin(
        "subscribers", srv.url, tmp_path, "--transport", "stream", *SMALL, "--no-charts",
        "--no-probe",
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "only 1 of 2 subscribers connected" in done.stderr.splitlines()[-1]
    _, steps, end = read_results(tmp_path)
    assert len(steps) == 1 and steps[0]["subscribers"] == 1 and steps[0]["target"] == 2
    assert end is not None and end["reason"] == "invalid"
    assert end["verdict"].startswith("no capacity under the 1 s ceiling: step 1 is invalid")


def test_readiness_feeds_bytes_then_raises_what_ended_the_connection() -> None:
    import socket

    from pushserver_burnin import readiness
    from pushserver_measure.http11 import BodyLines, ConnectionClosed

    ours, theirs = socket.socketpair()
    lines = BodyLines(chunked=True)
    got: list[bytes] = []
    theirs.sendall(b'6\r\n{"a":1\r\n3\r\n}\n\n\r\n')  # a line cut across two chunks
    theirs.close()
    with pytest.raises(ConnectionClosed, match="closed by the server"):
        readiness.serve(ours, lambda data, _: got.extend(lines.feed(data)), idle_timeout=30)
    assert got == [b'{"a":1}', b""]
    ours.close()

    ours, theirs = socket.socketpair()  # silent past the idle timeout: dropped
    with pytest.raises(ConnectionClosed, match="nothing received"):
        readiness.serve(ours, lambda data, _: None, idle_timeout=0.1)
    ours.close()
    theirs.close()


@pytest.mark.parametrize("stamped", [True, False])
def test_readiness_times_bytes_when_they_arrived_or_when_read(stamped: bool) -> None:
    """The kernel stamps a segment before it is queued for reading: a stamped read is timed
    no later than the moment its bytes were seen waiting, however late it is read; an unstamped
    one at the read."""
    import select
    import socket

    from pushserver_burnin import readiness
    from pushserver_measure import timestamps
    from pushserver_measure.http11 import ConnectionClosed

    timestamps.switch_on(time.sleep)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        theirs = socket.create_connection(listener.getsockname())
        ours, _ = listener.accept()
    if stamped:
        timestamps.enable(ours)
    theirs.sendall(b"one")
    theirs.close()
    assert select.select([ours], [], [], 10)[0], "the bytes never arrived"
    waiting = time.time()
    came: list[tuple[bytes, float]] = []
    with pytest.raises(ConnectionClosed, match="closed by the server"):
        readiness.serve(ours, lambda data, at: came.append((data, at)), 30, stamped=stamped)
    ours.close()
    [(data, at)] = came
    assert data == b"one"
    assert at <= waiting if stamped else at >= waiting


@pytest.mark.parametrize(
    ("test", "transport"),
    [("subscribers", "stream"), ("subscribers", "longpoll"), ("channels", "stream")],
)
def test_scale_out_run_against_server_workers_sharing_redis(
    redis_server: RedisServer,
    server_factory: Callable[..., ServerProcess],
    tmp_path: Path,
    test: str,
    transport: str,
) -> None:
    """Every delivery arrives once, and the server's figures are both workers' together: each
    worker's /stats read on its own, memory and channels summed (one worker's RSS over all
    channels read half the memory per channel)."""
    srv = server_factory("--workers", "2", "--redis", redis_server.url)
    done = run_burnin(
        test, srv.url, tmp_path, "--transport", transport, "--workers", "2", *SMALL,
        "--no-charts",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    header, steps, end = read_results(tmp_path)
    workers = set(psutil.Process(srv.proc.pid).children())
    assert len(workers) == 2 and header["server_idle"]["workers"] == 2
    # the baseline is read before any subscriber connects
    assert header["server_idle"]["channels"] == header["server_idle"]["connections"] == 0
    assert [step["subscribers"] for step in steps] == [2, 4, 6]
    for step in steps:
        assert step["delivered"] == step["expected"] > 0
        assert step["duplicates"] == 0 and step["invalid"] is None
        assert step["loadgen"]["processes"] == 3  # the master and both Locust workers
        server = step["server"]
        assert {row["pid"] for row in server["per_worker"]} == {w.pid for w in workers}
        assert server["workers"] == 2
        assert server["rss_bytes"] == sum(row["rss_bytes"] for row in server["per_worker"])
        assert server["cpu_percent"] == max(row["cpu_percent"] for row in server["per_worker"])
        assert server["channels"] == sum(row["channels"] for row in server["per_worker"])
        if test == "channels":  # each channel (and the probe's) held where its subscriber is,
            # and for a while also where its cursor was asked for
            assert server["channels"] >= step["subscribers"] + 1
        assert step["side"].startswith("latency set by")
    assert "server 2 workers: busiest cpu" in done.stdout
    assert end is not None and end["reason"] == "max"


def test_each_step_records_the_load_generators_cpu_per_delivery(
    server_factory: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    """Enough deliveries (300 subscribers x 40 messages) for the process CPU clock to tick."""
    srv = server_factory()
    done = run_burnin(
        "subscribers", srv.url, tmp_path, "--transport", "stream", "--step", "300",
        "--max", "300", "--step-seconds", "4", "--rate", "10", "--no-charts", "--no-probe",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    _, (step,), _ = read_results(tmp_path)
    assert step["delivered"] == step["expected"] == 300 * step["messages"]
    cost = step["loadgen"]["cpu_us_per_delivery"]
    assert 0 < cost < 10_000  # µs of Locust-process CPU per delivery
    assert cost == pytest.approx(step["loadgen"]["cpu_seconds"] / step["delivered"] * 1e6)
    assert f"{cost:.0f} us CPU per delivery" in done.stdout
