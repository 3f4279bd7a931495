"""Figure builders: one function per chart, each returning a matplotlib Figure.

Figures are built on the Agg canvas directly (no pyplot), so nothing needs a display and nothing
lingers in global state. Runs overlay on the same axes: one colour per run, one line style per
statistic, and the legends say which is which.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from charts.results import SATURATION_PERCENT, Run, Step

DPI = 120
WIDTH = 10.0
MAX_POINTS = 40
LOG_SPAN = 100
MS = 1000.0
MIB = 1024.0 * 1024.0
STAT_STYLES = {"p50": ":", "p90": "-.", "p99": "--", "worst": "-"}
LEG_TITLES = {
    "publish": "publish round trip (publisher → server → publisher)",
    "fanout": "fan-out (server publish time → subscriber receipt)",
    "e2e": "end-to-end (publisher send → subscriber receipt)",
}
SATURATED = {"marker": "X", "color": "red", "markersize": 9, "linestyle": "none", "zorder": 5}
SATURATED_LABEL = f"load generator saturated (CPU ≥ {SATURATION_PERCENT} %)"
COUNT_LABEL = "subscribers connected"
DELIVERED = {"linewidth": 5, "alpha": 0.35}  # wide and pale: the expected line shows through
SUBTITLE_WIDTH = 110
CEILING_ZOOM = 5  # draw the ceiling when it is within this factor of the worst step


def _series(run: Run, value: Callable[[Step], float]) -> np.ndarray:
    return np.array([value(step) for step in run.steps], dtype=float)


def _latency_ms(run: Run, leg: str, stat: str, *, probe: bool = False) -> np.ndarray:
    """One statistic of one leg per step, in milliseconds (NaN where a step has none)."""

    def value(step: Step) -> float:
        legs = step.probe if probe else step.latency
        return getattr(legs[leg], stat) * MS if legs else math.nan

    return _series(run, value)


def _subscribers(run: Run) -> np.ndarray:
    return _series(run, lambda step: step.subscribers)


def _color(index: int) -> str:
    return f"C{index % 10}"


def _style(index: int, x: np.ndarray) -> dict[str, Any]:
    """A run's colour, with a dot on each step unless the steps are too many to tell apart."""
    return {"color": _color(index), "marker": "." if len(x) <= MAX_POINTS else None}


def _si(value: float, _position: object = None) -> str:
    """Counts as 500, 2k, 1.5M: readable tick labels on the subscriber axis."""
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:g}"


def _spans_decades(values: np.ndarray) -> bool:
    positive = values[np.isfinite(values) & (values > 0)]
    return positive.size > 0 and positive.max() / positive.min() >= LOG_SPAN


def _describe(runs: Sequence[Run]) -> str:
    """What was run: test, transport, server and machine, each listed once across runs."""

    def distinct(values: list[str]) -> str:
        return ", ".join(dict.fromkeys(v for v in values if v))

    def machine(run: Run) -> str:
        info = run.machine
        parts = [
            f"{info['cpus']} CPUs" if info.get("cpus") else "",
            str(info.get("cpu_model") or ""),
            f"{info['memory_bytes'] / 1024**3:.1f} GiB RAM" if info.get("memory_bytes") else "",
        ]
        return " ".join(p for p in parts if p)

    fields = (
        ("test", distinct([run.test for run in runs])),
        ("transport", distinct([run.transport for run in runs])),
        ("server", distinct([run.host for run in runs])),
        ("machine", distinct([machine(run) for run in runs])),
    )
    lines = [""]
    for name, value in fields:
        if not value:
            continue
        part = f"{name}: {value}"
        if lines[-1] and len(lines[-1]) + len(part) > SUBTITLE_WIDTH:
            lines.append(part)
        else:
            lines[-1] = f"{lines[-1]} · {part}" if lines[-1] else part
    return "\n".join(lines)


