"""Charts and HTML report from burn-in results files (pushserver_charts, pushserver-charts)."""

from __future__ import annotations

import base64
import json
import math
import random
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest

import pushserver_charts
from pushserver_charts.figures import CAPPED_LABEL, CHARTS, downsample
from pushserver_charts.layout import INVALID_LABEL, MAX_POINTS, SATURATED_LABEL

SCRIPT = Path(sys.executable).with_name("pushserver-charts")
CEILING = 1.0
MACHINE = {
    "cpus": 2,
    "cpu_model": "Test CPU 3.0GHz",
    "memory_bytes": 8 * 1024**3,
    "python": "3.11.7",
    "platform": "Linux-6.1-x86_64",
}


def _leg(rng: random.Random, p50: float) -> dict[str, float | int]:
    """Seconds, ordered as real percentiles are: p50 <= p90 <= p99 <= worst."""
    p90 = p50 * rng.uniform(1.5, 2.5)
    p99 = p90 * rng.uniform(1.3, 2.0)
    worst = p99 * rng.uniform(1.1, 1.6)
    return {"p50": p50, "p90": p90, "p99": p99, "worst": worst, "mean": p50 * 1.2, "count": 500}


def results_lines(
    transport: str,
    counts: list[int],
    *,
    seed: int,
    test: str = "subscribers",
    probe: bool = False,
    loadgen_peak: float = 70,
) -> list[dict]:
    """A realistic run: latency, CPU and memory grow with the subscribers, the last step goes
    over the ceiling and loses 0.5-2 %; the load generator's CPU reaches about `loadgen_peak` %."""
    rng = random.Random(seed)
    kib_per_subscriber = rng.uniform(8, 14)
    server_cpu = rng.uniform(60, 90)
    run_id = f"{test}-{transport}-{seed}"
    common = {"run_id": run_id, "test": test, "transport": transport}
    lines: list[dict] = [
        {
            "kind": "run",
            "tool": "pushserver-burnin",
            "format": 1,
            **common,
            "label": f"{test}/{transport}",
            "host": "http://127.0.0.1:8080",
            "settings": {"ceiling": CEILING, "step": counts[0], "factor": 1.5, "rate": 2.0},
            "machine": MACHINE,
            "started": 1763780000.0,
        }
    ]
    for number, subscribers in enumerate(counts, 1):
        load = subscribers / counts[-1]
        e2e = 0.002 + 0.4 * load**2 * rng.uniform(0.8, 1.2)
        messages = 20
        expected = messages * subscribers
        lost = int(expected * rng.uniform(0.005, 0.02)) if number == len(counts) else 0
        loadgen_cpu = 20 + (loadgen_peak - 20) * load * rng.uniform(0.9, 1.1)
        lines.append(
            {
                "kind": "step",
                **common,
                "label": f"{test}/{transport}",
                "step": number,
                "subscribers": subscribers,
                "channels": subscribers if test == "channels" else 1,
                "messages": messages,
                "expected": expected,
                "delivered": expected - lost,
                "lost": lost,
                "duplicates": 0,
                "latency": {
                    "publish": _leg(rng, 0.001 + 0.01 * load),
                    "fanout": _leg(rng, e2e * 0.8),
                    "e2e": _leg(rng, e2e),
                },
                "probe": {"fanout": _leg(rng, e2e * 0.7), "e2e": _leg(rng, e2e * 0.9)}
                if probe
                else None,
                "server": {
                    "cpu_percent": 5 + server_cpu * load * rng.uniform(0.9, 1.1),
                    "rss_bytes": int(40 * 1024**2 + subscribers * kib_per_subscriber * 1024),
                    "connections": subscribers,
                },
                "loadgen": {
                    "cpu_percent": loadgen_cpu,
                    "processes": 2,
                    "saturated": loadgen_cpu >= 90,
                },
                "windows": [
                    [1763780000 + number * 10 + k, 50, *(e2e * f for f in (0.5, 0.8, 0.95, 1, 1))]
                    for k in range(9)
                ],
                "ceiling": CEILING,
                "started": 1763780000.0 + number * 10,
                "ended": 1763780000.0 + number * 10 + 9.5,
            }
        )
    lines.append(
        {"kind": "end", "run_id": run_id, "reason": "ceiling", "message": "worst > 1 s"}
        | {"steps": len(counts)}
    )
    return lines


