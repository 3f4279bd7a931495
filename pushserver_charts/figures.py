"""The charts of the report: one builder per chart, each returning a matplotlib Figure.

Within a chart, colour tells the runs apart and line style the statistic; the legends say which
is which.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter

from pushserver_charts.layout import (
    MAX_POINTS,
    MIB,
    MS,
    color,
    figure_legend,
    from_zero,
    highest,
    invalid_handle,
    latency_axis,
    latency_ms,
    log_scale,
    mark_invalid,
    mark_saturated,
    new_figure,
    plotted,
    run_handles,
    run_style,
    saturation_handle,
    series,
    si,
    spans_decades,
    style_legend,
    subscribers,
)
from pushserver_charts.memory import per_channel_kib, per_subscriber_kib
from pushserver_charts.results import SATURATION_PERCENT, Run
from pushserver_charts.timeline import has_windows, over_time

STAT_STYLES = {"p50": ":", "p90": "-.", "p99": "--", "worst": "-"}
LEG_TITLES = {
    "publish": "publish round trip (publisher → server → publisher)",
    "fanout": "fan-out (server publish time → subscriber receipt)",
    "e2e": "end-to-end (planned publish time → subscriber receipt)",
}
# wide and pale: the expected line shows through
DELIVERED: dict[str, Any] = {"linewidth": 5, "alpha": 0.35}
CEILING_ZOOM = 5  # draw the ceiling when it is within this factor of the worst step
SATURATION_LINE: dict[str, Any] = {
    "color": "red",
    "linewidth": 0.8,
    "alpha": 0.5,
    "label": f"{SATURATION_PERCENT} % of one core: above it a process is saturated",
}


CAPPED: dict[str, Any] = {
    "marker": "^",
    "markersize": 11,
    "markerfacecolor": "none",
    "markeredgewidth": 1.5,
    "linestyle": "none",
    "zorder": 6,
}
CAPPED_LABEL = "run stopped before the ceiling: capacity at least this"
CAPACITY: dict[str, Any] = {"linestyle": ":", "linewidth": 1.5}


def downsample(
    x: np.ndarray, center: np.ndarray, low: np.ndarray, high: np.ndarray, flags: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Bin consecutive points so at most MAX_POINTS remain: mean count, highest center (the
    worst of the bin), lowest low, highest high. A bin is flagged (e.g. saturated) when any of
    its points is."""
    size = math.ceil(len(x) / MAX_POINTS)
    if size <= 1:
        return x, center, low, high, flags
    starts = np.arange(0, len(x), size)

    def reduce(values: np.ndarray, fn: Callable[[np.ndarray], Any]) -> np.ndarray:
        return np.array([fn(values[i : i + size]) for i in starts])

    def nan_safe(fn: Callable[[np.ndarray], Any]) -> Callable[[np.ndarray], Any]:
        return lambda part: fn(part) if np.isfinite(part).any() else math.nan

    return (
        reduce(x, np.mean),
        reduce(center, nan_safe(np.nanmax)),
        reduce(low, nan_safe(np.nanmin)),
        reduce(high, nan_safe(np.nanmax)),
        reduce(flags, np.any).astype(bool),
    )


@dataclass(frozen=True)
class Points:
    """One point per subscriber count: the repeats of a count folded into median and range."""

    x: np.ndarray
    median: np.ndarray
    low: np.ndarray
    high: np.ndarray
    p50: np.ndarray
    saturated: np.ndarray
    repeats: int  # the most steps measured at one count


def per_count(run: Run) -> Points:
    """The worst end-to-end latency of each count: median, lowest and highest over the steps
    measured at that count (`--repeats`), and the median p50; invalid steps count as none."""
    x = subscribers(run)
    worst = latency_ms(run, "e2e", "worst")
    p50 = latency_ms(run, "e2e", "p50")
    saturated = series(run, lambda s: s.saturated).astype(bool)
    counts = np.unique(x)
    rows = []
    for count in counts:
        at = x == count
        mine = worst[at & np.isfinite(worst)]
        mid = p50[at & np.isfinite(p50)]
        spread = (np.median(mine), mine.min(), mine.max()) if mine.size else (math.nan,) * 3
        rows.append((*spread, np.median(mid) if mid.size else math.nan, saturated[at].any()))
    table = np.array(rows, dtype=float).reshape(len(counts), 5)
    repeats = max((int((x == count).sum()) for count in counts), default=0)
    median, low, high, p50_median, any_saturated = table.T
    return Points(counts, median, low, high, p50_median, any_saturated.astype(bool), repeats)


