"""`pushserver-bench`: every experiment runs at tiny sizes, prints its tables, loses nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pushserver.monitor.interpreter import summary
from pushserver_bench.said import server_line
from tests.pythons import OnPython, stats, system_python

BENCH = [sys.executable, "-m", "pushserver_bench"]


def run_bench(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*BENCH, *args], capture_output=True, text=True, timeout=timeout)


def test_quick_run_prints_every_table_and_loses_nothing(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = run_bench("--quick", "--json", str(out))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["lost"] == 0
    tables = result["tables"]
    assert sorted({t["experiment"] for t in tables}) == [1, 2, 3, 4, 5, 6, 7, 8]
    for table in tables:
        assert table["lost"] == 0 and table["errors"] == [], table
        assert table["rows"], table["title"]
        assert all(len(row) == len(table["columns"]) for row in table["rows"]), table
        header = f"Experiment {table['experiment']}: {table['title']}"
        assert header in proc.stdout
        assert " ".join(table["columns"]) in " ".join(proc.stdout.split())
    assert proc.stdout.count("machine: ") == len(tables)
    assert proc.stdout.count("\nlost=0\n") == len(tables)
    # The bench and the servers it starts run on this Python, and each table says so.
    python = os.path.realpath(sys.executable)
    assert result["bench"]["interpreter"]["executable"] == python
    assert proc.stdout.count(f"bench: {summary(result['bench']['interpreter'])}\n") == len(tables)
    for table in tables:
        assert table["servers"], table["title"]
        for said in table["servers"]:
            assert said["interpreter"] == result["bench"]["interpreter"]
            assert f"server: {server_line(said)}\n" in proc.stdout

    by_title = {t["title"]: t for t in tables}
    latency = by_title["latency 1→1 (publish with send time → receipt)"]
    assert [row[0] for row in latency["rows"]] == ["stream", "sse", "ws", "longpoll"]
    broadcast = by_title["broadcast: 1 broadcaster, 10 listeners"]
    for transport, listeners_on, broadcasts, *_, received, lost in broadcast["rows"]:
        expected = broadcasts * 10 if listeners_on == "its channel" else 0
        assert (received, lost) == (expected, 0), (transport, listeners_on)
    throughput = by_title["publishers x subscribers: throughput"]
    assert len(throughput["rows"]) == 4 * 4 * 2
    budgets = by_title["fast path budgets"]
    assert {row[3] for row in budgets["rows"]} - {""} == {"n/a (quick)"}
    assert "cannot meet them" in proc.stdout and " NO " not in proc.stdout
    scaleout = by_title["Redis scale-out"]
    servers = ["memory broker, 1 process", "Redis broker, 1 process", "Redis broker, --workers 2"]
    assert [row[:2] for row in scaleout["rows"]] == [
        ["latency 1→1", "memory broker, one node"],
        ["latency 1→1", "Redis, same node"],
        ["latency 1→1", "Redis, node A → node B"],
        ["latency 1→1", "Redis, --workers 2"],
        *(["stream fan-out", server] for server in servers),
        *(["per-request fan-out", server] for server in servers),
    ]


def test_url_mode_measures_a_running_server(tmp_path: Path) -> None:
    """On the system's Python when it is another one: each table names the server's Python
    and the bench's apart."""
    out = tmp_path / "bench.json"
    with OnPython(system_python() or os.path.realpath(sys.executable)) as srv:
        said = stats(srv)
        proc = run_bench("--quick", "--only", "1,6", "--url", srv.url, "--json", str(out))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    tables = result["tables"]
    assert said["interpreter"]["executable"] == srv.python
    server = {key: said[key] for key in ("interpreter", "allocator", "compiled")}
    assert server_line(server).endswith(f", {'compiled' if said['compiled'] else 'interpreted'}")
    # experiment 6 measures nothing at a URL (it varies the server's settings): no server line
    assert [t["servers"] for t in tables] == [[server], []]
    assert proc.stdout.count(f"server: {server_line(server)}\n") == 1
    assert result["bench"]["interpreter"]["executable"] == os.path.realpath(sys.executable)
    assert [t["experiment"] for t in tables] == [1, 6]
    assert all(row[1] == 20 for row in tables[0]["rows"])
    assert tables[1]["rows"][0][1].startswith("n/a")


def test_unknown_experiment_is_refused() -> None:
    proc = run_bench("--only", "99")
    assert proc.returncode == 2
    assert "--only" in proc.stderr