def write_lines(path: Path, lines: list[dict | str]) -> Path:
    """One JSON object per line; a str is written as is (to plant a broken line)."""
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


DECADES = [round(100 * 200 ** (i / 11)) for i in range(12)]  # 100 .. 20000, 12 steps
MANY = [500 * i for i in range(1, 61)]  # 60 steps, one decade and a bit: linear axis


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("results")
    return {
        "stream": write_lines(
            base / "stream.jsonl",
            results_lines("stream", DECADES, seed=1, probe=True, loadgen_peak=105),
        ),
        "longpoll": write_lines(
            base / "longpoll.jsonl", results_lines("longpoll", DECADES, seed=2)
        ),
        "many": write_lines(
            base / "many.jsonl",
            results_lines("sse", MANY, seed=3, test="channels", loadgen_peak=100),
        ),
    }


@pytest.fixture(scope="module")
def report(files: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return pushserver_charts.build_report(
        [files["stream"], files["longpoll"]], tmp_path_factory.mktemp("report")
    )


@pytest.fixture(scope="module")
def pair(files: dict[str, Path]) -> list[pushserver_charts.Run]:
    return pushserver_charts.load_all([files["stream"], files["longpoll"]])


def run_cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=120, check=False
    )


# (height, width) in pixels of each chart at the report's DPI: wide and readable, never cropped.
EXPECTED_SIZES = {
    "worst-latency": (672, 1200),
    "latency-over-time": (672, 1200),
    "percentiles": (1200, 1200),
    "delivery": (900, 1200),
    "resources": (1440, 1200),
    "probe": (900, 1200),
}


def test_report_writes_every_chart_as_png_and_svg(report: Path) -> None:
    assert {spec.name for spec in CHARTS} == set(EXPECTED_SIZES)
    for name, size in EXPECTED_SIZES.items():
        image = matplotlib.image.imread(report.parent / f"{name}.png")
        assert image.shape[:2] == size, name
        assert image.std() > 0.05, f"{name} looks blank"
        svg = (report.parent / f"{name}.svg").read_text()
        assert svg.lstrip().startswith("<?xml") and "<svg" in svg


def _figure_labels(figure) -> tuple[str, list[str]]:
    legend_texts = [t.get_text() for legend in figure.legends for t in legend.get_texts()]
    return figure.get_suptitle(), legend_texts


def _data_lines(ax, run: pushserver_charts.Run) -> list:
    return [line for line in ax.get_lines() if line.get_label().startswith(run.label)]


@pytest.mark.parametrize("spec", CHARTS, ids=lambda spec: spec.name)
def test_figures_carry_titles_units_and_one_line_per_file(
    spec, pair: list[pushserver_charts.Run]
) -> None:
    figure = spec.build(pair)
    title, legend = _figure_labels(figure)
    charted = [run for run in pair if spec.applies([run])]  # the probe chart: stream only
    transports = ", ".join(run.transport for run in charted)
    assert f"test: subscribers · transport: {transports} · server: http://127.0.0.1:8080" in title
    assert "machine: 2 CPUs Test CPU 3.0GHz 8.0 GiB RAM" in title
    assert [run.label for run in pair if run.label in " ".join(legend)] == [
        run.label for run in charted
    ]
    axes = figure.get_axes()
    across = "seconds" if spec.name == "latency-over-time" else "subscribers"
    assert across in axes[-1].get_xlabel()
    for ax in axes:
        assert any(
            unit in ax.get_ylabel()
            for unit in ("(ms", "(%)", "(% of one core)", "(MiB)", "(KiB)", "(count)")
        )
        ax_lines = [_data_lines(ax, run) for run in pair]
        # As many lines (one per statistic) for each charted file, each file in its own colour.
        assert len({len(lines) for lines in ax_lines[: len(charted)]}) == 1 and ax_lines[0]
        assert all(not lines for lines in ax_lines[len(charted) :])
        colours = [{line.get_color() for line in lines} for lines in ax_lines if lines]
        assert all(len(c) == 1 for c in colours) and len(set.union(*colours)) == len(charted)