def worst_latency(runs: Sequence[Run]) -> Figure:
    """The burn-in chart: worst end-to-end latency against subscribers, with its spread over
    repeats, the ceiling, saturated and invalid steps, and where a run stopped short."""
    fig, (ax,) = new_figure(runs, "Worst-case end-to-end latency per step", rows=1, height=5.6)
    marked = invalid = capped = False
    handles = []
    repeated = False
    for i, run in enumerate(runs):
        points = per_count(run)
        x, worst, low, high, saturated = downsample(
            points.x, points.median, points.low, points.high, points.saturated
        )
        label = run.label
        if points.repeats > 1:
            repeated = True
            label += f" ({points.repeats} steps per point)"
        if len(x) < len(points.x):
            label += f" ({len(points.x)} points in {len(x)} bins)"
        if run.stopped_early:
            label += f" ({run.stopped_early}: a lower bound)"
        handles.append(Line2D([], [], color=color(i), marker="o", markersize=4, label=label))
        capacity = run.capacity
        if capacity is not None:
            count, reached = capacity
            found = f"capacity {count:,}" if reached else f"at least {count:,} under its ceiling"
            ax.axvline(count, color=color(i), **CAPACITY, label="_capacity")
            handles.append(
                Line2D([], [], color=color(i), **CAPACITY, label=f"{run.label}: {found}")
            )
        container = ax.errorbar(
            x,
            worst,
            yerr=[np.nan_to_num(worst - low), np.nan_to_num(high - worst)],
            color=color(i),
            marker="o",
            markersize=4,
            capsize=3,
            elinewidth=1,
            alpha=0.9,
        )
        container.lines[0].set_label(label)
        ax.plot(
            points.x,
            points.p50,
            linestyle=":",
            color=color(i),
            linewidth=1,
            label=f"{run.label} p50",
        )
        marked |= mark_saturated(ax, x, worst, saturated)
        invalid |= mark_invalid(ax, run)
        valid = np.isfinite(worst)
        if run.stopped_early and valid.any():
            last = np.flatnonzero(valid)[-1]
            ax.plot([x[last]], [worst[last]], color=color(i), **CAPPED, label=CAPPED_LABEL)
            capped = True
    from_zero(ax)
    mark_ceilings(ax, runs)
    ax.set_ylabel("worst-case latency (ms)")
    styles: dict[str, Any] = {"worst": "-", "p50": ":"}
    if repeated:
        styles = {
            "worst (median of the repeats)": "-",
            "p50": ":",
            "bar: lowest to highest worst of the repeats": {"marker": "|", "markersize": 9},
        }
    style_legend(ax, styles, loc="upper center")  # the ceiling is named at the upper left
    extra = [Line2D([], [], color="dimgray", **CAPPED, label=CAPPED_LABEL)] if capped else []
    figure_legend(fig, handles + extra + saturation_handle(marked) + invalid_handle(invalid))
    return fig


def mark_ceilings(ax: Axes, runs: Sequence[Run]) -> None:
    """Each run's own ceiling in its colour; one far above every step is named at the top
    instead of drawn (it would flatten the steps into the bottom)."""
    data_top = highest(ax)
    ceilings = {i: run.ceiling * MS for i, run in enumerate(runs) if math.isfinite(run.ceiling)}
    drawn = {i: c for i, c in ceilings.items() if c <= CEILING_ZOOM * data_top}
    top = max([ax.get_ylim()[1], *(c * 1.1 for c in drawn.values())])
    ax.set_ylim(0, top)
    for i, ceiling in ceilings.items():
        on_scale = i in drawn
        if on_scale:
            ax.axhline(ceiling, color=color(i), linestyle="--", linewidth=1.2, label="_ceiling")
        name = "" if len(runs) == 1 else f"{runs[i].label}: "
        ax.annotate(
            f"{name}ceiling {ceiling:g} ms" + ("" if on_scale else " (above this scale)"),
            xy=(0.005, ceiling if on_scale else top),
            xycoords=("axes fraction", "data"),
            xytext=(0, (3 if on_scale else -12) - 11 * i),
            textcoords="offset points",
            color=color(i),
            fontsize="small",
        )


