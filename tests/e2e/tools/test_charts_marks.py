"""What the charts mark for a reader to act on: each run's capacity and ceiling in its colour,
latency over time with faults, memory against the run's own baseline, and no empty charts."""

from __future__ import annotations

from pathlib import Path

import pytest

import pushserver_charts
from pushserver_charts.figures import CHARTS
from pushserver_charts.timeline import FAULT_LABEL

from .test_charts import _figure_labels, results_lines, write_lines


def chart(name: str):
    return next(spec for spec in CHARTS if spec.name == name)


def test_each_run_marks_its_capacity_and_ceiling_in_its_own_colour(tmp_path: Path) -> None:
    first = results_lines("stream", [100, 200, 300, 400], seed=21)
    second = results_lines("longpoll", [100, 200, 300, 400], seed=22)
    second[0]["settings"]["ceiling"] = 0.5
    runs = pushserver_charts.load_all(
        [write_lines(tmp_path / "a.jsonl", first), write_lines(tmp_path / "b.jsonl", second)]
    )
    figure = chart("worst-latency").build(runs)
    ax = figure.get_axes()[0]
    capacities = [line for line in ax.get_lines() if line.get_label() == "_capacity"]
    ceilings = [line for line in ax.get_lines() if line.get_label() == "_ceiling"]
    assert [line.get_color() for line in capacities] == ["C0", "C1"]
    assert [(line.get_color(), line.get_ydata()[0]) for line in ceilings] == [
        ("C0", 1000.0),
        ("C1", 500.0),
    ]
    legend = _figure_labels(figure)[1]
    for run in runs:
        count, reached = run.capacity or (0, False)
        assert reached and f"{run.label}: capacity {count:,}" in legend
        assert [line.get_xdata()[0] for line in capacities][runs.index(run)] == count


def test_latency_over_time_draws_each_window_and_the_fault(tmp_path: Path) -> None:
    lines = results_lines("stream", [100, 200], seed=23)
    lines[2]["fault"] = {"command": "redis-cli shutdown", "started": 1763780021.5}
    run = pushserver_charts.load_results(write_lines(tmp_path / "r.jsonl", lines))
    figure = chart("latency-over-time").build([run])
    ax = figure.get_axes()[0]
    (worst,) = [line for line in ax.get_lines() if line.get_label() == f"{run.label} worst"]
    windows = [w for step in run.steps for w in step.windows]
    assert len(worst.get_xdata()) == len(windows) == 18
    assert list(worst.get_xdata())[:2] == [0, 1]  # seconds since the first window
    assert worst.get_ydata()[0] == pytest.approx(windows[0].worst * 1000)
    (fault,) = [line for line in ax.get_lines() if line.get_label() == "_fault"]
    assert fault.get_xdata()[0] == pytest.approx(1763780021.5 - windows[0].second)
    assert FAULT_LABEL in _figure_labels(figure)[1]


def test_an_all_invalid_run_draws_no_charts(tmp_path: Path) -> None:
    lines = results_lines("stream", [100], seed=24)
    lines[1]["invalid"] = "cannot reach the server at http://127.0.0.1:9: Connection refused"
    lines[-1] |= {"reason": "invalid"}
    report = pushserver_charts.build_report([write_lines(tmp_path / "r.jsonl", lines)], tmp_path)
    page = report.read_text()
    assert "No charts: every step is invalid" in page and "<figure" not in page
    assert not list(tmp_path.glob("*.png"))
    assert "Connection refused" in page


def test_memory_is_marginal_and_a_stale_server_is_named(tmp_path: Path) -> None:
    lines = results_lines("channels", [1000, 2000], seed=25, test="channels")
    lines[0]["server_idle"] = {
        "rss_bytes": 300 * 1024**2,
        "connections": 0,
        "channels": 500,
        "messages_in": 9000,
        "history_size": 100,
    }
    for line in lines[1:3]:
        line["messages"] = 20 * line["channels"]  # 20 rounds to every channel
        line["server"] |= {
            "rss_bytes": 300 * 1024**2 + line["subscribers"] * 20 * 1024,
            "connections": line["subscribers"],
            "channels": 500 + line["subscribers"],
        }
    run = pushserver_charts.load_results(write_lines(tmp_path / "r.jsonl", lines))
    assert run.fresh is False
    figure = chart("resources").build([run])
    per = figure.get_axes()[3]
    by_label = {line.get_label(): list(line.get_ydata()) for line in per.get_lines()}
    assert by_label[run.label] == pytest.approx([20, 20])
    assert by_label[f"{run.label} per channel"] == pytest.approx([20, 20])
    assert "reads low" in per.get_title()
    page = pushserver_charts.build_report([run.path], tmp_path).read_text()
    assert "the server was not fresh" in page
    assert "20.0 KiB per channel at 2,000 channels, each holding up to 40 messages" in page
