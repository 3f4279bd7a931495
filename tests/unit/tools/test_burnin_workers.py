"""The whole server's figures in a step (pushserver_burnin.resources, .workers, .controller):
with `--workers N`, memory, channels and connections are all workers' together, CPU is read
per worker from its own clock, and a step's own reading names the side that set its latency."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pushserver_burnin.cli import parse_args
from pushserver_burnin.controller import Controller, idle_figures
from pushserver_burnin.progress import progress_line
from pushserver_burnin.resources import Clock, Snapshot, server_figures
from pushserver_burnin.settings import build
from pushserver_burnin.tally import StepBook
from pushserver_burnin.workers import SETTLED, done
from pushserver_measure.verdict import Point, step_side

MIB = 1024**2


def stats(pid: int, worker: int, cpu_seconds: float, rss_mib: int, channels: int) -> dict[str, Any]:
    return {
        "pid": pid,
        "worker": worker,
        "cpu_seconds": cpu_seconds,
        "cpu_percent": 99.0,  # the sampler's last interval: not what a step reads
        "rss_bytes": rss_mib * MIB,
        "channels": channels,
        "history_bytes": channels * 100,
        "connections": {"stream": channels, "total": channels + 1},
        "messages_in": 0,
        "uptime": 5.0 + worker,
        "history_size": 10,
    }


def snapshot(
    at: float, *workers: dict[str, Any], waits: dict[int, float] | None = None
) -> Snapshot:
    clocks = {pid: Clock(None, wait, at) for pid, wait in (waits or {}).items()}
    return Snapshot(at, {s["pid"]: s for s in workers}, clocks, {})


def test_memory_channels_and_connections_are_all_workers_together() -> None:
    first = snapshot(100.0, stats(11, 0, 1.0, 50, 0), stats(12, 1, 2.0, 50, 0))
    last = snapshot(110.0, stats(12, 1, 4.0, 90, 10_000), stats(11, 0, 6.0, 80, 9_000))
    figures = server_figures(first, last)
    assert figures["workers"] == 2
    assert figures["rss_bytes"] == 170 * MIB  # not one worker's 80 or 90 MiB
    assert figures["channels"] == 19_000
    assert figures["connections"] == 19_002
    assert figures["history_bytes"] == 1_900_000
    assert [row["pid"] for row in figures["per_worker"]] == [11, 12]


def test_each_workers_cpu_is_its_own_clock_paired_by_pid() -> None:
    # worker 11 used 5 s and worker 12 2 s of CPU in 10 s, whichever answered first
    first = snapshot(100.0, stats(12, 1, 2.0, 50, 0), stats(11, 0, 1.0, 50, 0), waits={11: 1.0})
    last = snapshot(110.0, stats(11, 0, 6.0, 80, 10), stats(12, 1, 4.0, 90, 10), waits={11: 3.0})
    figures = server_figures(first, last)
    by_pid = {row["pid"]: row for row in figures["per_worker"]}
    assert by_pid[11]["cpu_percent"] == pytest.approx(50.0)
    assert by_pid[12]["cpu_percent"] == pytest.approx(20.0)
    assert by_pid[11]["cpu_wait_percent"] == pytest.approx(20.0)
    assert by_pid[12]["cpu_wait_percent"] is None
    assert figures["cpu_percent"] == pytest.approx(50.0)  # the busiest worker, of one core
    assert figures["cpu_percent_total"] == pytest.approx(70.0)


def test_a_worker_missing_at_the_start_has_no_cpu_figure() -> None:
    first = snapshot(100.0, stats(11, 0, 1.0, 50, 0))
    last = snapshot(110.0, stats(11, 0, 2.0, 60, 5), stats(13, 2, 30.0, 70, 5))
    figures = server_figures(first, last)
    assert figures["workers"] == 2 and figures["rss_bytes"] == 130 * MIB
    assert figures["cpu_percent_total"] == pytest.approx(10.0)  # not 13's 30 s since it began


def test_the_baseline_is_all_workers_before_the_run() -> None:
    idle = idle_figures({11: stats(11, 0, 0.5, 45, 0), 12: stats(12, 1, 0.5, 47, 0)})
    assert idle["rss_bytes"] == 92 * MIB
    assert idle["channels"] == 0 and idle["messages_in"] == 0
    assert idle["connections"] == 2
    assert idle["workers"] == 2 and idle["uptime"] == 6.0 and idle["history_size"] == 10


def test_a_reading_ends_once_every_listening_worker_answered() -> None:
    answers = {11: {}, 12: {}}
    assert not done(answers, frozenset({11, 12, 13}), repeats=50)
    assert done(answers | {13: {}}, frozenset({11, 12, 13}), repeats=0)


def test_workers_that_cannot_be_counted_are_read_until_answers_repeat() -> None:
    assert not done({}, frozenset(), repeats=SETTLED)
    assert not done({11: {}}, frozenset(), repeats=SETTLED - 1)
    assert done({11: {}, 12: {}}, frozenset(), repeats=SETTLED)


def point(crowd: float | None, probe: float | None, loadgen: float = 20.0) -> Point:
    return Point(1, 1000, crowd, probe, 30.0, 5.0, loadgen, 5.0, "")


def test_a_step_names_the_load_generator_when_its_crowd_saw_far_more_than_the_probe() -> None:
    assert step_side(point(0.9, 0.2)) == (
        "latency set by the load generator: crowd worst 4.5x the probe's"
    )
    assert step_side(point(0.3, 0.2)).startswith("latency set by the server (the probe saw it")
    assert step_side(point(0.9, None, loadgen=95.0)).startswith(
        "latency set by the load generator (short of CPU"
    )
    assert step_side(point(0.9, None)) == "latency source unknown (no probe)"


def test_the_progress_line_gives_all_workers_and_the_steps_side() -> None:
    first = snapshot(100.0, stats(11, 0, 1.0, 50, 0), stats(12, 1, 2.0, 50, 0))
    last = snapshot(110.0, stats(11, 0, 6.0, 80, 10), stats(12, 1, 4.0, 90, 10))
    summary = {"worst": 0.9, "p99": 0.8}
    record = {
        "step": 1, "subscribers": 20, "channels": 20, "messages": 2, "delivered": 40,
        "expected": 40, "lost": 0, "duplicates": 0, "reconnects": 0, "invalid": None,
        "latency": {"e2e": summary, "fanout": summary}, "probe": {"e2e": {"worst": 0.2}},
        "server": server_figures(first, last),
        "loadgen": {"cpu_percent": 10.0, "cpu_us_per_delivery": None, "saturated": False},
        "side": step_side(point(0.9, 0.2)),
    }  # fmt: skip
    line = progress_line(record)
    assert "server 2 workers: busiest cpu 50%, all 70%, rss of all 170 MiB" in line
    assert line.endswith("| latency set by the load generator: crowd worst 4.5x the probe's")


def test_no_subscriber_is_asked_for_before_the_servers_baseline_is_read(tmp_path: Path) -> None:
    """The load shape reads `target` from the start: a first step's count there let subscribers
    connect while the run line read the server's idle RSS (a 40,000-channel run's baseline held
    2,037 connections and 3,391 channels)."""
    args = parse_args(["channels", "--host", "http://127.0.0.1:9", "--out", str(tmp_path)])
    settings = build(lambda attr: getattr(args, attr), probe=True, workers=1)
    controller = Controller(settings, args.host, StepBook(), distributed=True)
    assert controller.counts[0] > 0 and controller.target == 0