def test_count_axis_is_log_only_when_it_spans_decades(pair, files) -> None:
    assert CHARTS[0].build(pair).get_axes()[0].get_xscale() == "log"
    many = pushserver_charts.load_all([files["many"]])
    assert CHARTS[0].build(many).get_axes()[0].get_xscale() == "linear"


def _worst_line(ax, run: pushserver_charts.Run):
    (line,) = [line for line in _data_lines(ax, run) if not line.get_label().endswith(" p50")]
    return line


def test_worst_latency_has_ceiling_worst_and_p50(pair) -> None:
    ax = CHARTS[0].build(pair).get_axes()[0]
    assert "ms" in ax.get_ylabel()
    ceilings = [line for line in ax.get_lines() if list(line.get_ydata()) == [1000.0, 1000.0]]
    assert [line.get_color() for line in ceilings] == ["C0", "C1"]  # each run's own, its colour
    for run in pair:
        assert any(f"{run.label}: ceiling 1000 ms" in text.get_text() for text in ax.texts)
    stream = pair[0]
    worst = [step.latency["e2e"].worst * 1000 for step in stream.steps]
    np.testing.assert_allclose(_worst_line(ax, stream).get_ydata(), worst)
    (p50,) = [line for line in _data_lines(ax, stream) if line.get_label().endswith(" p50")]
    np.testing.assert_allclose(
        p50.get_ydata(), [step.latency["e2e"].p50 * 1000 for step in stream.steps]
    )
    # One measurement per point: no spread to show.
    bars = ax.collections[0].get_segments()
    assert all(seg[0][1] == pytest.approx(seg[1][1]) for seg in bars)


def test_repeats_give_each_point_its_spread(tmp_path: Path) -> None:
    lines = results_lines("stream", [100, 100, 100, 200, 200, 200], seed=11)
    worsts = [0.30, 0.10, 0.20, 0.50, 0.90, 0.40]
    for line, worst in zip(lines[1:-1], worsts, strict=True):
        line["latency"]["e2e"] |= {"worst": worst, "p50": worst / 10}
    lines[2]["invalid"] = "only 90 of 100 subscribers connected"  # not part of the spread
    run = pushserver_charts.load_results(write_lines(tmp_path / "r.jsonl", lines))
    ax = CHARTS[0].build([run]).get_axes()[0]
    line = _worst_line(ax, run)
    assert "(3 steps per point)" in line.get_label()
    np.testing.assert_allclose(line.get_xdata(), [100, 200])
    np.testing.assert_allclose(line.get_ydata(), [250, 500])  # medians of the valid repeats
    bars = ax.collections[0].get_segments()
    np.testing.assert_allclose([[seg[0][1], seg[1][1]] for seg in bars], [[200, 300], [400, 900]])
    assert "bar: lowest to highest worst of the repeats" in [
        text.get_text() for text in ax.get_legend().get_texts()
    ]


def test_many_steps_are_binned(files) -> None:
    many = pushserver_charts.load_all([files["many"]])
    ax = CHARTS[0].build(many).get_axes()[0]
    line = _worst_line(ax, many[0])
    assert len(line.get_xdata()) == 30 <= MAX_POINTS
    assert "(60 points in 30 bins)" in line.get_label()
    worst = [step.latency["e2e"].worst * 1000 for step in many[0].steps]
    np.testing.assert_allclose(line.get_ydata(), np.max(np.reshape(worst, (30, 2)), axis=1))


def test_downsample_keeps_extremes_and_flags() -> None:
    x = np.arange(1, 82, dtype=float)
    low, high = x / 10, x * 10
    flags = x == 50
    bx, bcenter, blow, bhigh, bflags = downsample(x, x, low, high, flags)
    assert len(bx) == 27  # bins of 3
    assert (bx[0], bcenter[0], blow[0], bhigh[0]) == (2.0, 3.0, 0.1, 30.0)
    assert bflags.tolist().count(True) == 1 and bflags[16]
    first = slice(0, MAX_POINTS)
    same = downsample(x[first], x[first], low[first], high[first], flags[first])
    assert len(same[0]) == MAX_POINTS