def _figure(runs: Sequence[Run], title: str, rows: int, height: float) -> tuple[Figure, list[Axes]]:
    fig = Figure(figsize=(WIDTH, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    axes = list(fig.subplots(rows, 1, sharex=True, squeeze=False)[:, 0])
    fig.suptitle(f"{title}\n{_describe(runs)}", fontsize=11)
    counts = np.concatenate([_subscribers(run) for run in runs])
    for ax in axes:
        ax.grid(True, which="major", alpha=0.3)
    bottom = axes[-1]
    if _spans_decades(counts):
        bottom.set_xscale("log")
        bottom.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        bottom.xaxis.set_minor_formatter(NullFormatter())
    bottom.xaxis.set_major_formatter(FuncFormatter(_si))
    bottom.set_xlabel(COUNT_LABEL + (" (log scale)" if bottom.get_xscale() == "log" else ""))
    return fig, axes


def _run_handles(
    runs: Sequence[Run], shown: Callable[[Run], bool] = lambda run: True
) -> list[Line2D]:
    """One legend entry per run, in the run's colour (the colour follows the run's position)."""
    return [
        Line2D([], [], color=_color(i), label=run.label) for i, run in enumerate(runs) if shown(run)
    ]


def _legend(fig: Figure, handles: Sequence[Line2D]) -> None:
    """The figure's legend of runs, below the plots where it can never hide a line."""
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncols=min(len(handles), 3),
        fontsize="small",
        frameon=False,
    )


def _style_legend(ax: Axes, styles: Mapping[str, str | Mapping[str, Any]]) -> None:
    """Grey samples of each line style (a line style, or Line2D keywords) on the axes."""
    handles = [
        Line2D(
            [], [], color="dimgray", label=name, **({"linestyle": s} if isinstance(s, str) else s)
        )
        for name, s in styles.items()
    ]
    ax.legend(handles=handles, loc="upper left", fontsize="x-small", ncols=len(handles))


def _plotted(ax: Axes) -> np.ndarray:
    """Every finite y value of the lines on the axes."""
    values = np.concatenate([np.asarray(line.get_ydata(), float) for line in ax.get_lines()])
    return values[np.isfinite(values)]


def _highest(ax: Axes) -> float:
    values = _plotted(ax)
    return float(values.max()) if values.size else 0.0


def _from_zero(ax: Axes, at_least: float = 1.0) -> None:
    """A linear scale from zero with headroom, so flat lines do not hug the frame."""
    ax.set_ylim(0, max(_highest(ax) * 1.1, at_least))


def _latency_axis(ax: Axes) -> None:
    """Milliseconds; log scale when the lines span decades, else linear from zero."""
    if _spans_decades(_plotted(ax)):
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        ax.set_ylabel("latency (ms, log scale)")
    else:
        _from_zero(ax)
        ax.set_ylabel("latency (ms)")


def _mark_saturated(ax: Axes, x: np.ndarray, y: np.ndarray, saturated: np.ndarray) -> bool:
    if saturated.any():
        ax.plot(x[saturated], y[saturated], **SATURATED, label=SATURATED_LABEL)
    return bool(saturated.any())


def _saturation_handle(marked: bool) -> list[Line2D]:
    return [Line2D([], [], **SATURATED, label=SATURATED_LABEL)] if marked else []


def downsample(
    x: np.ndarray, low: np.ndarray, high: np.ndarray, flags: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Bin consecutive steps so at most MAX_POINTS remain: mean count, lowest low, highest high.

    A bin is flagged (e.g. saturated) when any of its steps is.
    """
    size = math.ceil(len(x) / MAX_POINTS)
    if size <= 1:
        return x, low, high, flags
    starts = np.arange(0, len(x), size)

    def reduce(values: np.ndarray, fn: Callable[..., np.ndarray]) -> np.ndarray:
        return np.array([fn(values[i : i + size]) for i in starts])

    def nan_safe(fn: Callable[..., np.ndarray]) -> Callable[[np.ndarray], float]:
        return lambda part: fn(part) if np.isfinite(part).any() else math.nan

    return (
        reduce(x, np.mean),
        reduce(low, nan_safe(np.nanmin)),
        reduce(high, nan_safe(np.nanmax)),
        reduce(flags, np.any).astype(bool),
    )


def worst_latency(runs: Sequence[Run]) -> Figure:
    """The burn-in chart: worst end-to-end latency per step against subscribers, with ceiling."""
    fig, (ax,) = _figure(runs, "Worst-case end-to-end latency per step", rows=1, height=5.6)
    marked = False
    handles = []
    for i, run in enumerate(runs):
        x, p50, worst, saturated = downsample(
            _subscribers(run),
            _latency_ms(run, "e2e", "p50"),
            _latency_ms(run, "e2e", "worst"),
            _series(run, lambda s: s.saturated).astype(bool),
        )
        binned = f" ({len(run.steps)} steps in {len(x)} bins)" if len(x) < len(run.steps) else ""
        handles.append(
            Line2D([], [], color=_color(i), marker="o", markersize=4, label=run.label + binned)
        )
        spread = np.clip(worst - p50, 0, None)
        container = ax.errorbar(
            x,
            worst,
            yerr=[np.nan_to_num(spread), np.zeros_like(worst)],
            color=_color(i),
            marker="o",
            markersize=4,
            capsize=3,
            elinewidth=1,
            alpha=0.9,
        )
        container.lines[0].set_label(run.label + binned)
        marked |= _mark_saturated(ax, x, worst, saturated)
    ceilings = sorted({run.ceiling * MS for run in runs if math.isfinite(run.ceiling)})
    # A ceiling far above every step would flatten them into the bottom: name it instead.
    drawn = [ceiling for ceiling in ceilings if ceiling <= CEILING_ZOOM * _highest(ax)]
    for ceiling in drawn:
        ax.axhline(ceiling, color="red", linestyle="--", linewidth=1.2)
    _from_zero(ax)
    for ceiling in ceilings:
        on_scale = ceiling in drawn
        ax.annotate(
            f"ceiling {ceiling:g} ms" + ("" if on_scale else " (above this scale)"),
            xy=(0.005, ceiling if on_scale else ax.get_ylim()[1]),
            xycoords=("axes fraction", "data"),
            xytext=(0, 3 if on_scale else -12),
            textcoords="offset points",
            color="red",
            fontsize="small",
        )
    ax.set_ylabel("worst-case latency (ms); bars reach down to p50")
    _legend(fig, handles + _saturation_handle(marked))
    return fig


def percentiles(runs: Sequence[Run]) -> Figure:
    """p50 / p90 / p99 / worst of each latency leg, one subplot per leg."""
    fig, axes = _figure(runs, "Latency percentiles per leg", rows=3, height=10)
    for ax, leg in zip(axes, LEG_TITLES, strict=True):
        for i, run in enumerate(runs):
            x = _subscribers(run)
            for stat, style in STAT_STYLES.items():
                ax.plot(
                    x,
                    _latency_ms(run, leg, stat),
                    linestyle=style,
                    label=f"{run.label} {stat}",
                    **_style(i, x),
                )
        ax.set_title(LEG_TITLES[leg], fontsize="medium")
        _latency_axis(ax)
    _style_legend(axes[0], STAT_STYLES)
    _legend(fig, _run_handles(runs))
    return fig


def delivery(runs: Sequence[Run]) -> Figure:
    """Delivered against expected per step, and the loss and duplicates as shares of expected."""
    fig, (counts, shares) = _figure(runs, "Deliveries and loss per step", rows=2, height=7.5)
    for i, run in enumerate(runs):
        x = _subscribers(run)
        expected = _series(run, lambda s: s.expected)
        style = _style(i, x)
        counts.plot(
            x,
            _series(run, lambda s: s.delivered),
            label=f"{run.label} delivered",
            **style,
            **DELIVERED,
        )
        counts.plot(x, expected, linestyle="--", label=f"{run.label} expected", color=_color(i))
        with np.errstate(divide="ignore", invalid="ignore"):
            lost = _series(run, lambda s: s.lost) * 100 / expected
            dups = _series(run, lambda s: s.duplicates) * 100 / expected
        shares.plot(x, lost, label=f"{run.label} lost", **style)
        shares.plot(x, dups, linestyle=":", label=f"{run.label} duplicates", **style)
    if _spans_decades(_plotted(counts)):
        counts.set_yscale("log")
    counts.yaxis.set_major_formatter(FuncFormatter(_si))
    counts.set_ylabel("deliveries per step (count)")
    counts.set_title("delivered vs expected", fontsize="medium")
    _from_zero(shares)
    shares.set_ylabel("share of expected (%)")
    shares.set_title("lost and duplicated deliveries", fontsize="medium")
    _style_legend(counts, {"expected": "--", "delivered": DELIVERED})
    _style_legend(shares, {"lost": "-", "duplicates": ":"})
    _legend(fig, _run_handles(runs))
    return fig


def resources(runs: Sequence[Run]) -> Figure:
    """Server CPU and memory against subscribers, with the load generator's CPU beside them."""
    fig, (cpu, rss, per_sub) = _figure(
        runs, "Server CPU and memory, load-generator CPU", rows=3, height=10
    )
    marked = False
    for i, run in enumerate(runs):
        x = _subscribers(run)
        style = _style(i, x)
        loadgen = _series(run, lambda s: s.loadgen_cpu)
        cpu.plot(x, _series(run, lambda s: s.server_cpu), label=f"{run.label} server", **style)
        cpu.plot(x, loadgen, linestyle="--", label=f"{run.label} load generator", **style)
        saturated = _series(run, lambda s: s.saturated).astype(bool)
        marked |= _mark_saturated(cpu, x, loadgen, saturated)
        memory = _series(run, lambda s: s.server_rss)
        rss.plot(x, memory / MIB, label=run.label, **style)
        with np.errstate(divide="ignore", invalid="ignore"):
            per_sub.plot(x, memory / 1024 / x, label=run.label, **style)
    cpu.axhline(SATURATION_PERCENT, color="red", linewidth=0.8, alpha=0.5)
    _from_zero(cpu, at_least=100)
    cpu.set_ylabel("CPU (%)")
    cpu.set_title("CPU: server and busiest load-generator process", fontsize="medium")
    _from_zero(rss)
    rss.set_ylabel("server RSS (MiB)")
    rss.set_title("server resident memory", fontsize="medium")
    _from_zero(per_sub)
    per_sub.set_ylabel("RSS per subscriber (KiB)")
    per_sub.set_title("server resident memory per subscriber", fontsize="medium")
    _style_legend(cpu, {"server": "-", "load generator": "--"})
    _legend(fig, _run_handles(runs) + _saturation_handle(marked))
    return fig


def _has_probe(runs: Sequence[Run]) -> bool:
    return any(step.probe for run in runs for step in run.steps)


def probe(runs: Sequence[Run]) -> Figure:
    """The independent probe subscriber's latency beside the load generator's subscribers."""
    fig, axes = _figure(
        [run for run in runs if _has_probe([run])], "Probe subscriber latency", rows=2, height=7.5
    )
    styles = {"probe p50": ":", "probe worst": "-", "load-generator subscribers worst": "--"}
    for ax, leg in zip(axes, ("fanout", "e2e"), strict=True):
        for i, run in enumerate(runs):
            if not _has_probe([run]):
                continue
            x = _subscribers(run)
            style = _style(i, x)
            for stat in ("p50", "worst"):
                ax.plot(
                    x,
                    _latency_ms(run, leg, stat, probe=True),
                    linestyle=STAT_STYLES[stat],
                    label=f"{run.label} probe {stat}",
                    **style,
                )
            ax.plot(
                x,
                _latency_ms(run, leg, "worst"),
                linestyle="--",
                linewidth=0.8,
                alpha=0.6,
                label=f"{run.label} subscribers worst",
                **style,
            )
        ax.set_title(LEG_TITLES[leg], fontsize="medium")
        _latency_axis(ax)
    _style_legend(axes[0], styles)
    _legend(fig, _run_handles(runs, shown=lambda run: _has_probe([run])))
    return fig


@dataclass(frozen=True)
class ChartSpec:
    """A chart of the report: its file name, heading, how to read it, and its builder."""

    name: str
    title: str
    caption: str
    build: Callable[[Sequence[Run]], Figure]
    applies: Callable[[Sequence[Run]], bool] = lambda runs: True


CHARTS = (
    ChartSpec(
        "worst-latency",
        "Worst-case latency",
        "Worst end-to-end latency of each step against the subscribers connected; the bar "
        "reaches down to the step's median (p50). The dashed red line is the ceiling that ends "
        f"the ramp. Over {MAX_POINTS} steps, consecutive steps are binned (worst of the bin).",
        worst_latency,
    ),
    ChartSpec(
        "percentiles",
        "Latency percentiles",
        "p50, p90, p99 and worst of each leg: publish round trip, fan-out (server to "
        "subscriber) and end-to-end (publisher to subscriber).",
        percentiles,
    ),
    ChartSpec(
        "delivery",
        "Deliveries and loss",
        "Deliveries received against those expected, and the lost and duplicated ones as a "
        "share of expected.",
        delivery,
    ),
    ChartSpec(
        "resources",
        "Server and load-generator resources",
        "Server CPU and resident memory (total and per subscriber), with the busiest "
        "load-generator process's CPU. Red crosses mark saturated steps: there the load "
        "generator, not the server, limits what was measured.",
        resources,
    ),
    ChartSpec(
        "probe",
        "Probe subscriber",
        "Latency seen by the independent probe subscriber, beside the worst of the "
        "load-generator subscribers: when they part, the load generator is adding the delay.",
        probe,
        _has_probe,
    ),
)
