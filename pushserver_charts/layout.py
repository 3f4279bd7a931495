"""The frame every chart shares: figure and title, subscriber axis, scales, legends, series.

Figures are built on the Agg canvas directly (no pyplot), so nothing needs a display and nothing
lingers in global state. Runs overlay on the same axes, one colour per run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from pushserver_charts.results import SATURATION_PERCENT, Run, Step

DPI = 120
WIDTH = 10.0
MAX_POINTS = 40
LOG_SPAN = 100
MS = 1000.0
MIB = 1024.0 * 1024.0
SATURATED: dict[str, Any] = {
    "marker": "X",
    "color": "red",
    "markersize": 9,
    "linestyle": "none",
    "zorder": 5,
}
SATURATED_LABEL = f"load generator saturated (CPU ≥ {SATURATION_PERCENT} %)"
INVALID: dict[str, Any] = {
    "marker": "$?$",
    "color": "black",
    "markersize": 11,
    "linestyle": "none",
    "zorder": 5,
}
INVALID_LABEL = "invalid step: nothing trustworthy measured (see the report's table)"
COUNT_LABEL = "subscribers connected"
SUBTITLE_WIDTH = 110
LEGEND_WIDTH = 150
"""Characters of legend text that fit side by side across a figure at the small font size."""


def series(run: Run, value: Callable[[Step], float]) -> np.ndarray:
    return np.array([value(step) for step in run.steps], dtype=float)


def latency_ms(run: Run, leg: str, stat: str, *, probe: bool = False) -> np.ndarray:
    """One statistic of one leg per step, in milliseconds (NaN where a step has none)."""

    def value(step: Step) -> float:
        legs = step.probe if probe else step.latency
        return getattr(legs[leg], stat) * MS if legs and not step.invalid else math.nan

    return series(run, value)


def subscribers(run: Run) -> np.ndarray:
    return series(run, lambda step: step.subscribers)


def color(index: int) -> str:
    return f"C{index % 10}"


def run_style(index: int, x: np.ndarray) -> dict[str, Any]:
    """A run's colour, with a dot on each step unless the steps are too many to tell apart."""
    return {"color": color(index), "marker": "." if len(x) <= MAX_POINTS else None}


def si(value: float, _position: object = None) -> str:
    """Counts as 500, 2k, 1.5M: readable tick labels on the subscriber axis."""
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:g}"


def plain(value: float, _position: object = None) -> str:
    """Latency ticks as plain numbers (0.5, 20, 1,500), never 10^3 or 1e+03."""
    if value >= 1:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def log_scale(ax: Axes, which: str, formatter: Callable[[float, object], str]) -> None:
    """A log axis ("x" or "y") labelled at 1, 2 and 5 times each power of ten in the given
    format; minor ticks stay unlabelled (matplotlib would label them in scientific notation)."""
    axis = ax.xaxis if which == "x" else ax.yaxis
    (ax.set_xscale if which == "x" else ax.set_yscale)("log")
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(formatter))
    axis.set_minor_formatter(NullFormatter())


def spans_decades(values: np.ndarray) -> bool:
    positive = values[np.isfinite(values) & (values > 0)]
    return positive.size > 0 and positive.max() / positive.min() >= LOG_SPAN


def describe(runs: Sequence[Run]) -> str:
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


def new_figure(
    runs: Sequence[Run], title: str, rows: int, height: float, x_label: str = ""
) -> tuple[Figure, list[Axes]]:
    """A figure of `rows` panels sharing the subscriber axis (or, with `x_label`, another)."""
    fig = Figure(figsize=(WIDTH, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    axes = list(fig.subplots(rows, 1, sharex=True, squeeze=False)[:, 0])
    fig.suptitle(f"{title}\n{describe(runs)}", fontsize=11)
    for ax in axes:
        ax.grid(True, which="major", alpha=0.3)
    bottom = axes[-1]
    if x_label:
        bottom.set_xlabel(x_label)
        return fig, axes
    counts = np.concatenate([subscribers(run) for run in runs])
    if spans_decades(counts):
        log_scale(bottom, "x", si)
    bottom.xaxis.set_major_formatter(FuncFormatter(si))
    bottom.set_xlabel(COUNT_LABEL + (" (log scale)" if bottom.get_xscale() == "log" else ""))
    return fig, axes


def run_handles(
    runs: Sequence[Run], shown: Callable[[Run], bool] = lambda run: True
) -> list[Line2D]:
    """One legend entry per run, in the run's colour (the colour follows the run's position)."""
    return [
        Line2D([], [], color=color(i), label=run.label) for i, run in enumerate(runs) if shown(run)
    ]


def figure_legend(fig: Figure, handles: Sequence[Line2D]) -> None:
    """The figure's legend of runs, below the plots where it can never hide a line."""
    longest = max((len(str(handle.get_label())) for handle in handles), default=0)
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncols=max(1, min(len(handles), LEGEND_WIDTH // (longest + 8))),
        fontsize="small",
        frameon=False,
    )


def style_legend(
    ax: Axes,
    styles: Mapping[str, str | Mapping[str, Any]],
    loc: Literal["upper left", "upper center"] = "upper left",
) -> None:
    """Grey samples of each line style (a line style, or Line2D keywords) on the axes."""
    handles = [
        Line2D(
            [], [], color="dimgray", label=name, **({"linestyle": s} if isinstance(s, str) else s)
        )
        for name, s in styles.items()
    ]
    ax.legend(handles=handles, loc=loc, fontsize="x-small", ncols=len(handles))


def plotted(ax: Axes) -> np.ndarray:
    """Every finite y value of the lines on the axes."""
    values = np.concatenate([np.asarray(line.get_ydata(), float) for line in ax.get_lines()])
    return values[np.isfinite(values)]


def highest(ax: Axes) -> float:
    values = plotted(ax)
    return float(values.max()) if values.size else 0.0


def from_zero(ax: Axes, at_least: float = 1.0) -> None:
    """A linear scale from zero with headroom, so flat lines do not hug the frame."""
    ax.set_ylim(0, max(highest(ax) * 1.1, at_least))


def latency_axis(ax: Axes) -> None:
    """Milliseconds; log scale when the lines span decades, else linear from zero."""
    if spans_decades(plotted(ax)):
        log_scale(ax, "y", plain)
        ax.set_ylabel("latency (ms, log scale)")
    else:
        from_zero(ax)
        ax.set_ylabel("latency (ms)")


def mark_saturated(ax: Axes, x: np.ndarray, y: np.ndarray, saturated: np.ndarray) -> bool:
    if saturated.any():
        ax.plot(x[saturated], y[saturated], **SATURATED, label=SATURATED_LABEL)
    return bool(saturated.any())


def saturation_handle(marked: bool) -> list[Line2D]:
    return [Line2D([], [], **SATURATED, label=SATURATED_LABEL)] if marked else []


def mark_invalid(ax: Axes, run: Run) -> bool:
    """Invalid steps as question marks on the subscriber axis: counted, never plotted as data."""
    x = [step.subscribers for step in run.steps if step.invalid]
    if x:
        ax.plot(x, [0.0] * len(x), **INVALID, label=INVALID_LABEL, clip_on=False)
    return bool(x)


def invalid_handle(marked: bool) -> list[Line2D]:
    return [Line2D([], [], **INVALID, label=INVALID_LABEL)] if marked else []
