"""Experiment 10 of `pushserver-bench`: a crowd of long-polls timing out together while a 1→1
long-poll runs, quick, against a pushserver it starts, against nginx+nchan with the documented
configuration and against a URL where nothing listens; and the rule that makes its row invalid
when the crowd did not time out."""

from __future__ import annotations

import json
from pathlib import Path

from pushserver_bench.timeouts import HOLD, ROUNDS, too_few
from pushserver_measure.ports import free_port

from ...nchan_fixture import Nginx, nchan_fixture  # noqa: F401
from .test_bench import run_bench


def crowd_row(tmp_path: Path, *args: str) -> list:
    """The one row of a quick experiment 10, which must have seen the crowd time out twice."""
    out = tmp_path / "bench.json"
    proc = run_bench("--only", "10", "--quick", "--json", str(out), *args, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (table,) = json.loads(out.read_text())["tables"]
    assert table["experiment"] == 10 and not table["errors"]
    (row,) = table["rows"]
    subscribers, hold, timeouts, messages, p50, p99, worst, busy, verdict, lost = row
    assert (subscribers, hold, verdict, lost) == (200, HOLD, "valid", 0)
    assert timeouts >= ROUNDS * subscribers
    assert messages > 0 and 0 < p50 <= p99 <= worst and 0 < busy < 100
    return table


def test_quick_run_sees_the_crowd_time_out_and_times_the_1_to_1(tmp_path: Path) -> None:
    assert "pushserver" in crowd_row(tmp_path)["title"]


def test_quick_run_against_nginx_nchan(tmp_path: Path, nchan: Nginx) -> None:
    # The documented configuration's /sub-timeout/ answers the crowd 408 after 5 s.
    table = crowd_row(tmp_path, "--target", "nchan", "--url", f"http://127.0.0.1:{nchan.port}")
    assert f"127.0.0.1:{nchan.port}/sub-timeout/" in table["notes"][0]


def test_an_unreachable_server_fails_the_run() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    proc = run_bench("--only", "10", "--quick", "--url", url, timeout=60)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"target unreachable at 127.0.0.1:{url.rsplit(':', 1)[1]}" in proc.stdout


def test_a_crowd_that_did_not_time_out_twice_makes_no_row() -> None:
    assert too_few(ROUNDS * 200, 200) == ""
    assert too_few(ROUNDS * 200 + 5, 200) == ""
    assert "fewer than 2 per subscriber" in too_few(ROUNDS * 200 - 1, 200)
    assert "timed out 0 times" in too_few(0, 200)
