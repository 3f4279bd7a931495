"""Experiment 9 of `pushserver-bench`, quick, against a pushserver and against a real
nginx+nchan configured with exactly the `nchan.conf` of docs/performance.md, both started by the
test; and against a URL where nothing listens."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

from pushserver.launcher import ServerProcess
from pushserver_measure.ports import free_port

from ...nchan_fixture import Nginx, nchan_fixture  # noqa: F401
from ...redis_fixture import RedisServer, redis_server_fixture  # noqa: F401
from .test_bench import BENCH, run_bench


def quick_tables(tmp_path: Path, *args: str) -> list[dict]:
    out = tmp_path / "bench.json"
    proc = run_bench("--only", "9", "--quick", "--json", str(out), *args, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["lost"] == 0
    return result["tables"]


def check_figures(tables: list[dict]) -> None:
    """Every delivery arrived, every row is valid and every figure is there and positive, for
    both measuring clients side by side."""
    loads, light = tables
    for table in tables:
        assert table["lost"] == 0 and table["errors"] == [], table
    columns = loads["columns"]
    assert [tuple(r[:3]) for r in loads["rows"]] == [
        ("longpoll", "tuned", 200),
        ("longpoll", "plain", 200),
        ("sse", "tuned", 200),
        ("sse", "plain", 200),
    ]
    for row in loads["rows"]:
        figures = dict(zip(columns, row, strict=True))
        assert figures["verdict"] == "valid" and figures["lost"] == 0, figures
        assert figures["waited on client"] == 0, figures
        assert figures["late re-polls"] >= 0, figures
        for name in columns[3:11]:  # messages to client busy %
            if name == "server kernel %":  # 10 ms ticks: a quick step may see none
                assert math.isnan(figures[name]) or 0 <= figures[name] <= 100, figures
            elif name == "server waited %":  # a server that always had a core waited 0
                assert figures[name] >= 0, figures
            else:
                assert figures[name] > 0, (name, figures)
        # A quick step's read windows are too short to judge how busy the client was.
        runnable = figures["client runnable %"]
        assert runnable == "n/a" or runnable > 0, figures
    # Later steps hold no more than the first: their memory is the first's, reused.
    rss = [r[columns.index("RSS KB/subscriber")] for r in loads["rows"]]
    assert rss[0] > 0 and rss[1:] == ["n/a"] * 3, rss
    columns = light["columns"]
    rows = {tuple(r[:3]): dict(zip(columns, r, strict=True)) for r in light["rows"]}
    assert list(rows) == [
        ("1→1 latency", "longpoll", "tuned"),
        ("1→1 latency", "longpoll", "plain"),
        ("1→1 latency", "sse", "tuned"),
        ("1→1 latency", "sse", "plain"),
        ("publish, no subscriber", "", ""),
        ("fan-out, 8 publishers", "sse", "tuned"),
    ]
    for (measurement, _, _), figures in rows.items():
        assert figures["verdict"] == "valid" and figures["lost"] == 0, figures
        assert figures["server µs each"] > 0 and figures["client µs each"] > 0, figures
        if measurement == "1→1 latency":
            assert figures["p50 ms"] > 0, figures
    assert rows[("fan-out, 8 publishers", "sse", "tuned")]["deliveries/s"] > 0


def test_quick_against_a_pushserver(tmp_path: Path) -> None:
    with ServerProcess() as server:
        tables = quick_tables(tmp_path, "--url", server.url)
    check_figures(tables)
    for table in tables:
        [said] = table["servers"]
        assert said["interpreter"]["executable"] == os.path.realpath(sys.executable)


def test_client_processes_kept_to_cpus(tmp_path: Path) -> None:
    # Every CPU this process may use: on a 2-core machine the fan-out's client kept to one is
    # rightly judged client-bound (tests/e2e/tools/test_bench_pool.py keeps processes to one CPU).
    cpus = ",".join(map(str, sorted(os.sched_getaffinity(0))))
    out = tmp_path / "bench.json"
    with ServerProcess() as server:
        args = ("--only", "9", "--quick", "--url", server.url, "--client-cpus", cpus)
        proc = run_bench(*args, "--json", str(out), timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    check_figures(result["tables"])
    assert result["machine"].endswith(f"; client processes on CPUs {cpus}"), result["machine"]
    assert f"; client processes on CPUs {cpus}\n" in proc.stdout


def test_a_server_sharing_its_core_with_the_bench_is_not_measured(tmp_path: Path) -> None:
    # Server and bench kept to one CPU: the server finds each request waiting instead of
    # sleeping for it, and the 1→1 and publish rows say that they are not its own cost.
    # Full sizes: --quick does not judge them (a smoke run is often beside other work).
    cpu = min(os.sched_getaffinity(0))
    out = tmp_path / "bench.json"
    with ServerProcess() as server:
        assert server.proc is not None
        os.sched_setaffinity(server.proc.pid, {cpu})
        args = ("--only", "9", "--url", server.url, "--json", str(out))
        proc = subprocess.run(
            [
                *BENCH,
                *args,
                "--transports",
                "longpoll",
                "--subscribers",
                "200",
                "--client",
                "tuned",
            ],
            capture_output=True,
            text=True,
            timeout=240,
            preexec_fn=lambda: os.sched_setaffinity(0, {cpu}),
        )
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    light = json.loads(out.read_text())["tables"][1]
    at = light["columns"].index("verdict")
    verdicts = {tuple(r[:3]): r[at] for r in light["rows"]}
    for row in (("1→1 latency", "longpoll", "tuned"), ("publish, no subscriber", "", "")):
        assert verdicts[row].startswith("INVALID: shared a core: the server was preempted"), row
    assert any("shared a core" in e for e in light["errors"]), light["errors"]


def test_client_cpus_not_usable_are_refused() -> None:
    beyond = max(os.sched_getaffinity(0)) + 1
    proc = run_bench("--only", "9", "--client-cpus", str(beyond), "--url", "http://127.0.0.1:1")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"--client-cpus: CPU {beyond} is not one this process may use" in proc.stderr


def test_quick_against_pushserver_workers(tmp_path: Path, redis_server: RedisServer) -> None:
    # Each worker counts its own subscribers of a channel: the bench sums every worker's.
    with ServerProcess(["--workers", "2", "--redis", redis_server.url]) as server:
        check_figures(quick_tables(tmp_path, "--url", server.url))


def test_quick_against_nginx_nchan(tmp_path: Path, nchan: Nginx) -> None:
    tables = quick_tables(tmp_path, "--target", "nchan", "--url", f"http://127.0.0.1:{nchan.port}")
    assert "nchan" in tables[0]["title"]
    assert [t["servers"] for t in tables] == [[], []]  # nginx says nothing of itself
    check_figures(tables)


def test_an_unreachable_target_fails_the_run() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    proc = run_bench("--only", "9", "--quick", "--target", "nchan", "--url", url, timeout=60)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"target unreachable at 127.0.0.1:{url.rsplit(':', 1)[1]}" in proc.stdout


def test_nchan_goes_only_with_experiments_9_to_11() -> None:
    proc = run_bench("--only", "1", "--target", "nchan", "--url", "http://127.0.0.1:1")
    assert proc.returncode == 2 and "--target nchan goes with --only 9, 10 or 11" in proc.stderr
