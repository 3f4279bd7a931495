"""Experiment 11 of `pushserver-bench` (bytes on the wire per delivered message) against a
pushserver and a real nginx+nchan, and experiment 9 with subscribers that ask for gzip."""

from __future__ import annotations

import json
from pathlib import Path

from pushserver.launcher import ServerProcess

from ...nchan_fixture import Nginx, nchan_fixture  # noqa: F401
from .test_bench import run_bench
from .test_bench_nchan import check_figures, quick_tables


def tables(tmp_path: Path, *args: str) -> list[dict]:
    out = tmp_path / "bench.json"
    proc = run_bench("--only", "11", "--json", str(out), *args, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text())["tables"]


def test_compression_takes_bytes_off_every_transport(tmp_path: Path) -> None:
    with ServerProcess() as server:
        (table,) = tables(tmp_path, "--url", server.url)
    assert table["lost"] == 0 and table["errors"] == []
    rows = {(r[0], r[1]): dict(zip(table["columns"], r, strict=True)) for r in table["rows"]}
    assert list(rows) == [
        *((t, "identity") for t in ("stream", "sse", "sse compact", "ws")),
        ("stream", "gzip"),
        ("sse", "gzip"),
        ("sse compact", "gzip"),
        ("ws", "permessage-deflate"),
        ("long-poll, backlog of 20", "identity"),
        ("long-poll, backlog of 20", "gzip"),
    ]
    for (_, coding), row in rows.items():
        assert row["bytes per message"] > 0, row
        if coding != "identity":  # the figures are bytes, the same on any machine
            assert row["of identity %"] < 50, row


def test_nchan_sse_as_it_is(tmp_path: Path, nchan: Nginx) -> None:
    (table,) = tables(tmp_path, "--target", "nchan", "--url", f"http://127.0.0.1:{nchan.port}")
    assert table["lost"] == 0 and table["errors"] == []
    assert [r[:3] for r in table["rows"]] == [["sse", "identity", 200]]
    assert 100 < table["rows"][0][3] < 200  # a 100-byte payload and its SSE lines


def test_experiment_9_with_subscribers_that_ask_for_gzip(tmp_path: Path) -> None:
    with ServerProcess() as server:
        check_figures(quick_tables(tmp_path, "--url", server.url, "--compressed"))


def test_compressed_goes_only_with_experiment_9() -> None:
    proc = run_bench("--only", "11", "--compressed")
    assert proc.returncode == 2 and "--compressed goes with --only 9" in proc.stderr
