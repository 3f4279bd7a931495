"""The burn-in's answer in words: how many subscribers held under the ceiling, and who set it.

Written once from step lines (docs/results-format.md), so the run's last line and the HTML
report's headline say exactly the same thing. A run stopped before its ceiling gives a lower
bound ("at least N"), never a capacity; a run whose steps became invalid gives no figure past
the last valid step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

CROWD_OVER_PROBE = 2.0  # crowd worst this many times the probe's: the load generator's latency
BUSY = 90.0  # % of one core used + waited for: that side was short of CPU
AGREEING = 3  # steps read for the side: the deciding one and the valid ones just before it
AT_LEAST = 2  # fewer steps with a probe than this: undecided

STOPPED_BY = {
    "max": "stopped by --max before reaching the ceiling",
    "time": "stopped by --max-minutes before reaching the ceiling",
    "publisher": "stopped because the publisher fell behind its rate",
    "interrupted": "interrupted before reaching the ceiling",
}


@dataclass(frozen=True)
class Point:
    """What the verdict needs from one step line; None where the line lacks a figure."""

    step: int
    subscribers: int
    worst: float | None  # crowd end-to-end, seconds
    probe_worst: float | None
    server_cpu: float | None  # % of one core
    server_wait: float | None
    loadgen_cpu: float | None
    loadgen_wait: float | None
    invalid: str

    @classmethod
    def from_line(cls, line: dict[str, Any]) -> Point:
        def figure(section: Any, key: str) -> float | None:
            value = section.get(key) if isinstance(section, dict) else None
            return float(value) if isinstance(value, int | float) else None

        probe = line.get("probe") or {}
        server, loadgen = line.get("server") or {}, line.get("loadgen") or {}
        return cls(
            step=int(line["step"]),
            subscribers=int(line["subscribers"]),
            worst=figure(line["latency"].get("e2e"), "worst"),
            probe_worst=figure(probe.get("e2e"), "worst"),
            server_cpu=figure(server, "cpu_percent"),
            server_wait=figure(server, "cpu_wait_percent"),
            loadgen_cpu=figure(loadgen, "cpu_percent"),
            loadgen_wait=figure(loadgen, "cpu_wait_percent"),
            invalid=str(line.get("invalid") or ""),
        )


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms"


def _load(cpu: float | None, wait: float | None) -> str:
    if cpu is None:
        return "unknown"
    return f"{cpu:.0f} %" + ("" if wait is None else f" + {wait:.0f} % run-queue wait")


def _busy(cpu: float | None, wait: float | None) -> bool:
    return cpu is not None and cpu + (wait or 0.0) >= BUSY


def step_side(point: Point) -> str:
    """Who set one step's latency, in words: the load generator when its crowd saw over
    CROWD_OVER_PROBE times the probe's worst case, else the side short of CPU. One step's
    reading; the run's verdict asks several steps to agree (latency_side)."""
    if point.worst is not None and point.probe_worst is not None:
        ratio = point.worst / max(point.probe_worst, 1e-9)
        figure = f"crowd worst {ratio:.1f}x the probe's"
        if ratio > CROWD_OVER_PROBE:
            return f"latency set by the load generator: {figure}"
        return f"latency set by the server (the probe saw it too): {figure}"
    if _busy(point.loadgen_cpu, point.loadgen_wait):
        return "latency set by the load generator (short of CPU, no probe)"
    if _busy(point.server_cpu, point.server_wait):
        return "latency set by the server (short of CPU, no probe)"
    return "latency source unknown (no probe)"


def latency_side(points: Sequence[Point]) -> str:
    """Which side set the latency of the last of `points` (the deciding step; the others are
    the valid steps just before it).

    The probe (a lone subscriber in its own process) against the crowd: the load generator
    when the crowd's worst case is over CROWD_OVER_PROBE times the probe's in every one of the
    last AGREEING steps, the server when it is at most that in every one; undecided when they
    disagree or fewer than AT_LEAST steps have a probe, so one odd sample never flips it.
    """
    point = points[-1]
    loads = (
        f"CPU of one core: server {_load(point.server_cpu, point.server_wait)}, "
        f"load generator {_load(point.loadgen_cpu, point.loadgen_wait)}"
    )
    compared = [
        (p.worst, p.probe_worst)
        for p in points[-AGREEING:]
        if p.worst is not None and p.probe_worst is not None
    ]
    if point.worst is not None and point.probe_worst is not None:
        figures = f"crowd worst {_ms(point.worst)}, probe worst {_ms(point.probe_worst)}"
        crowd_side = [crowd > CROWD_OVER_PROBE * probe for crowd, probe in compared]
        steps = f"{len(compared)} steps"
        if len(compared) < AT_LEAST:
            side = "undecided (one step with a probe is too few to tell)"
            return f"latency source {side}: {figures}; {loads}"
        if all(crowd_side):
            side = f"the load generator (its subscribers saw far more than the probe in {steps})"
        elif not any(crowd_side):
            side = f"the server (the probe saw it too in {steps})"
        else:
            ratios = ", ".join(f"{crowd / max(probe, 1e-9):.1f}" for crowd, probe in compared)
            return (
                f"latency source undecided (crowd/probe worst over the last {steps}: "
                f"{ratios}; the side is named only when they agree): {figures}; {loads}"
            )
        return f"latency set by {side}: {figures}; {loads}"
    if _busy(point.loadgen_cpu, point.loadgen_wait):
        return f"latency set by the load generator (short of CPU, no probe to compare): {loads}"
    if _busy(point.server_cpu, point.server_wait):
        return f"latency set by the server (short of CPU, no probe to compare): {loads}"
    return f"latency source unknown (no probe to compare): {loads}"


def verdict(points: Sequence[Point], ceiling: float, reason: str | None) -> str:
    """The run's answer from its steps and end reason (None: the run has no end line)."""
    limit = f"the {ceiling:g} s ceiling"
    invalid = next((p for p in points if p.invalid), None)
    valid = [p for p in points if not p.invalid and (invalid is None or p.step < invalid.step)]
    if invalid is not None:
        held = f"; at least {valid[-1].subscribers:,} subscribers held before it" if valid else ""
        return (
            f"no capacity under {limit}: step {invalid.step} is invalid ({invalid.invalid}){held}"
        )
    if not valid:
        return f"no capacity under {limit}: no step finished"
    last = valid[-1]
    if reason == "ceiling":
        below = [p.subscribers for p in valid if p.subscribers < last.subscribers]
        figure = f"{max(below):,}" if below else f"fewer than {last.subscribers:,}"
        return (
            f"capacity under {limit}: {figure} subscribers (ceiling passed at step {last.step}, "
            f"{last.subscribers:,} subscribers); {latency_side(valid)}"
        )
    stopped = STOPPED_BY.get(reason or "interrupted", f"stopped ({reason})")
    return (
        f"capacity under {limit}: at least {last.subscribers:,} subscribers ({stopped}); "
        f"{latency_side(valid)}"
    )