def _tick_labels(figure) -> list[str]:
    figure.canvas.draw()
    return [
        tick.get_text()
        for ax in figure.get_axes()
        for axis in (ax.xaxis, ax.yaxis)
        if axis.get_scale() == "log"
        for tick in axis.get_ticklabels(which="both")
        if tick.get_visible() and tick.get_text()
    ]


def test_log_axes_are_labelled_in_plain_numbers(tmp_path: Path) -> None:
    lines = results_lines("stream", DECADES, seed=12)
    for line in lines[1:-1]:  # latency from 1 ms to 10 s: four decades
        line["latency"]["e2e"]["p50"] = 0.001 * line["subscribers"] / 100
    run = pushserver_charts.load_results(write_lines(tmp_path / "r.jsonl", lines))
    labels = []
    for spec in (spec for spec in CHARTS if spec.name in ("percentiles", "delivery")):
        figure = spec.build([run])
        scales = {(ax.get_xscale(), ax.get_yscale()) for ax in figure.get_axes()}
        assert ("log", "log") in scales, spec.name
        labels += _tick_labels(figure)
    assert {"100", "1k", "10k", "1", "10", "1,000"} <= set(labels)
    assert all(re.fullmatch(r"[0-9.,]+[kM]?", label) for label in labels), labels


def test_saturated_steps_are_marked(pair) -> None:
    saturated = [step.subscribers for step in pair[0].steps if step.saturated]
    assert saturated and not any(step.saturated for step in pair[1].steps)
    figure = next(spec for spec in CHARTS if spec.name == "resources").build(pair)
    cpu = figure.get_axes()[1]  # the load generator's
    marks = [line for line in cpu.get_lines() if line.get_label() == SATURATED_LABEL]
    assert [list(line.get_xdata()) for line in marks] == [saturated]
    assert SATURATED_LABEL in _figure_labels(figure)[1]
    worst = CHARTS[0].build(pair).get_axes()[0]
    assert [line.get_label() for line in worst.get_lines()].count(SATURATED_LABEL) == 1


class _ReportParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.images: dict[str, str] = {}
        self.step_rows: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "img":
            self.images[attributes["alt"] or ""] = attributes["src"] or ""
        if tag == "tr" and "data-step" in attributes:
            self.step_rows.append(attributes["data-step"] or "")

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_html_report_embeds_every_chart_and_every_step(report: Path, files) -> None:
    parser = _ReportParser()
    parser.feed(report.read_text())
    assert set(parser.images) == {spec.title for spec in CHARTS}
    for src in parser.images.values():
        prefix = "data:image/png;base64,"
        assert src.startswith(prefix)
        assert base64.b64decode(src[len(prefix) :]).startswith(b"\x89PNG")
    assert len(parser.step_rows) == 2 * len(DECADES)
    text = " ".join(parser.text)
    for expected in ("subscribers/stream", "subscribers/longpoll", "Settings", "Machine"):
        assert expected in text
    assert "Test CPU 3.0GHz" in text and "8.0 GiB" in text
    stream = pushserver_charts.load_results(files["stream"])
    held = max(s.subscribers for s in stream.steps if s.latency["e2e"].worst <= CEILING)
    assert f"{held:,} subscribers, worst" in text


def test_clashing_labels_are_told_apart(files, tmp_path: Path) -> None:
    copy = tmp_path / "again.jsonl"
    copy.write_text(files["stream"].read_text())
    labels = [run.label for run in pushserver_charts.load_all([files["stream"], copy])]
    assert labels == ["subscribers/stream (stream.jsonl)", "subscribers/stream (again.jsonl)"]


def test_load_results_reads_one_run_and_refuses_several(files, tmp_path: Path) -> None:
    run = pushserver_charts.load_results(files["longpoll"])
    assert (run.test, run.transport, len(run.steps), run.ceiling) == (
        "subscribers",
        "longpoll",
        12,
        CEILING,
    )
    assert run.end and run.end["reason"] == "ceiling" and not run.warnings
    both = tmp_path / "both.jsonl"
    both.write_text(files["stream"].read_text() + files["longpoll"].read_text())
    assert [r.transport for r in pushserver_charts.load_runs(both)] == ["stream", "longpoll"]
    with pytest.raises(pushserver_charts.ResultsError, match="holds 2 runs"):
        pushserver_charts.load_results(both)
    (chosen,) = pushserver_charts.load_all([both], run_ids=[run.run_id])
    assert chosen.run_id == run.run_id and len(chosen.steps) == 12
    with pytest.raises(pushserver_charts.ResultsError, match="no run nope in"):
        pushserver_charts.load_all([both], run_ids=["nope"])


