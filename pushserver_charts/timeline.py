"""The percentiles-over-time chart: end-to-end latency per 1-s window of arrival over a run,
with where each step began and where a --fault command ran."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from pushserver_charts.layout import (
    MS,
    color,
    figure_legend,
    latency_axis,
    new_figure,
    run_handles,
    style_legend,
)
from pushserver_charts.results import Run, is_number

OVER_TIME_STYLES = {"p50": ":", "p99": "--", "p999": "-.", "worst": "-"}
FAULT_LINE: dict[str, Any] = {"color": "red", "linewidth": 1.2, "linestyle": "-", "alpha": 0.7}
FAULT_LABEL = "--fault command started"


def has_windows(runs: Sequence[Run]) -> bool:
    return any(step.windows for run in runs for step in run.steps)


def over_time(runs: Sequence[Run]) -> Figure:
    """End-to-end latency percentiles per 1-s window of arrival, over the run: where in a step
    the latency rose, and how it recovered after a fault."""
    shown = [run for run in runs if has_windows([run])]
    fig, (ax,) = new_figure(
        shown,
        "End-to-end latency over time (1-s windows, from the planned publish time)",
        rows=1,
        height=5.6,
        x_label="seconds since the run's first delivery",
    )
    faulted = False
    for i, run in enumerate(runs):
        windows = [w for step in run.steps if not step.invalid for w in step.windows]
        if not windows:
            continue
        origin = min(w.second for w in windows)
        x = np.array([w.second - origin for w in windows])
        for stat, style in OVER_TIME_STYLES.items():
            y = np.array([getattr(w, stat) * MS for w in windows])
            ax.plot(x, y, linestyle=style, color=color(i), label=f"{run.label} {stat}")
        for step in run.steps:
            if math.isfinite(step.started) and not step.invalid:
                at = step.started - origin
                ax.axvline(at, color=color(i), linewidth=0.6, alpha=0.3, label="_step")
                ax.annotate(
                    f"{step.subscribers:,}",
                    xy=(at, 0.0),
                    xycoords=("data", "axes fraction"),
                    xytext=(2, 3 + 9 * i),
                    textcoords="offset points",
                    color=color(i),
                    fontsize="x-small",
                )
            if step.fault and is_number(step.fault.get("started")):
                ax.axvline(step.fault["started"] - origin, **FAULT_LINE, label="_fault")
                faulted = True
    latency_axis(ax)
    style_legend(ax, OVER_TIME_STYLES, loc="upper center")
    extra = [Line2D([], [], **FAULT_LINE, label=FAULT_LABEL)] if faulted else []
    figure_legend(fig, [*run_handles(runs, shown=lambda run: run in shown), *extra])
    return fig