def percentiles(runs: Sequence[Run]) -> Figure:
    """p50 / p90 / p99 / worst of each latency leg, one subplot per leg."""
    fig, axes = new_figure(runs, "Latency percentiles per leg", rows=3, height=10)
    for ax, leg in zip(axes, LEG_TITLES, strict=True):
        for i, run in enumerate(runs):
            x = subscribers(run)
            for stat, style in STAT_STYLES.items():
                ax.plot(
                    x,
                    latency_ms(run, leg, stat),
                    linestyle=style,
                    label=f"{run.label} {stat}",
                    **run_style(i, x),
                )
        ax.set_title(LEG_TITLES[leg], fontsize="medium")
        latency_axis(ax)
    style_legend(axes[0], STAT_STYLES)
    figure_legend(fig, run_handles(runs))
    return fig


def delivery(runs: Sequence[Run]) -> Figure:
    """Delivered against expected per step, and the loss and duplicates as shares of expected."""
    fig, (counts, shares) = new_figure(runs, "Deliveries and loss per step", rows=2, height=7.5)
    for i, run in enumerate(runs):
        x = subscribers(run)
        expected = series(run, lambda s: s.expected)
        style = run_style(i, x)
        counts.plot(
            x,
            series(run, lambda s: s.delivered),
            label=f"{run.label} delivered",
            **style,
            **DELIVERED,
        )
        counts.plot(x, expected, linestyle="--", label=f"{run.label} expected", color=color(i))
        with np.errstate(divide="ignore", invalid="ignore"):
            lost = series(run, lambda s: s.lost) * 100 / expected
            dups = series(run, lambda s: s.duplicates) * 100 / expected
        shares.plot(x, lost, label=f"{run.label} lost", **style)
        shares.plot(x, dups, linestyle=":", label=f"{run.label} duplicates", **style)
    if spans_decades(plotted(counts)):
        log_scale(counts, "y", si)
    counts.yaxis.set_major_formatter(FuncFormatter(si))
    counts.set_ylabel("deliveries per step (count)")
    counts.set_title("delivered vs expected", fontsize="medium")
    from_zero(shares)
    shares.set_ylabel("share of expected (%)")
    shares.set_title("lost and duplicated deliveries", fontsize="medium")
    style_legend(counts, {"expected": "--", "delivered": DELIVERED})
    style_legend(shares, {"lost": "-", "duplicates": ":"})
    figure_legend(fig, run_handles(runs))
    return fig


def resources(runs: Sequence[Run]) -> Figure:
    """Server CPU, load-generator CPU (a panel each, so colour still tells the runs apart),
    server memory and its growth per subscriber."""
    fig, (cpu, loadgen_cpu, rss, per_sub) = new_figure(
        runs, "Server CPU and memory, load-generator CPU", rows=4, height=12
    )
    marked = channels_mode = stale = False
    for i, run in enumerate(runs):
        x = subscribers(run)
        style = run_style(i, x)
        loadgen = series(run, lambda s: s.loadgen_cpu)
        cpu.plot(x, series(run, lambda s: s.server_cpu), label=f"{run.label} server", **style)
        loadgen_cpu.plot(x, loadgen, label=f"{run.label} load generator", **style)
        saturated = series(run, lambda s: s.saturated).astype(bool)
        marked |= mark_saturated(loadgen_cpu, x, loadgen, saturated)
        rss.plot(x, series(run, lambda s: s.server_rss) / MIB, label=run.label, **style)
        per_sub.plot(x, per_subscriber_kib(run), label=run.label, **style)
        if run.test == "channels":
            channels_mode = True
            per_sub.plot(
                x, per_channel_kib(run), linestyle="--", label=f"{run.label} per channel", **style
            )
        stale |= run.fresh is False
    for ax in (cpu, loadgen_cpu):
        ax.axhline(SATURATION_PERCENT, **SATURATION_LINE)
        from_zero(ax, at_least=100)
        ax.set_ylabel("CPU (% of one core)")
    cpu.set_title("server CPU (its busiest worker process)", fontsize="medium")
    loadgen_cpu.set_title("busiest load-generator process's CPU", fontsize="medium")
    from_zero(rss)
    rss.set_ylabel("server RSS (MiB)")
    rss.set_title("server resident memory", fontsize="medium")
    from_zero(per_sub)
    per_sub.set_ylabel("over the baseline (KiB)")
    title = "server memory per subscriber: (RSS - RSS before the run) / subscribers it holds"
    if stale:
        title += "\n(a server that had served before reuses memory it kept: reads low)"
    per_sub.set_title(title, fontsize="medium")
    if channels_mode:
        style_legend(per_sub, {"per subscriber": "-", "per channel (with its history)": "--"})
    line = Line2D([], [], **SATURATION_LINE)
    figure_legend(fig, [*run_handles(runs), line, *saturation_handle(marked)])
    return fig