def _bad_inputs(tmp: Path) -> dict[str, tuple[Path, str]]:
    good = results_lines("stream", DECADES[:3], seed=4)
    other_tool = dict(good[0], tool="locust")
    return {
        "missing": (tmp / "absent.jsonl", "absent.jsonl: cannot read"),
        "empty": (write_lines(tmp / "empty.jsonl", []), "empty.jsonl: empty file"),
        "not-json": (
            write_lines(tmp / "garbage.jsonl", [*good[:2], "this is not json", *good[2:]]),
            "garbage.jsonl:3: not JSON",
        ),
        "csv": (
            write_lines(tmp / "locust_stats.csv", ["Type,Name,Request Count", "GET,/,10"]),
            "locust_stats.csv:1: not a pushserver-burnin results file: not JSON",
        ),
        "no-kind": (
            write_lines(tmp / "stats.jsonl", [{"name": "GET /", "num_requests": 10}]),
            'stats.jsonl:1: not a pushserver-burnin results file (no "kind" field)',
        ),
        "other-tool": (
            write_lines(tmp / "locust.jsonl", [other_tool, *good[1:]]),
            'locust.jsonl:1: not a pushserver-burnin results file (its tool is "locust")',
        ),
        "bad-field": (
            write_lines(tmp / "field.jsonl", [good[0], dict(good[1], subscribers="many")]),
            "field.jsonl:2: field 'subscribers' must be a number",
        ),
    }


@pytest.mark.parametrize(
    "case", ["missing", "empty", "not-json", "csv", "no-kind", "other-tool", "bad-field"]
)
def test_bad_input_gives_one_clear_error_line(case: str, tmp_path: Path) -> None:
    path, message = _bad_inputs(tmp_path)[case]
    result = run_cli(path, "-o", tmp_path / "out")
    assert result.returncode != 0
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("pushserver-charts: error: ") and message in lines[0]
    assert not (tmp_path / "out" / "report.html").exists()


def test_interrupted_run_charts_its_finished_steps(tmp_path: Path) -> None:
    lines = results_lines("ws", DECADES[:6], seed=5)[:-1]  # no end line
    path = write_lines(tmp_path / "partial.jsonl", lines[:-1])
    with path.open("a") as out:
        out.write(json.dumps(lines[-1])[:40])  # killed in the middle of writing step 6
    result = run_cli(path, "-o", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    assert "partial.jsonl:7: truncated last line ignored" in result.stderr
    assert "has no end line (interrupted?); charting its 5 finished steps" in result.stderr
    report = Path(result.stdout.strip())
    assert report == tmp_path / "out" / "report.html"
    parser = _ReportParser()
    parser.feed(report.read_text())
    assert parser.step_rows == ["1", "2", "3", "4", "5"]
    assert matplotlib.image.imread(tmp_path / "out" / "worst-latency.png").shape[:2] == (672, 1200)
    assert not (tmp_path / "out" / "probe.png").exists()  # no probe data in this run


def test_steps_without_header_are_charted(tmp_path: Path) -> None:
    lines = results_lines("sse", DECADES[:4], seed=6)
    run = pushserver_charts.load_results(write_lines(tmp_path / "bare.jsonl", lines[1:-1]))
    assert (run.label, len(run.steps), run.end) == ("subscribers/sse", 4, None)
    assert math.isclose(run.ceiling, CEILING)


def test_far_ceiling_is_named_instead_of_flattening_the_chart(tmp_path: Path) -> None:
    header, step, end = results_lines("ws", [100], seed=7)
    step["latency"]["e2e"] = {"p50": 0.002, "worst": 0.010}
    run = pushserver_charts.load_results(write_lines(tmp_path / "fast.jsonl", [header, step, end]))
    ax = CHARTS[0].build([run]).get_axes()[0]
    assert ax.get_ylim()[1] < 100
    assert [t.get_text() for t in ax.texts] == ["ceiling 1000 ms (above this scale)"]


def test_invalid_steps_are_shown_as_invalid(tmp_path: Path) -> None:
    lines = results_lines("stream", [100, 200, 300], seed=5)
    lines[2]["invalid"] = "3 publish requests failed, first /pub/x: ConnectionRefusedError()"
    lines[-1] |= {"reason": "invalid", "message": "step 2 invalid"}
    run = pushserver_charts.load_results(write_lines(tmp_path / "r.jsonl", lines))
    assert [bool(step.invalid) for step in run.steps] == [False, True, False]
    worst = CHARTS[0].build([run]).get_axes()[0]
    marks = [line for line in worst.get_lines() if line.get_label() == INVALID_LABEL]
    assert [list(line.get_xdata()) for line in marks] == [[200]]
    plotted = next(line for line in worst.get_lines() if line.get_label() == run.label)
    assert math.isnan(plotted.get_ydata()[1])  # its latency is not charted as a measurement
    page = pushserver_charts.build_report([tmp_path / "r.jsonl"], tmp_path).read_text()
    assert '<tr class="invalid" data-step="2">' in page
    assert "3 publish requests failed" in page


def _verdict_run(
    tmp_path: Path, reason: str, worst: float, probe_worst: float | None
) -> pushserver_charts.Run:
    lines = results_lines("stream", [100, 200, 300, 400], seed=7, probe=probe_worst is not None)
    last = lines[-2]
    last["latency"]["e2e"]["worst"] = worst
    if probe_worst is not None:  # the steps before it agree on the side (verdict.AGREEING)
        for line in lines[-4:-1]:
            line["probe"]["e2e"]["worst"] = line["latency"]["e2e"]["worst"] * probe_worst / worst
    last["server"]["cpu_wait_percent"] = 4.0
    last["loadgen"] |= {"cpu_percent": 97.0, "cpu_wait_percent": 30.0}
    lines[-1] |= {"reason": reason}
    return pushserver_charts.load_results(write_lines(tmp_path / f"{reason}.jsonl", lines))


def test_verdict_of_a_ceiling_stopped_run_names_capacity_and_the_load_generator(
    tmp_path: Path,
) -> None:
    run = _verdict_run(tmp_path, "ceiling", 1.5, probe_worst=0.05)
    assert run.verdict.startswith(
        "capacity under the 1 s ceiling: 300 subscribers (ceiling passed at step 4, "
        "400 subscribers); latency set by the load generator"
    )
    assert "crowd worst 1,500 ms, probe worst 50 ms" in run.verdict
    assert "load generator 97 % + 30 % run-queue wait" in run.verdict
    page = pushserver_charts.build_report([run.path], tmp_path).read_text()
    headline = page.index('<p class="verdict">')
    assert headline < page.index("<figure")  # at the top, before the charts
    assert "300 subscribers (ceiling passed at step 4" in page[headline:]


def test_verdict_of_a_capped_run_is_a_lower_bound(tmp_path: Path) -> None:
    run = _verdict_run(tmp_path, "max", 0.9, probe_worst=0.8)
    assert run.verdict.startswith(
        "capacity under the 1 s ceiling: at least 400 subscribers "
        "(stopped by --max before reaching the ceiling); latency set by the server"
    )
    timed = _verdict_run(tmp_path, "time", 0.9, probe_worst=None)
    assert "at least 400 subscribers (stopped by --max-minutes" in timed.verdict
    assert "latency set by the load generator (short of CPU, no probe" in timed.verdict


def test_verdict_stops_at_an_invalid_step(tmp_path: Path) -> None:
    lines = results_lines("stream", [100, 200, 300], seed=8)
    lines[3]["invalid"] = "only 150 of 300 subscribers connected"
    lines[-1] |= {"reason": "invalid"}
    run = pushserver_charts.load_results(write_lines(tmp_path / "r.jsonl", lines))
    assert run.verdict == (
        "no capacity under the 1 s ceiling: step 3 is invalid (only 150 of 300 subscribers "
        "connected); at least 200 subscribers held before it"
    )


def test_memory_per_subscriber_is_the_cost_above_the_idle_server(tmp_path: Path) -> None:
    lines = results_lines("stream", [1000, 2000, 4000], seed=9)
    lines[0]["server_idle"] = {"rss_bytes": 40 * 1024**2}
    for line, kib in zip(lines[1:4], (10, 10, 10), strict=True):
        line["server"]["rss_bytes"] = 40 * 1024**2 + line["subscribers"] * kib * 1024
    run = pushserver_charts.load_results(write_lines(tmp_path / "r.jsonl", lines))
    figure = next(spec for spec in CHARTS if spec.name == "resources").build([run])
    cpu, _, _, per_sub = figure.get_axes()[:4]
    assert list(per_sub.get_lines()[0].get_ydata()) == pytest.approx([10, 10, 10])
    assert cpu.get_ylabel() == "CPU (% of one core)"
    assert any("90 % of one core" in label for label in _figure_labels(figure)[1])
    del lines[0]["server_idle"]  # without the header's figure: the fitted intercept
    run = pushserver_charts.load_results(write_lines(tmp_path / "r.jsonl", lines))
    assert run.idle_rss == pytest.approx(40 * 1024**2)


def test_a_capped_run_is_labelled_a_lower_bound(tmp_path: Path) -> None:
    lines = results_lines("stream", [100, 200], seed=10)
    lines[-1] |= {"reason": "max"}
    run = pushserver_charts.load_results(write_lines(tmp_path / "r.jsonl", lines))
    figure = CHARTS[0].build([run])
    worst = figure.get_axes()[0]
    labels = [line.get_label() for line in worst.get_lines()]
    assert f"{run.label} (stopped by --max before reaching the ceiling: a lower bound)" in labels
    (mark,) = [line for line in worst.get_lines() if line.get_label() == CAPPED_LABEL]
    assert list(mark.get_xdata()) == [200]
    assert CAPPED_LABEL in _figure_labels(figure)[1]
    lines[-1]["reason"] = "ceiling"
    reached = pushserver_charts.load_results(write_lines(tmp_path / "c.jsonl", lines))
    assert CAPPED_LABEL not in _figure_labels(CHARTS[0].build([reached]))[1]


def test_report_shows_the_command_as_typed_and_keeps_margins(tmp_path: Path) -> None:
    lines = results_lines("stream", [100, 200], seed=13)
    typed = "pushserver-burnin subscribers --host http://127.0.0.1:8080 --ceiling 1 --rate 2"
    lines[0]["command"] = typed + " --label 'a <b> & c'"
    page = pushserver_charts.build_report([write_lines(tmp_path / "r.jsonl", lines)], tmp_path)
    html = page.read_text()
    parser = _ReportParser()
    parser.feed(html)
    text = "".join(parser.text)
    assert typed + " --label 'a <b> & c'" in text  # escaped in HTML, verbatim once parsed
    settings = text[text.index("Settings") :]
    assert "ceiling1" in settings and "ceiling1.0" not in settings  # 1 as typed, not 1.0
    assert re.search(r"body \{[^}]*padding: [^;]*2em", html)
    assert html.count('<div class="scroll"><table') == 4  # run, settings, machine, steps


def test_memory_per_subscriber_counts_only_the_measured_workers_subscribers(
    tmp_path: Path,
) -> None:
    """With --workers 3 the server figures are one worker's: a third of the subscribers."""
    lines = results_lines("stream", [3000, 6000], seed=14)
    lines[0]["server_idle"] = {"rss_bytes": 40 * 1024**2}
    for line in lines[1:3]:
        held = line["subscribers"] // 3
        line["server"] |= {"connections": held, "rss_bytes": 40 * 1024**2 + held * 6 * 1024}
    run = pushserver_charts.load_results(write_lines(tmp_path / "r.jsonl", lines))
    figure = next(spec for spec in CHARTS if spec.name == "resources").build([run])
    per_sub = figure.get_axes()[3]
    assert list(per_sub.get_lines()[0].get_ydata()) == pytest.approx([6, 6])
    page = pushserver_charts.build_report([run.path], tmp_path).read_text()
    assert "<td>6.0</td>" in page