def _has_probe(runs: Sequence[Run]) -> bool:
    return any(step.probe for run in runs for step in run.steps)


def probe(runs: Sequence[Run]) -> Figure:
    """The independent probe subscriber's latency beside the load generator's subscribers."""
    fig, axes = new_figure(
        [run for run in runs if _has_probe([run])], "Probe subscriber latency", rows=2, height=7.5
    )
    styles = {"probe p50": ":", "probe worst": "-", "load-generator subscribers worst": "--"}
    for ax, leg in zip(axes, ("fanout", "e2e"), strict=True):
        for i, run in enumerate(runs):
            if not _has_probe([run]):
                continue
            x = subscribers(run)
            style = run_style(i, x)
            for stat in ("p50", "worst"):
                ax.plot(
                    x,
                    latency_ms(run, leg, stat, probe=True),
                    linestyle=STAT_STYLES[stat],
                    label=f"{run.label} probe {stat}",
                    **style,
                )
            ax.plot(
                x,
                latency_ms(run, leg, "worst"),
                linestyle="--",
                linewidth=0.8,
                alpha=0.6,
                label=f"{run.label} subscribers worst",
                **style,
            )
        ax.set_title(LEG_TITLES[leg], fontsize="medium")
        latency_axis(ax)
    style_legend(axes[0], styles)
    figure_legend(fig, run_handles(runs, shown=lambda run: _has_probe([run])))
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
        "Worst end-to-end latency against the subscribers connected, the dotted line its "
        "median (p50). With --repeats, each point is the median of the steps measured at that "
        "count and its bar runs from their lowest to their highest worst case. Each run's "
        "ceiling (dashed) and the capacity it found (dotted, vertical; also in the legend) are "
        "drawn in the run's colour; a triangle marks where a run stopped before "
        "reaching its ceiling (a lower bound), a question mark an invalid step. Over "
        f"{MAX_POINTS} points, consecutive points are binned (worst of the bin).",
        worst_latency,
    ),
    ChartSpec(
        "latency-over-time",
        "Latency over time",
        "End-to-end latency of the deliveries that arrived in each second of the run: p50 "
        "(dotted), p99 (dashed), p99.9 (dash-dot) and worst (solid), measured from each "
        "message's planned publish time (corrected for coordinated omission). Thin vertical "
        "lines mark where each step began publishing, with its subscriber count at the bottom; a "
        "red line marks a --fault command.",
        over_time,
        has_windows,
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
        "Server CPU, the busiest load-generator process's CPU (a panel each), and the server's "
        "resident memory. CPU is a share of one core (100 % = one core busy). Memory per "
        "subscriber is the marginal cost against the run's own baseline: RSS above the "
        "server's before the run's first subscriber, divided by the subscribers that server "
        "process gained (with several server workers, those of the worker measured); in the "
        "channels test also per channel, each holding its own history. A server that had "
        "served before the run keeps memory it reuses, so its figures read low (the report "
        "says so). Red crosses "
        "mark saturated steps: there the load generator, not the server, limits what was "
        "measured.",
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
